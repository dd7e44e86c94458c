"""Ordinary command-line mistakes are usage errors (exit 2) with a clear message."""

from __future__ import annotations

import json


def test_run_with_unknown_target_is_usage_error_before_any_session(run_cli) -> None:
    proc = run_cli("run", "--target", "nope", "hi")
    assert proc.returncode == 2, proc.stderr
    assert "no target 'nope' (known: " in proc.stderr
    assert "Traceback" not in proc.stderr
    listed = run_cli("sessions", "--json")
    assert json.loads(listed.stdout)["sessions"] == []
