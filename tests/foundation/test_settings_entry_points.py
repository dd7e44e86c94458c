"""Every entry point resolves settings one way (``clio_acp.settings.open_settings``):
``$CLIO_ACP_SETTINGS`` names the file and the environment overrides lay over it.

Each test puts the only settings file outside the config folder, points
``CLIO_ACP_SETTINGS`` at it and overrides the chat model with ``CLIO_ACP_CHAT_MODEL``;
an entry point that read ``<config>/settings.yaml`` or skipped the environment would
see no target or the file's model. ``run`` starts a real process (the environment
reaches a child as it is); ``doctor`` and ``targets`` run in process (``invoke_cli``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import text_block

from tests.support.acp_client import acp_agent
from tests.support.model_server import Reply

ENV_MODEL = "model-from-env"


@pytest.fixture
def custom_settings(model_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    path = tmp_path / "elsewhere" / "custom.yaml"
    path.parent.mkdir()
    path.write_text(model_server.settings_yaml(memory=True, model="model-from-file"))
    env = {
        "CLIO_ACP_SETTINGS": str(path),
        "CLIO_ACP_CHAT_MODEL": ENV_MODEL,
        "CLIO_ACP_MEMORY_ENABLED": "false",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {"path": path, "env": env}


def test_open_settings_reads_the_named_file_then_the_environment(custom_settings, tmp_path):
    from clio_acp.settings import open_settings

    store = open_settings(tmp_path / "unused-config")
    assert store.error is None and store.path == custom_settings["path"]
    assert store().chat.target == "scripted" and store().chat.model == ENV_MODEL
    assert store().context.memory.enabled is False


def test_run_uses_settings_env_file_and_overrides(run_cli, model_server, custom_settings, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    model_server.push(Reply(text="hi"))
    result = run_cli("run", "--workspace", str(ws), "hello", timeout=240)
    assert result.returncode == 0, result.stderr
    assert model_server.bodies[0]["model"] == ENV_MODEL


def test_doctor_uses_settings_env_file_and_overrides(invoke_cli, custom_settings):
    result = invoke_cli("doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["settings"]["file"] == str(custom_settings["path"])
    assert report["settings"]["memoryEnabled"] is False


def test_targets_uses_settings_env_file_and_overrides(invoke_cli, custom_settings):
    result = invoke_cli("targets", "--json")
    assert result.returncode == 0, result.stderr
    [row] = [t for t in json.loads(result.stdout)["targets"] if t["id"] == "scripted"]
    assert f"chat({ENV_MODEL})" in row["roles"]


def test_replay_uses_settings_env_file_and_overrides(custom_settings):
    from clio_acp.cli.replay_cmd import _load_settings

    settings = _load_settings()
    assert settings.chat.target == "scripted" and settings.chat.model == ENV_MODEL
    assert settings.context.memory.enabled is False


def test_eval_uses_settings_env_file_and_overrides(custom_settings):
    from clio_acp.cli.eval_cmd import _settings

    settings = _settings()
    assert settings.chat.target == "scripted" and settings.chat.model == ENV_MODEL
    assert settings.context.memory.enabled is False


def test_lsp_uses_settings_env_file_and_overrides(custom_settings):
    from clio_acp.lsp.server import ClioLanguageServer

    settings = ClioLanguageServer().settings_reader()
    assert settings.chat.target == "scripted" and settings.chat.model == ENV_MODEL
    assert settings.context.memory.enabled is False


async def test_acp_uses_settings_env_file_and_overrides(model_server, custom_settings, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    model_server.push(Reply(text="hi"))
    async with acp_agent(env=custom_settings["env"]) as (conn, _client, _proc):
        await conn.initialize(protocol_version=1)
        new = await conn.new_session(cwd=str(ws), mcp_servers=[])
        result = await conn.prompt(session_id=new.session_id, prompt=[text_block("hello")])
    assert result.stop_reason == "end_turn"
    assert model_server.bodies[0]["model"] == ENV_MODEL
