"""Where tools read and write files and run commands: the ``ToolHost`` protocol and the
local host (files through a worker thread; commands through ``/bin/sh -c`` in their
own process group, killed as a group on timeout or cancel). The ACP face supplies a
client-backed host when the editor offers fs/terminal."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from clio_acp.atomic import atomic_open

log = logging.getLogger(__name__)

KILL_GRACE_S = 2.0
"""Seconds between SIGTERM and SIGKILL of a cancelled command's process group."""


@dataclass(frozen=True)
class CommandResult:
    """Outcome of a shell command: exit code (None if killed), captured streams."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


OutputCallback = Callable[[str], Awaitable[None] | None]


class ToolHost(Protocol):
    """Where file reads/writes and commands happen. The local host is the default; the
    ACP face supplies a client-backed host when the client advertises fs/terminal.

    Cancellation is task cancellation: ``run_command`` must stop the command (the
    whole process group for a local host) before re-raising ``CancelledError``.
    """

    async def read_text(self, path: Path) -> str:
        """The text of the file at ``path``
        (absolute, already confined); undecodable
        bytes replaced. Raises ``OSError``."""

    async def write_text(self, path: Path, text: str) -> None:
        """Replace the file at ``path``
        (absolute, already confined)
        with ``text``, creating
        parent folders. Raises
        ``OSError``."""

    async def run_command(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_ms: int,
        on_output: OutputCallback | None = None,
    ) -> CommandResult:
        """Run ``command`` with ``/bin/sh -c`` in ``cwd``; output pieces go to
        ``on_output`` as they arrive. Stops it after ``timeout_ms``
        (``timed_out`` set, exit code None). On cancellation the command is
        stopped before ``CancelledError`` is re-raised."""


def _read_file(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return fh.read()


def _write_file(path: Path, text: str) -> None:
    """Write by replacing, never through the existing file: a hard link whose other
    names lie outside the workspace keeps its old content (the workspace name gets a
    new file), and a crash leaves the old or the new bytes, never a truncated file.
    The file keeps its permission bits; a new one gets 0666 less the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    with atomic_open(path) as fh:
        os.fchmod(fh.fileno(), mode)
        fh.write(text)


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` would race threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if value is not None and hasattr(value, "__await__"):
        await value


class LocalToolHost:
    """Files through a worker thread; commands through ``/bin/sh -c`` in a new
    process group, killed (SIGTERM, then SIGKILL after 2 s) on timeout or cancel."""

    async def read_text(self, path: Path) -> str:
        """``ToolHost.read_text`` in a worker thread (UTF-8, bad bytes replaced, newlines kept)."""
        return await asyncio.to_thread(_read_file, path)

    async def write_text(self, path: Path, text: str) -> None:
        """``ToolHost.write_text`` in a worker thread."""
        await asyncio.to_thread(_write_file, path, text)

    async def run_command(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_ms: int,
        on_output: OutputCallback | None = None,
    ) -> CommandResult:
        """``ToolHost.run_command`` in a new process group; on timeout or cancel the whole
        group gets SIGTERM, then SIGKILL after ``KILL_GRACE_S``."""
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_shell(
                command,
                cwd=str(cwd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        )
        try:
            proc = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            # Cancelled while asyncio was still connecting the pipes: the process group
            # already runs. Without this, asyncio kills only the leader and then waits
            # for the pipes, which a grandchild keeps open until it exits by itself.
            with contextlib.suppress(BaseException):
                await _kill_group(await spawn)
            raise
        out: list[str] = []
        err: list[str] = []
        pumps = asyncio.gather(
            _pump(proc.stdout, out, on_output), _pump(proc.stderr, err, on_output)
        )
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(pumps), timeout=timeout_ms / 1000)
                await proc.wait()
            except TimeoutError:
                timed_out = True
                await _kill_group(proc)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pumps, timeout=KILL_GRACE_S)
        except asyncio.CancelledError:
            await _kill_group(proc)
            pumps.cancel()
            with contextlib.suppress(BaseException):
                await pumps
            raise
        return CommandResult(
            exit_code=None if timed_out else proc.returncode,
            stdout="".join(out),
            stderr="".join(err),
            timed_out=timed_out,
        )


async def _pump(
    stream: asyncio.StreamReader | None, sink: list[str], on_output: OutputCallback | None
) -> None:
    """Decode ``stream`` (UTF-8, bad bytes replaced, never split inside a character)
    into ``sink`` and pass each decoded piece to ``on_output``."""
    if stream is None:
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            tail = decoder.decode(b"", final=True)
            if tail:
                sink.append(tail)
            return
        text = decoder.decode(chunk)
        sink.append(text)
        if on_output is not None and text:
            try:
                await _maybe_await(on_output(text))
            except Exception:  # a face's display problem never breaks the command
                log.debug("on_output callback failed", exc_info=True)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL it after the grace period, reap the child."""
    if proc.returncode is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # orphans of a finished leader
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.shield(asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S))
    except (TimeoutError, asyncio.CancelledError):
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(BaseException):
        await asyncio.shield(asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S))
