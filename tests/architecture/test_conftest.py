"""The suite's own machinery in ``tests/conftest.py``: the rewritten-module cache the
xdist controller writes once for its workers, and the ``python3`` that shell commands
in tests find on ``PATH``, the check of ``SHARED_PROCESS_GROUPS``; and
``tests/support/acp_client.acp_agent``'s shutdown."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.assertion import rewrite

from tests.conftest import (
    REPO_ROOT,
    cache_rewritten_test_modules,
    check_shared_process_groups,
    partly_selected_modules,
)


def _cached(source: Path):
    pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)
    return rewrite._read_pyc(source, pyc)


def test_the_cache_holds_what_pytest_would_rewrite_and_follows_the_source(
    tmp_path: Path, pytestconfig: pytest.Config
):
    test_file = tmp_path / "test_sample.py"
    test_file.write_text("def test_sum():\n    assert 1 + 1 == 3\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text("X = 1\n", encoding="utf-8")
    (tmp_path / "helper.py").write_text("Y = 2\n", encoding="utf-8")
    (tmp_path / "test_broken.py").write_text("def test_(:\n", encoding="utf-8")

    assert cache_rewritten_test_modules(pytestconfig, tmp_path) == 2  # not helper, not broken
    _, fresh = rewrite._rewrite_test(test_file, pytestconfig)
    assert _cached(test_file) == fresh
    (test_sum,) = [c for c in fresh.co_consts if getattr(c, "co_name", "") == "test_sum"]
    assert any(name.startswith("@py_assert") for name in test_sum.co_varnames)  # rewritten
    assert cache_rewritten_test_modules(pytestconfig, tmp_path) == 0  # all current

    # pytest judges a cached module by the source's size and whole-second mtime, so an edit
    # of the same size within the same second would look current to pytest too: change both.
    test_file.write_text("def test_sum():\n    assert 2 + 2 == 50\n", encoding="utf-8")
    first_write = test_file.stat().st_mtime
    os.utime(test_file, (first_write + 2, first_write + 2))
    assert _cached(test_file) is None  # stale for pytest too
    assert cache_rewritten_test_modules(pytestconfig, tmp_path) == 1
    assert _cached(test_file) == rewrite._rewrite_test(test_file, pytestconfig)[1]


def test_python3_on_the_path_is_this_interpreter_without_the_test_environment():
    # `python3` in a shell command (a tool call, an eval task) is the interpreter
    # running the tests, with the standard library only (interpreter_first_on_path).
    probe = (
        "import importlib.util, json, sys; print(json.dumps([sys.version, "
        "sys.base_prefix, importlib.util.find_spec('pytest') is None]))"
    )
    out = subprocess.run(
        f'python3 -c "{probe}"', shell=True, capture_output=True, text=True, check=True
    ).stdout
    version, base_prefix, no_pytest = json.loads(out)
    assert (version, base_prefix) == (sys.version, sys.base_prefix)
    assert no_pytest


async def test_closing_an_acp_agent_waits_for_a_slow_exit_instead_of_terminating_it(
    monkeypatch, tmp_path
):
    # Closing waits for an agent still exiting after end of input (exit code 0) instead
    # of the SDK's short default wait then SIGTERM, whose race with the exit raised
    # ProcessLookupError on a loaded machine. The SDK's default is set to no wait at all,
    # and the agent exits only when the test releases it, once it is known to be waiting
    # after end of input: an agent closed with the SDK's default is terminated first.
    from acp import transports

    from tests.support import acp_client
    from tests.support.waiting import wait_until

    # spawn_stdio_transport's keyword default (agent-client-protocol 0.12.1, pinned exactly
    # in pyproject.toml): setting a renamed one would change nothing, so it is checked first.
    defaults = transports.spawn_stdio_transport.__wrapped__.__kwdefaults__
    assert "shutdown_timeout" in defaults
    monkeypatch.setitem(defaults, "shutdown_timeout", 0.0)
    waiting = tmp_path / "waiting-after-end-of-input"
    slow_exit = (
        "import pathlib, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1}); "
        f"sys.stdin.buffer.read(); pathlib.Path({str(waiting)!r}).touch(); "
        "signal.sigwait({signal.SIGUSR1})"
    )
    monkeypatch.setattr(acp_client, "AGENT_ARGV", [sys.executable, "-c", slow_exit])

    async def release(proc):
        await wait_until(lambda: waiting.exists() or proc.returncode is not None)
        if proc.returncode is None:
            proc.send_signal(signal.SIGUSR1)

    async with acp_client.acp_agent() as (_conn, _client, proc):
        releasing = asyncio.create_task(release(proc))
    await releasing
    assert proc.returncode == 0


def test_a_grouped_module_of_which_single_tests_were_named_is_not_called_idle():
    # `pytest tests/acp/test_transport.py::test_regular_files...` (a test with its own
    # agent, in a module of the shared_agent group) must run, while a whole module
    # listed for nothing still fails collection.
    own = "tests/acp/test_transport.py::test_regular_files_work_as_stdin_and_stdout"
    items = [SimpleNamespace(nodeid=own, fixturenames=["tmp_path"])]
    with pytest.raises(
        pytest.UsageError, match=re.escape("remove ['tests/acp/test_transport.py']")
    ):
        check_shared_process_groups(items)
    config = SimpleNamespace(
        args=["test_transport.py::test_regular_files_work_as_stdin_and_stdout"],
        invocation_params=SimpleNamespace(dir=REPO_ROOT / "tests" / "acp"),
    )
    partly = partly_selected_modules(config)
    assert partly == {"tests/acp/test_transport.py"}
    check_shared_process_groups(items, partly)
