"""Settings layers, error reporting and live reload (issue 5 item 4)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from clio_acp.settings import (
    Settings,
    SettingsError,
    SettingsStore,
    apply_overrides,
    load_settings,
    settings_path,
)
from tests.support.waiting import wait_until

GOOD = """\
targets:
  - id: box
    runtime: llamacpp
    url: http://127.0.0.1:8080/v1
chat:
  target: box
context:
  memory:
    cadenceToolCalls: 4
"""


def test_invalid_value_error_names_key_and_line(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("version: 2\ncontext:\n  memory:\n    timeoutMs: soon\n")
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    err = info.value
    assert err.key == "context.memory.timeoutMs" and err.line == 4
    assert "line 4" in str(err) and "context.memory.timeoutMs" in str(err)


def test_target_without_url_names_the_list_entry_and_its_line(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("chat:\n  target: a\ntargets:\n  - id: a\n    runtime: ollama\n")
    with pytest.raises(SettingsError, match="url is required") as info:
        load_settings(path)
    assert info.value.key == "targets[0]" and info.value.line == 4


def test_unknown_runtime_is_rejected_with_its_line(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("targets:\n  - id: a\n    runtime: tgi\n    url: http://x/v1\n")
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    assert info.value.key == "targets[0].runtime" and info.value.line == 3


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("chat:\n  target: a\n  model: [unclosed\nversion: 2\n")
    with pytest.raises(SettingsError, match="invalid YAML") as info:
        load_settings(path)
    assert info.value.line is not None and info.value.line >= 3


def test_duplicate_target_ids_are_rejected(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text(
        "targets:\n  - {id: a, runtime: openai, url: https://x/v1}\n"
        "  - {id: a, runtime: ollama, url: http://y/v1}\n"
    )
    with pytest.raises(SettingsError, match="duplicate target id"):
        load_settings(path)


def test_environment_overrides_the_file(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text(GOOD)
    env = {
        "CLIO_ACP_MEMORY_ENABLED": "false",
        "CLIO_ACP_CHAT_MODEL": "qwen3",
        "CLIO_ACP_SETTINGS_JSON": '{"context": {"memory": {"trajectory_steps": 3}}}',
    }
    settings = load_settings(path, env=env)
    assert settings.context.memory.enabled is False
    assert settings.context.memory.trajectory_steps == 3
    assert settings.context.memory.cadence_tool_calls == 4  # file value kept
    assert settings.chat.target == "box" and settings.chat.model == "qwen3"


def test_bad_environment_json_is_a_clear_error(tmp_path):
    with pytest.raises(SettingsError, match="CLIO_ACP_SETTINGS_JSON"):
        load_settings(tmp_path / "none.yaml", env={"CLIO_ACP_SETTINGS_JSON": "{nope"})


def test_settings_file_path_can_come_from_the_environment(tmp_path):
    assert settings_path(tmp_path, env={}) == tmp_path / "settings.yaml"
    other = tmp_path / "elsewhere.yaml"
    assert settings_path(tmp_path, env={"CLIO_ACP_SETTINGS": str(other)}) == other


def test_editor_overrides_merge_and_bad_ones_leave_settings_unchanged():
    base = Settings()
    merged = apply_overrides(base, {"context": {"memory": {"enabled": False}}})
    assert merged.context.memory.enabled is False
    assert merged.context.memory.cadence_tool_calls == 10
    with pytest.raises(SettingsError) as info:
        apply_overrides(base, {"context": {"memory": {"cadenceToolCalls": "often"}}})
    assert info.value.source == "editor" and info.value.key == "context.memory.cadenceToolCalls"
    assert base == Settings()


def test_store_keeps_previous_good_settings_when_the_file_turns_invalid(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text(GOOD)
    store = SettingsStore(path, env={})
    assert store().context.memory.cadence_tool_calls == 4 and store.error is None
    path.write_text(GOOD.replace("cadenceToolCalls: 4", "cadenceToolCalls: many"))
    assert store.reload() is False
    assert store().context.memory.cadence_tool_calls == 4
    assert store.error is not None and store.error.line == 9
    path.write_text(GOOD.replace("cadenceToolCalls: 4", "cadenceToolCalls: 6"))
    assert store.reload() is True
    assert store().context.memory.cadence_tool_calls == 6 and store.error is None


def test_store_rejects_bad_editor_overrides_and_keeps_the_old_ones(tmp_path):
    store = SettingsStore(tmp_path / "settings.yaml", env={})
    assert store.set_overrides({"permissions": {"mode": "plan"}}) is True
    assert store.set_overrides({"permissions": {"mode": "yolo"}}) is False
    assert store().permissions.mode == "plan"
    assert store.error is not None and store.error.key == "permissions.mode"


async def test_store_reloads_the_file_live(tmp_path):
    path = tmp_path / "cfg" / "settings.yaml"
    store = SettingsStore(path, env={})
    seen: asyncio.Queue[Settings] = asyncio.Queue()
    store.subscribe(seen.put_nowait)
    stop = asyncio.Event()
    watcher = asyncio.create_task(store.watch(stop, debounce_ms=50))
    await wait_until(path.parent.is_dir)  # the watcher creates the folder it watches
    async with asyncio.timeout(20):
        while seen.empty():  # the watcher may not be up yet: save until it reports one
            path.write_text("context:\n  memory:\n    enabled: false\n")
            with contextlib.suppress(AssertionError):
                await wait_until(lambda: not seen.empty(), timeout_s=0.5)
    fresh = seen.get_nowait()
    assert fresh.context.memory.enabled is False and store().context.memory.enabled is False
    path.write_text("context: [broken\n")
    await wait_until(lambda: store.error is not None)
    assert store().context.memory.enabled is False  # previous good stays
    stop.set()
    await asyncio.wait_for(watcher, timeout=10)
