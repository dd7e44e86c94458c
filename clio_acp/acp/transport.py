"""The stdio edge of the ACP face: file-descriptor protection and line framing.

Owns three things the pinned SDK (``agent-client-protocol==0.12.1``) does not do for
us, and nothing else:

1. **stdout protection** (ARCHITECTURE.md invariant 7): :func:`protect_stdio` runs on
   the first line of ``clio-acp acp``. It keeps private duplicates of fds 0 and 1 for
   the protocol, then points fd 1 at stderr and fd 0 at ``/dev/null``, so a stray
   ``print``, a library's banner or a tool's child process can never write into the
   protocol stream or read from it.
2. **framing edge cases**: :class:`LineTransport` implements the SDK's message-level
   ``acp._transport.Transport`` seam (``send`` / ``receive`` / ``close``) over
   newline-delimited JSON. The SDK's own ``NdjsonTransport`` (0.12.1) logs and drops
   a line that is not JSON, and hands a JSON value that is not an object to
   ``Connection._process_message``, whose ``message.get`` then raises and ends the
   receive loop (the agent goes deaf). Here such lines get a JSON-RPC error reply
   (``-32700`` parse error, ``-32600`` invalid request, ``id: null``) and reading goes
   on. Both pipes and regular files work as stdin/stdout (asyncio pipe transports
   refuse regular files, which the SDK's ``stdio_streams`` relies on).
3. **request identity**: :data:`CURRENT_REQUEST_ID` carries the JSON-RPC id of the
   request a handler is serving (for ``$/cancel_request``), and
   :meth:`LineTransport.after_response` runs a callback once the response to a given
   request has been written (``available_commands_update`` must follow the
   ``session/new`` response).

JSON-RPC request/response bookkeeping (ids, pending futures, error objects) stays in
the SDK's ``acp.connection.Connection``; this module writes no JSON-RPC logic beyond
the error replies for frames the SDK cannot represent. It must not know any ACP
method.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import selectors
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# JSON-RPC 2.0 §5.1 error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

DEFAULT_LINE_LIMIT_BYTES = 50 * 1024 * 1024
"""Largest frame we read, bytes (same default as the SDK's stdio buffer limit)."""

CURRENT_REQUEST_ID: ContextVar[int | str | None] = ContextVar("clio_acp_request_id", default=None)
"""The id of the JSON-RPC request the current task serves (``None`` outside one).

Set by :meth:`LineTransport.receive` just before it returns a request. The SDK's
``Connection`` (0.12.1) creates the handler task for that message right after
``receive`` returns, from the same task, and asyncio copies the context into the new
task, so each handler task sees its own id. A test pins this (``$/cancel_request``).
"""


@dataclass(frozen=True)
class ProtocolFds:
    """The private descriptors the protocol uses after :func:`protect_stdio`."""

    read_fd: int
    write_fd: int


def protect_stdio() -> ProtocolFds:
    """Move the protocol off fds 0/1 so nothing else can touch it (invariant 7).

    Returns private, non-inheritable duplicates of the original stdin and stdout.
    Afterwards fd 1 is a copy of fd 2 (stderr) and fd 0 reads ``/dev/null``: Python's
    ``sys.stdout``, C libraries and every child process write to stderr instead of the
    protocol stream and cannot consume protocol input. Call it before anything can
    print. Raises ``OSError`` if the descriptors cannot be duplicated.
    """
    if sys.stdout is not None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
    write_fd = os.dup(1)  # os.dup makes non-inheritable descriptors (PEP 446)
    read_fd = os.dup(0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
    finally:
        os.close(devnull)
    return ProtocolFds(read_fd=read_fd, write_fd=write_fd)


def _is_pollable(fd: int) -> bool:
    """Whether the event loop's selector accepts ``fd``.

    The mode check alone is not enough: ``/dev/null`` is a character device, yet
    epoll refuses it with ``EPERM``, and asyncio only registers a read pipe in a
    deferred callback, so the refusal would surface as a logged traceback and a
    reader that never sees end of input. Probe a throwaway selector instead.
    """
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    probe = selectors.DefaultSelector()
    try:
        probe.register(fd, selectors.EVENT_READ | selectors.EVENT_WRITE)
    except (OSError, ValueError):
        return False
    finally:
        probe.close()
    return True


class _FlowControl(asyncio.Protocol):
    """Write-side protocol for ``connect_write_pipe`` with drain support."""

    def __init__(self) -> None:
        self._paused = False
        self._waiters: list[asyncio.Future[None]] = []
        self.closed = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionError("protocol output closed"))
        self._waiters.clear()

    async def drain(self) -> None:
        if self.closed.done():
            raise ConnectionError("protocol output closed")
        if not self._paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter


class LineTransport:
    """Newline-delimited JSON messages over a pair of file descriptors.

    Implements the SDK's ``Transport`` protocol: :meth:`receive` returns the next
    JSON object (``None`` at end of input), :meth:`send` writes one object as one line
    (UTF-8, compact). Lines that are empty are skipped; lines that are not JSON, or
    JSON that is not a JSON-RPC object, are answered with an error and skipped.
    ``read_fd`` / ``write_fd`` may be pipes, sockets, terminals or regular files; the
    transport does not close them before :meth:`close`.
    """

    def __init__(
        self, read_fd: int, write_fd: int, *, line_limit: int = DEFAULT_LINE_LIMIT_BYTES
    ) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._limit = line_limit
        self._reader: asyncio.StreamReader | None = None
        self._write_transport: asyncio.WriteTransport | None = None
        self._flow: _FlowControl | None = None
        self._write_lock = asyncio.Lock()
        self._after: dict[Any, list[Callable[[], Awaitable[None] | None]]] = {}
        self._closed = False
        self._feeder: threading.Thread | None = None
        self._background: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Attach to the descriptors (asyncio pipes when pollable, a thread otherwise)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=self._limit)
        attached = False
        if _is_pollable(self._read_fd):
            try:
                pipe = os.fdopen(self._read_fd, "rb", buffering=0, closefd=False)
                await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
                attached = True
            except (OSError, ValueError):
                attached = False  # e.g. /dev/null cannot be polled: fall back to a thread
        if not attached:
            self._feeder = threading.Thread(
                target=_feed_from_fd, args=(loop, reader, self._read_fd), daemon=True
            )
            self._feeder.start()
        self._reader = reader
        if _is_pollable(self._write_fd):
            try:
                flow = _FlowControl()
                pipe = os.fdopen(self._write_fd, "wb", buffering=0, closefd=False)
                transport, _ = await loop.connect_write_pipe(lambda: flow, pipe)
                self._write_transport = transport  # type: ignore[assignment]
                self._flow = flow
            except (OSError, ValueError):
                self._write_transport = None

    # -- Transport protocol -------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line; raises ``ConnectionError`` once closed."""
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        # U+2028/U+2029 only occur inside JSON strings: escaped, they cannot split a line
        # for a reader that treats them as line ends (newer Node readline).
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"
        # A lone surrogate (echoed from a client's "\ud800" escape) is only ever inside
        # a JSON string, where backslashreplace writes the same valid escape back.
        data = text.encode("utf-8", "backslashreplace")
        await self._write(data)
        if "method" not in message and "id" in message:
            for callback in self._after.pop(_id_key(message["id"]), []):
                self._spawn(callback)

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message, or ``None`` at end of input."""
        while True:
            line = await self._read_line()
            if line is None:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                # RecursionError: JSON nested deeper than the parser's stack (issue 17).
                log.warning("unparseable line on stdin (%d bytes): %s", len(line), exc)
                await self._reply_error(None, PARSE_ERROR, "Parse error", str(exc))
                continue
            problem, reply_id = _frame_problem(message)
            if problem is not None:
                log.warning("invalid JSON-RPC frame: %s", problem)
                await self._reply_error(reply_id, INVALID_REQUEST, "Invalid request", problem)
                continue
            if isinstance(message.get("params"), dict | list) and _SURROGATE_ESCAPE.search(line):
                message["params"] = scrub_surrogates(message["params"])
            if "method" in message and "id" in message:
                CURRENT_REQUEST_ID.set(message["id"])
            else:
                CURRENT_REQUEST_ID.set(None)
            return message

    async def close(self) -> None:
        """Flush and release the descriptors; idempotent."""
        if self._closed:
            return
        self._closed = True
        async with self._write_lock:
            if self._write_transport is not None:
                self._write_transport.close()
        for task in list(self._background):
            task.cancel()

    # -- ours ---------------------------------------------------------------------

    def after_response(
        self, request_id: int | str | None, callback: Callable[[], Awaitable[None] | None]
    ) -> None:
        """Run ``callback`` right after the response to ``request_id`` is written.

        With ``request_id`` ``None`` (no request in scope) the callback runs soon.
        """
        if request_id is None:
            self._spawn(callback)
            return
        self._after.setdefault(_id_key(request_id), []).append(callback)

    async def _write(self, data: bytes) -> None:
        if self._closed:
            raise ConnectionError("transport closed")
        async with self._write_lock:
            if self._write_transport is not None:
                assert self._flow is not None
                if self._write_transport.is_closing():
                    raise ConnectionError("protocol output closed")
                self._write_transport.write(data)
                await self._flow.drain()
            else:
                await asyncio.to_thread(_write_all, self._write_fd, data)

    async def _reply_error(self, request_id: Any, code: int, message: str, details: str) -> None:
        payload = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": message, "data": {"details": details}},
        }
        with contextlib.suppress(ConnectionError):
            await self.send(payload)

    async def _read_line(self) -> bytes | None:
        assert self._reader is not None, "start() first"
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._reader.readuntil(b"\n"))
                return b"".join(chunks)
            except asyncio.LimitOverrunError as exc:
                chunks.append(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:
                chunks.append(exc.partial)
                data = b"".join(chunks)
                return data if data else None

    def _spawn(self, callback: Callable[[], Awaitable[None] | None]) -> None:
        async def run() -> None:
            try:
                result = callback()
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    await result
            except Exception:
                log.exception("after-response callback failed")

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _id_key(request_id: Any) -> Any:
    # JSON-RPC ids are numbers or strings; 1 and "1" are different ids.
    return (type(request_id).__name__, request_id)


def _valid_id(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


def _frame_problem(message: Any) -> tuple[str | None, Any]:
    """(description of what is wrong, id to answer with) for a decoded frame."""
    if not isinstance(message, dict):
        kind = (
            "array (batches are not supported)"
            if isinstance(message, list)
            else type(message).__name__
        )
        return f"a JSON-RPC message must be an object, got {kind}", None
    has_id = "id" in message
    if has_id and not _valid_id(message["id"]):
        return "id must be a string, an integer or null", None
    reply_id = message.get("id") if has_id else None
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return "method must be a non-empty string", reply_id
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return "params must be an object or an array", reply_id
        return None, None
    if has_id and ("result" in message or "error" in message):
        return None, None
    return "neither a request, a notification nor a response", reply_id


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _feed_from_fd(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int) -> None:
    """Thread body: copy ``fd`` into ``reader`` until end of file."""
    try:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            loop.call_soon_threadsafe(reader.feed_data, data)
    finally:
        with contextlib.suppress(RuntimeError):  # loop already closed at exit
            loop.call_soon_threadsafe(reader.feed_eof)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON params) with every lone surrogate in its strings (a
    ``"\\ud800"`` escape with no partner: not encodable as UTF-8, so the journal, a path
    or a model request would fail on it) replaced by U+FFFD. Iterative: as deep as the
    parser allowed."""

    def clean(item: Any) -> Any:
        return _LONE_SURROGATE.sub("\ufffd", item) if isinstance(item, str) else item

    root = [clean(value)]
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        pairs = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if isinstance(node, dict):
            for key, item in pairs:
                new_key = clean(key)
                if new_key != key:
                    del node[key]
                node[new_key] = clean(item)
                if isinstance(item, dict | list):
                    stack.append(item)
        else:
            for index, item in pairs:
                node[index] = clean(item)
                if isinstance(item, dict | list):
                    stack.append(item)
    return root[0]
