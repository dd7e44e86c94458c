"""ACP modes and config options: ``session/set_mode`` and
``session/set_config_option`` (permission mode, chat model)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from acp import text_block
from acp.exceptions import RequestError

from tests.acp.conftest import start_session
from tests.support.acp_client import acp_agent
from tests.support.model_server import Reply
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def _two_target_settings(model_server) -> None:
    """Targets ``first`` (model-a, the chat route) and ``second`` (model-b), both
    served by the scripted server."""
    config = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.yaml").write_text(
        "version: 2\ntargets:\n"
        f"  - id: first\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-a\n"
        f"  - id: second\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-b\n"
        "chat:\n  target: first\n  model: model-a\n"
        "context:\n  memory:\n    enabled: false\n"
    )


async def test_mode_changes_keep_config_options_and_legacy_modes_in_sync(model_server, workspace):
    model_server.install_settings()
    async with acp_agent() as (conn, client, _proc):
        new = await start_session(conn, workspace)
        sid = new.session_id
        ids = [o.id for o in new.config_options]
        assert [m.id for m in new.modes.available_modes] == [
            "ask",
            "accept-edits",
            "plan",
            "bypass",
        ]
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        via_config = await conn.set_config_option(
            config_id="mode", session_id=sid, value="accept-edits"
        )
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(config_id="mode", session_id=sid, value="yolo")
        tier = await conn.set_config_option(config_id="memory_tier", session_id=sid, value="off")

        def mode_updates_arrived() -> bool:
            modes = client.updates("current_mode_update", sid)
            return bool(client.updates("config_option_update", sid)) and bool(
                modes and modes[-1]["currentModeId"] == "accept-edits"
            )

        await wait_until(mode_updates_arrived, timeout_s=10)
    assert ids == ["mode", "model", "memory_tier"]
    assert bad.value.code == -32602
    current = {o.id: o.current_value for o in via_config.config_options}
    assert current["mode"] == "accept-edits"
    assert {o.id: o.current_value for o in tier.config_options}["memory_tier"] == "off"
    config_updates = client.updates("config_option_update", sid)
    assert {o["id"]: o["currentValue"] for o in config_updates[0]["configOptions"]}[
        "mode"
    ] == "plan"
    assert client.updates("current_mode_update", sid)[-1]["currentModeId"] == "accept-edits"


async def test_model_config_option_switches_a_running_session_between_turns(
    model_server, workspace
):
    _two_target_settings(model_server)
    model_server.push(
        Reply(text="one"),
        Reply(text=" ".join(f"w{i}" for i in range(40)), chunk_delay=0.05),
        Reply(text="two"),
    )
    async with acp_agent() as (conn, client, _proc):
        new = await start_session(conn, workspace)
        sid = new.session_id
        await conn.prompt(session_id=sid, prompt=[text_block("first turn")])
        # Mid-turn: refused with a clear error, the running turn is untouched.
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("talk")]))
        await wait_until(lambda: client.updates("agent_message_chunk", sid)[1:], timeout_s=60)
        with pytest.raises(RequestError) as busy:
            await conn.set_config_option(config_id="model", session_id=sid, value="second/model-b")
        assert (await turn).stop_reason == "end_turn"
        # Between turns: this session's next turn uses the new route.
        switched = await conn.set_config_option(
            config_id="model", session_id=sid, value="second/model-b"
        )
        await conn.prompt(session_id=sid, prompt=[text_block("second turn")])
    assert busy.value.code == -32602 and "running a turn" in json.dumps(busy.value.data)
    assert {o.id: o.current_value for o in switched.config_options}["model"] == "second/model-b"
    assert [b["model"] for b in model_server.bodies] == ["model-a", "model-a", "model-b"]


def _chat_model_settings(model_server) -> None:
    """Target ``first`` without a default model; the chat route names ``model-x``."""
    config = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.yaml").write_text(
        "version: 2\ntargets:\n"
        f"  - id: first\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "chat:\n  target: first\n  model: model-x\n"
        "context:\n  memory:\n    enabled: false\n"
    )


async def test_the_model_option_shows_the_chat_model_and_reselecting_it_keeps_it(
    model_server, workspace
):
    """Issue 21: a target without ``defaultModel`` whose chat route names a model shows
    that model (not the bare target id), and choosing it sends that model, not null."""
    _chat_model_settings(model_server)
    model_server.push(Reply(text="ok"))
    async with acp_agent() as (conn, _client, _proc):
        new = await start_session(conn, workspace)
        sid = new.session_id
        [model] = [o for o in new.config_options if o.id == "model"]
        chosen = await conn.set_config_option(
            config_id="model", session_id=sid, value="first/model-x"
        )
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
    assert model.current_value == "first/model-x"
    assert [o.value for o in model.options] == ["first/model-x"]
    assert chosen.config_options
    assert model_server.bodies[-1]["model"] == "model-x"
