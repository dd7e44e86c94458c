"""The stdio servers end cleanly when stdin is already at end of input.

Regression: ``clio-acp acp < /dev/null`` registered ``/dev/null`` (a character device
epoll refuses) with the event loop, logged an asyncio traceback and never exited.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

TIMEOUT_S = 60


def _run(command: str, stdin) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "clio_acp", command],
        stdin=stdin,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=TIMEOUT_S,
    )


@pytest.mark.parametrize("kind", ["devnull", "empty-file", "closed-pipe"])
@pytest.mark.parametrize(("command", "expected_rc"), [("acp", 0), ("lsp", 1)])
def test_server_exits_cleanly_when_stdin_is_at_eof(
    tmp_path: Path, command: str, expected_rc: int, kind: str
) -> None:
    # LSP 3.17 "exit": without a prior shutdown the exit code is 1.
    if kind == "devnull":
        proc = _run(command, subprocess.DEVNULL)
    elif kind == "empty-file":
        empty = tmp_path / "empty"
        empty.write_bytes(b"")
        with empty.open("rb") as fh:
            proc = _run(command, fh)
    else:
        proc = subprocess.run(
            [sys.executable, "-m", "clio_acp", command],
            input="",
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=TIMEOUT_S,
        )
    assert proc.returncode == expected_rc, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
