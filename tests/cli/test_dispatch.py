"""The CLI imports only the invoked command's module (cold start of `clio-acp acp`)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import subprocess_env

_PROBE = """
import sys
from clio_acp.cli import main
code = main({argv!r})
heavy = sorted(m for m in ("clio_acp.agent", "clio_acp.models.client", "clio_acp.memory.policy") if m in sys.modules)
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
sys.stderr.write("WATCHFILES=" + str("watchfiles" in sys.modules) + "\\n")
sys.exit(code)
"""


def _run_probe(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )


def test_a_light_command_does_not_import_the_agent_models_or_policy():
    result = _run_probe(["--log-level", "ERROR", "paths", "--json"])
    assert result.returncode == 0, result.stderr
    assert "HEAVY=\n" in result.stderr


def test_settings_are_read_without_importing_the_file_watcher():
    # watchfiles is imported by the settings watcher itself (a long-running face), not by
    # every command that reads settings (issue 18: start-up).
    result = _run_probe(["--log-level", "ERROR", "settings", "show"])
    assert result.returncode == 0, result.stderr
    assert "WATCHFILES=False\n" in result.stderr


def test_help_still_lists_every_command(run_cli):
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("acp", "lsp", "memory", "replay", "run", "targets", "usage", "paths"):
        assert command in result.stdout


def test_unknown_command_is_a_usage_error(run_cli):
    result = run_cli("no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
