from __future__ import annotations

import pytest

from clio_acp.settings import MEMORY_TIMEOUT_MS_DEFAULT, Settings, SettingsError, load_settings


def test_memory_defaults_match_the_spec():
    memory = Settings().context.memory
    assert memory.enabled is True
    assert memory.target is None and memory.model is None
    assert memory.cadence_tool_calls == 10
    assert memory.trajectory_steps == 8
    assert memory.max_output_tokens == 2000
    assert memory.timeout_ms == MEMORY_TIMEOUT_MS_DEFAULT == 60_000
    assert memory.loop_stop_repeats == 5


def test_yaml_uses_camel_case_keys(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("context:\n  memory:\n    cadenceToolCalls: 4\n    enabled: false\n")
    memory = load_settings(path).context.memory
    assert memory.cadence_tool_calls == 4
    assert memory.enabled is False


def test_cadence_below_two_is_raised_to_two():
    assert (
        Settings.model_validate(
            {"context": {"memory": {"cadenceToolCalls": 1}}}
        ).context.memory.cadence_tool_calls
        == 2
    )


def test_unknown_key_is_rejected(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("context:\n  memory:\n    cadenceToolCall: 4\n")
    with pytest.raises(SettingsError, match="cadenceToolCall") as info:
        load_settings(path)
    assert info.value.line == 3


def test_missing_file_gives_defaults(tmp_path):
    assert load_settings(tmp_path / "nope.yaml") == Settings()
