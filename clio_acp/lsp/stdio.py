"""Run the language server over stdio: the process plumbing around pygls' reader loop.

Owns the process's stdin/stdout while the server runs. stdin is read by one dedicated
daemon thread that feeds an ``asyncio.StreamReader`` (never the thread pool that
pygls 2.1.1 shares between its stdin reader and ``@server.thread`` handlers, so a busy
pool can never stop us reading ``$/cancelRequest``; turns are asyncio tasks on the loop).
Framing is pygls' ``run_async``. The real stdout file descriptor is kept private for
protocol messages and fd 1 is pointed at stderr, so a stray ``print`` or a child process
cannot corrupt the stream (ARCHITECTURE.md invariant 7). Must not hold any LSP logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from pygls.io_ import StdoutWriter, run_async

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0
"""Upper bound for the server's cleanup after the loop stops, seconds."""

_READ_CHUNK = 65536  # bytes per os.read of stdin

MAX_HEADER_LINE_BYTES = 64 * 1024
"""Longest header line read; a longer one closes the connection (LSP headers are a
few dozen bytes)."""
MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest ``Content-Length`` accepted; a larger one closes the connection instead of
buffering whatever follows."""


class _StreamReaderAdapter:
    """pygls' AsyncReader over an ``asyncio.StreamReader`` (EOF reads as ``b""``).

    A header line over ``MAX_HEADER_LINE_BYTES`` or a body over ``MAX_BODY_BYTES`` is
    a broken stream: ``refuse(message)`` reports it and reading ends (``b""``), which
    closes the connection."""

    def __init__(self, reader: asyncio.StreamReader, refuse: Callable[[str], None]):
        self._reader = reader
        self._refuse = refuse

    async def readline(self) -> bytes:
        try:
            return await self._reader.readline()
        except ValueError:  # LimitOverrunError: the line is longer than the limit
            self._refuse(f"header line longer than {MAX_HEADER_LINE_BYTES} bytes")
            return b""

    async def readexactly(self, n: int) -> bytes:
        if n > MAX_BODY_BYTES:
            self._refuse(f"Content-Length {n} is over the limit of {MAX_BODY_BYTES} bytes")
            return b""
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""


def _pump_stdin(fd: int, loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    try:
        while True:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                break
            loop.call_soon_threadsafe(reader.feed_data, chunk)
    except (OSError, RuntimeError):  # stdin closed under us, or the loop is gone
        pass
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(reader.feed_eof)


def claim_stdout() -> BinaryIO:
    """Take the process's stdout for protocol messages and point fd 1 at stderr.

    Returns a binary file on a private duplicate of the original fd 1. After this,
    ``print`` and inherited fd 1 of child processes write to stderr.
    """
    sys.stdout.flush()
    private = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return os.fdopen(private, "wb")


async def serve(server: Any, stdin_fd: int, stdout: BinaryIO) -> int:
    """Serve one client until ``exit``, end of input, or the editor process dies.

    ``server`` is a ``ClioLanguageServer`` (its ``protocol`` a
    ``ClioLanguageServerProtocol`` and an async ``aclose()``). Returns the process exit
    code: 0 after ``shutdown`` + ``exit``, 1 otherwise (LSP 3.17 "exit").
    """
    protocol = server.protocol
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_HEADER_LINE_BYTES)
    threading.Thread(
        target=_pump_stdin, args=(stdin_fd, loop, reader), name="clio-lsp-stdin", daemon=True
    ).start()
    protocol.set_writer(StdoutWriter(stdout))
    stop_event = threading.Event()
    reading = asyncio.create_task(
        run_async(
            stop_event=stop_event,
            reader=_StreamReaderAdapter(reader, protocol.refuse_stream),
            protocol=protocol,
            logger=logger,
            error_handler=server.report_server_error,
        )
    )
    stopping = asyncio.create_task(protocol.stop_requested.wait())
    await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stop_event.set()
    if not reading.done():
        reading.cancel()
    else:
        logger.info("End of input")
    stopping.cancel()
    if protocol.exit_code is None:
        protocol.exit_code = 0 if protocol.shutdown_requested else 1
    protocol.stop_requested.set()
    protocol.cancel_parent_watch()
    shutdown = protocol.shutdown_task
    if shutdown is not None and not shutdown.done():
        # `exit` came before the `shutdown` answer: finish (and send) it first.
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(shutdown), CLOSE_TIMEOUT_S)
        await asyncio.sleep(0)  # let pygls' done-callback write the answer
    try:
        await asyncio.wait_for(server.aclose(), CLOSE_TIMEOUT_S)
    except Exception:
        logger.exception("Cleanup after stop failed")
    with contextlib.suppress(OSError, ValueError):
        stdout.flush()
    return protocol.exit_code


def serve_stdio(server: Any) -> int:
    """Run ``server`` on this process's stdin/stdout; returns the exit code."""
    stdout = claim_stdout()
    stdin_fd = sys.stdin.fileno()
    try:
        return asyncio.run(serve(server, stdin_fd, stdout))
    except KeyboardInterrupt:
        return 130
