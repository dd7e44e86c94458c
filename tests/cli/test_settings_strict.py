"""One-shot commands refuse to run on settings they cannot use (exit 2, reason on stderr).

Regression: an invalid settings.yaml was logged as "settings not applied, previous
settings stay" and the command went on with defaults, then failed with a misleading
"no chat route configured".
"""

from __future__ import annotations

from pathlib import Path

import pytest

COMMANDS = [
    ("run", "hello"),
    ("targets",),
    ("models", "--target", "local"),
    ("doctor",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_invalid_settings_file_stops_one_shot_command(invoke_cli, tmp_path: Path, command) -> None:
    bad = tmp_path / "settings.yaml"
    bad.write_text("chat:\n  target: 5\ncontext:\n  memory:\n    enabled: maybe\n")
    proc = invoke_cli(*command, env={"CLIO_ACP_SETTINGS": str(bad)})
    assert proc.returncode == 2, proc.stderr
    assert str(bad) in proc.stderr
    assert "line" in proc.stderr
    assert "no chat route" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_missing_settings_file_named_by_env_stops_one_shot_command(
    invoke_cli, tmp_path: Path, command
) -> None:
    missing = tmp_path / "nope.yaml"
    proc = invoke_cli(*command, env={"CLIO_ACP_SETTINGS": str(missing)})
    assert proc.returncode == 2, proc.stderr
    assert str(missing) in proc.stderr
    assert "does not exist" in proc.stderr
    assert proc.stdout == ""


def test_settings_show_still_reports_the_problem_with_exit_1(invoke_cli, tmp_path: Path) -> None:
    bad = tmp_path / "settings.yaml"
    bad.write_text("chat: [1\n")
    proc = invoke_cli("settings", "show", env={"CLIO_ACP_SETTINGS": str(bad)})
    assert proc.returncode == 1
    assert "NOT APPLIED" in proc.stdout
