"""Shared test fixtures.

- ``REPO_ROOT`` / ``SHARED``: the repository and the ``../shared`` folder beside it
  (real trajectories and model responses are loaded from there, never copied).
- ``isolated_dirs`` (autouse): every test gets its own data/state/config/cache roots
  through the ``CLIO_ACP_*_DIR`` variables, so no test touches the user's files.
- ``interpreter_first_on_path`` (autouse, session): ``python3`` in shell commands is
  the interpreter running the tests, in a bare virtual environment (standard library
  only).
- ``embedded_server_on_one_thread`` (autouse, session): embedded model servers started
  by tests use one thread (``$CLIO_ACP_LOCAL_THREADS=1`` unless set).
- ``embedded_url`` (module): one real embedded model server (``clio-acp local
  install``'s model) shared by a module's tests; ``$CLIO_TEST_EMBEDDED_KEY`` holds its key.
- ``model_server``: a started scripted OpenAI-compatible server on loopback
  (``tests/support/model_server.py``: script replies, read recorded requests,
  ``install_settings()`` points the product's chat/memory roles at it).
- ``run_cli``: runs ``python -m clio_acp`` as a real subprocess with this checkout
  first on ``PYTHONPATH``; ``invoke_cli`` runs the same command in this process (for
  tests about what a command computes, not about the process).
- Byte-code caches: the package is compiled once per run and test modules are cached
  even under ``PYTHONDONTWRITEBYTECODE`` (see below); children keep the variable.
- Hypothesis profile ``clio`` (loaded here; ``HYPOTHESIS_PROFILE`` picks another): no
  deadline (a loaded 2-core machine must not turn a slow example into a failure) and a
  failure prints the blob that reproduces it. Tests that need many cases set their own
  ``max_examples``.
"""

from __future__ import annotations

import asyncio
import compileall
import concurrent.futures
import dataclasses
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from clio_acp.paths import resolve_paths
from tests.support.model_server import ScriptedModelServer, running_server

# This process writes byte-code caches even where the environment says not to
# (PYTHONDONTWRITEBYTECODE=1 on this project's machines): otherwise every worker
# compiles every test module again at collection (~4 s of CPU each). Children keep the
# variable (an eval task's `python3 test_calc.py` must not run a stale calc.pyc after
# a same-second, same-size edit); they read the package's caches compiled once in
# pytest_configure.
sys.dont_write_bytecode = False

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"

RUN_FIRST = (
    "tests/session/test_embedded_turn.py",
    "tests/eval/test_eval_cli.py",
    "tests/models/test_embedded.py",
)
"""Modules that take longest in one piece (a real model's turns, the A/B matrix). They
are collected first, so under ``-n 4 --dist loadscope`` (a module stays on one worker)
they start at once instead of ending the run on one worker while the other idles."""


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once, before any worker or child starts
        compileall.compile_dir(REPO_ROOT / "clio_acp", quiet=2)
        if config.getoption("numprocesses", None):
            cache_rewritten_test_modules(config, REPO_ROOT / "tests")
    missing = [name for name in RUN_FIRST if not (REPO_ROOT / name).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/conftest.py RUN_FIRST names missing modules: {missing}")
    # xdist's loadscope sorts modules by their number of tests unless told not to;
    # keep the collection order below (RUN_FIRST first).
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def cache_rewritten_test_modules(config: pytest.Config, root: Path) -> int:
    """Write pytest's cache of every assertion-rewritten module under ``root``
    (``test_*.py``, ``conftest.py``) that has none for its current source; returns how
    many it wrote. Run once by the xdist controller: on a fresh checkout each worker
    would otherwise rewrite and compile every test module itself (~3.6 CPU-s a worker
    on 2 cores, measured cold vs warm collection), all at the same time. Uses pytest's
    own rewrite and cache functions (private: ``_pytest.assertion.rewrite``); if they
    moved, nothing is written and the workers rewrite as before."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        written = 0
        for source in sorted(root.rglob("*.py")):
            if not (source.name.startswith("test_") or source.name == "conftest.py"):
                continue
            pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc, state.trace) is not None:
                continue
            if not rewrite.try_makedirs(pyc.parent):
                return written
            try:
                stamp, code = rewrite._rewrite_test(source, config)
            except (SyntaxError, ValueError, OSError):
                continue  # collection reports it as it always does
            written += bool(rewrite._write_pyc(state, code, stamp, pyc))
        return written
    except (ImportError, AttributeError, KeyError, TypeError):
        return 0


SHARED_PROCESS_GROUPS = {
    "shared_server": (
        "tests/lsp/test_cancel.py",
        "tests/lsp/test_code_actions.py",
        "tests/lsp/test_configuration.py",
        "tests/lsp/test_diagnostics.py",
        "tests/lsp/test_errors.py",
        "tests/lsp/test_memory_commands.py",
        "tests/lsp/test_permissions.py",
        "tests/lsp/test_prompt.py",
        "tests/lsp/test_reminder_locations.py",
        "tests/lsp/test_resume_offer.py",
        "tests/lsp/test_secret_sinks.py",
        "tests/lsp/test_session_changes.py",
        "tests/lsp/test_status.py",
        "tests/lsp/test_workspace_and_evidence.py",
    ),
    "shared_agent": (
        "tests/acp/test_cancel.py",
        "tests/acp/test_client_tools.py",
        "tests/acp/test_mcp.py",
        "tests/acp/test_permissions.py",
        "tests/acp/test_plan.py",
        "tests/acp/test_prompt.py",
        "tests/acp/test_secret_sinks.py",
        "tests/acp/test_sessions.py",
        "tests/acp/test_slash_commands.py",
        "tests/acp/test_tool_call_ids.py",
        "tests/acp/test_transport.py",
    ),
}
"""The modules whose tests use a shared LSP server (``tests/lsp/conftest.py``) or a
shared ACP agent (``tests/acp/conftest.py``: ``shared_agent``, or ``raw_agent`` on the
raw wire), by that fixture's name. A test process
shares one server per configuration across modules, so under xdist each group is one
unit of work (``pytest_xdist_make_scheduler``): one worker starts its servers once,
instead of every worker that got one of the modules starting its own. Collection fails
when the table and the tests' fixtures disagree."""

_GROUP_OF_MODULE = {m: f"{name} group" for name, ms in SHARED_PROCESS_GROUPS.items() for m in ms}

GROUP_FIXTURES = {"shared_agent": ("shared_agent", "raw_agent")}
"""The fixtures that put a module in a ``SHARED_PROCESS_GROUPS`` entry, where more than
the entry's own name."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` with the modules of each ``SHARED_PROCESS_GROUPS`` entry
    as one scope (xdist's own scheduler otherwise; other modes unchanged)."""
    if config.getoption("dist", None) != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedProcessScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return _GROUP_OF_MODULE.get(module) or super()._split_scope(nodeid)

    return SharedProcessScheduling(config, log)


def partly_selected_modules(config: pytest.Config) -> set[str]:
    """The modules (root-relative paths) of which the command line named single tests
    (``module.py::test``)."""
    named = (arg.split("::", 1)[0] for arg in config.args if "::" in arg)
    modules = set()
    for path in named:
        resolved = (config.invocation_params.dir / path).resolve()
        if resolved.is_relative_to(REPO_ROOT):
            modules.add(resolved.relative_to(REPO_ROOT).as_posix())
    return modules


def check_shared_process_groups(items: list[pytest.Item], partly: set[str] = frozenset()) -> None:
    """``UsageError`` when a collected module uses a shared server or agent and is not in
    its ``SHARED_PROCESS_GROUPS`` entry, or is listed there and none of its collected
    tests uses it (unless only some of its tests were asked for: ``partly``)."""
    for fixture, listed in SHARED_PROCESS_GROUPS.items():
        collected = {item.nodeid.split("::", 1)[0] for item in items}
        fixtures = GROUP_FIXTURES.get(fixture, (fixture,))
        using = {
            item.nodeid.split("::", 1)[0]
            for item in items
            if any(name in getattr(item, "fixturenames", ()) for name in fixtures)
        }
        unlisted = sorted(using - set(listed))
        idle = sorted((set(listed) & collected) - using - set(partly))
        if unlisted or idle:
            raise pytest.UsageError(
                f"tests/conftest.py SHARED_PROCESS_GROUPS[{fixture!r}]: add {unlisted}, "
                f"remove {idle}"
            )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stable sort: ``RUN_FIRST`` modules in their listed order, then the rest as
    collected; checks ``SHARED_PROCESS_GROUPS``."""
    check_shared_process_groups(items, partly_selected_modules(config))
    rank = {name: index for index, name in enumerate(RUN_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(RUN_FIRST))

    items.sort(key=key)


hypothesis_settings.register_profile("clio", deadline=None, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "clio"))


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child ``python -m clio_acp``: this checkout importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


@pytest.fixture(autouse=True, scope="session")
def interpreter_first_on_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``python3`` in the shell commands tests run (tool calls, eval tasks, checks) is
    the interpreter running the tests, in a bare virtual environment (``bare_python``)
    whose folder goes first on ``PATH``, then the interpreter's own folder (for the
    package's console scripts). Otherwise CI's ``PATH`` finds a version manager's shim
    first (pyenv's costs ~0.5 s a call under load), and a command could run another
    Python than the one under test."""
    bare = bare_python(tmp_path_factory.mktemp("bare-python"))
    folders = [str(bare.parent), str(Path(sys.executable).parent)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", os.pathsep.join([*folders, os.environ.get("PATH", "")]))
        yield


def bare_python(root: Path) -> Path:
    """A virtual environment at ``root`` of the interpreter running the tests, without
    pip and without the test environment's packages; returns its ``bin/python3``. The
    commands tests run (``python3 test_calc.py``, ``python3 -c ...``) need the standard
    library only, like a user's project scripts; started from the test environment,
    each would first import the editable install's path finder (~15 of its ~27 ms of
    CPU, measured; the A/B matrix alone starts ~700)."""
    import venv

    venv.create(root, with_pip=False, symlinks=True)
    return root / "bin" / "python3"


@pytest.fixture(autouse=True, scope="session")
def embedded_server_on_one_thread() -> Iterator[None]:
    """Every embedded model server a test starts (``embedded_url``, or the product's own
    start) reads prompts and generates on one thread (``$CLIO_ACP_LOCAL_THREADS``,
    unless the environment sets it). The suite runs more workers than cores, and
    llama.cpp's threads spin at their barriers while a worker holds the other core:
    measured on 2 cores at load 2-3, the two embedded modules took 43-45 CPU-s on one
    thread against 51-65 on the default two for prompts. What the tests assert (shapes,
    cache reuse, deadlines) does not depend on the thread count; the default choice is
    tested in ``tests/models/test_local.py``."""
    from clio_acp.models.local import THREADS_ENV

    with pytest.MonkeyPatch.context() as patch:
        if not os.environ.get(THREADS_ENV):
            patch.setenv(THREADS_ENV, "1")
        yield


DIR_NAMES = ("data", "state", "config", "cache")
"""The folders clio-acp reads from ``CLIO_ACP_<NAME>_DIR``."""


def make_home(root: Path) -> dict[str, Path]:
    """``{name: root/name}`` for every ``DIR_NAMES`` folder, created."""
    home = {name: root / name for name in DIR_NAMES}
    for path in home.values():
        path.mkdir()
    return home


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    dirs = make_home(tmp_path_factory.mktemp("clio-home"))
    for name, path in dirs.items():
        monkeypatch.setenv(f"CLIO_ACP_{name.upper()}_DIR", str(path))
    return dirs


@pytest.fixture
def run_cli():
    def _run(
        *args: str,
        input: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "clio_acp", *args],
            input=input,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=subprocess_env(env),
            timeout=timeout,
        )

    return _run


def _main_exit_code(main, argv: list[str]) -> int:
    """``main(argv)``'s exit code (argparse's ``SystemExit`` included). Called from a
    coroutine (a running loop), it runs on a worker thread, where the command may start
    its own event loop; the caller waits, as it would for a subprocess."""

    def call() -> int:
        try:
            return main(argv)
        except SystemExit as exc:  # argparse usage errors and --help
            return exc.code if isinstance(exc.code, int) else int(exc.code is not None)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


@pytest.fixture
def invoke_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """``run_cli`` in this process: ``clio_acp.cli.main(args)`` with ``input`` on stdin,
    ``cwd`` and ``env`` applied for the call, stdout/stderr captured. Returns the same
    ``CompletedProcess`` shape. For tests about what a command computes and prints;
    tests about the process itself (startup imports, stdio protection, signals, exit
    on end of input, encoding of the real stdout) keep ``run_cli``."""
    from clio_acp.cli import main

    def _run(
        *args: str,
        input: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with monkeypatch.context() as patch:
            if cwd is not None:
                patch.chdir(cwd)
            for key, value in (env or {}).items():
                patch.setenv(key, value)
            stdin = io.TextIOWrapper(io.BytesIO((input or "").encode("utf-8")), encoding="utf-8")
            patch.setattr(sys, "stdin", stdin)
            code = _main_exit_code(main, list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["clio-acp", *args], code, out, err)

    return _run


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"shared data folder missing: {SHARED} (it must sit beside the repository)")
    return SHARED


USER_PATHS = resolve_paths()
"""The user's real folders, resolved at import, before ``isolated_dirs``: where
``clio-acp local install`` put the embedded model."""

EMBEDDED_KEY_ENV = "CLIO_TEST_EMBEDDED_KEY"
"""Holds the ``embedded_url`` server's API key while it runs (targets name it in
``apiKeyEnv``)."""


@pytest.fixture(scope="module")
def embedded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One embedded server for the module, started as ``EmbeddedServer`` would start it
    (same command and environment) but with plain subprocess, so any test's event loop
    and any child process can use it; yields its OpenAI base URL with
    ``$CLIO_TEST_EMBEDDED_KEY`` holding its API key. The model is the installed one
    (``USER_PATHS``)."""
    import httpx

    from clio_acp.models.local import EmbeddedServer, free_port
    from tests.support.waiting import wait_until_sync

    log_dir = tmp_path_factory.mktemp("llama-log")
    port = free_port()
    server = EmbeddedServer(dataclasses.replace(USER_PATHS, state=log_dir / "state"))
    log = (log_dir / "early.log").open("wb")
    proc = subprocess.Popen(server.command(port), env=server.environment(), stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        # One client for the polls: httpx.get() builds a client (and its TLS context)
        # per call, ~30 ms of CPU each, for a minute of polls under load.
        with httpx.Client(timeout=1) as http:

            def healthy() -> bool:
                if proc.poll() is not None:
                    early = (log_dir / "early.log").read_text()
                    raise AssertionError(server._log_tail() + early)
                try:
                    return http.get(f"{base}/health").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until_sync(healthy, timeout_s=120, interval_s=0.1)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(EMBEDDED_KEY_ENV, server.api_key)
            yield f"{base}/v1"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A started scripted model server (see ``tests/support/model_server.py``)."""
    with running_server() as server:
        yield server
