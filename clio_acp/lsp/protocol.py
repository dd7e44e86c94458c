"""LSP lifecycle done right on top of pygls: a small ``LanguageServerProtocol`` subclass.

Owns the JSON-RPC lifecycle rules of the LSP 3.17 spec ("Lifecycle Messages",
"Cancellation Support") where pygls 2.1.1 falls short, and nothing else: no command,
no memory, no session logic lives here. Every override names the pygls version whose
behaviour it works around; revisit them when the pin in ``pyproject.toml`` moves.

What this module guarantees (each point has a wire-level test in ``tests/lsp/``):

- ``$/cancelRequest`` cancels the task running the request (``workspace/executeCommand``
  runs its command as that task, so a turn is stopped, not just its reply).
- A late client reply to a server request that was cancelled is ignored quietly.
- ``shutdown`` runs the server's cleanup (turns cancelled and awaited) before it
  answers ``null``; requests after ``shutdown`` get ``-32600`` InvalidRequest.
- ``exit`` never calls ``sys.exit`` inside a handler: it records the exit code
  (0 after ``shutdown``, else 1) and asks the runner to stop.
- The editor process named by ``initialize.processId`` is polled; when it dies the
  server stops with exit code 1.
- Error responses carry no traceback and no local path.
- A request whose params cannot be parsed gets ``-32602`` instead of no answer.
- Requests before ``initialize`` get ``-32002`` ServerNotInitialized.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import re
import sys
import uuid
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import (
    JsonRPCProtocol,
    JsonRPCResponseMessage,
    MsgId,
    RPCNotification,
    RPCRequest,
)
from pygls.protocol.language_server import _prepare_command_arguments

logger = logging.getLogger(__name__)

PARENT_POLL_INTERVAL_S = 1.0
"""How often the editor process (``initialize.processId``) is checked, seconds.
LSP 3.17 "initialize": "If the parent process is not alive then the server should exit"."""

# JSON-RPC 2.0 / LSP 3.17 "ErrorCodes".
INVALID_REQUEST = types.ErrorCodes.InvalidRequest.value  # -32600
INVALID_PARAMS = types.ErrorCodes.InvalidParams.value  # -32602
PARSE_ERROR = types.ErrorCodes.ParseError.value  # -32700
INTERNAL_ERROR = types.ErrorCodes.InternalError.value  # -32603
SERVER_NOT_INITIALIZED = types.ErrorCodes.ServerNotInitialized.value  # -32002

_PATH_PATTERNS = (
    re.compile(r"file://[^\s'\"<>)\]]+"),
    # An absolute POSIX path with at least two segments (``/a/b``). Method names like
    # ``textDocument/codeAction`` or ``$/cancelRequest`` do not match.
    re.compile(r"(?<![\w.$~])/(?:[^\s/'\"<>:]+/)+[^\s/'\"<>:,)\]]*"),
    re.compile(r"~/(?:[^\s/'\"<>:]+/?)+"),
    re.compile(r"\b[A-Za-z]:\\(?:[^\\\s'\"<>]+\\?)*"),
)

current_command: contextvars.ContextVar[types.ExecuteCommandParams | None] = contextvars.ContextVar(
    "clio_lsp_current_command", default=None
)
"""The ``workspace/executeCommand`` params of the command running in this task (for
its ``workDoneToken``)."""


def scrub_paths(text: str) -> str:
    """Replace every absolute local path or ``file://`` URI in ``text`` by ``<path>``."""
    for pattern in _PATH_PATTERNS:
        text = pattern.sub("<path>", text)
    return text


def sanitize_error(error: types.ResponseError) -> types.ResponseError:
    """The error a client may see: first line of the message only, local paths
    scrubbed, no ``data.traceback`` (pygls 2.1.1 ``JsonRpcInternalError.of`` puts the
    formatted traceback in ``data`` and the raw exception text in ``message``)."""
    message = (error.message or "").strip().splitlines()
    text = scrub_paths(message[0] if message else "error")
    if len(text) > 500:
        text = text[:497] + "..."
    data = error.data
    if isinstance(data, dict):
        data = {k: _scrub_value(v) for k, v in data.items() if k != "traceback"} or None
    elif data is not None:
        data = _scrub_value(data)
    return types.ResponseError(code=error.code, message=text, data=data)


def _scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return scrub_paths(value)
    if isinstance(value, list):
        return [_scrub_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_value(v) for k, v in value.items() if k != "traceback"}
    return value


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still exists (POSIX: signal 0; Windows: OpenProcess)."""
    if pid <= 0:
        return True
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import ctypes

        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        ok = kernel32.GetExitCodeProcess(handle, ctypes.byref(code))
        kernel32.CloseHandle(handle)
        return bool(ok) and code.value == 259  # STILL_ACTIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class _MalformedRequest:
    """A request whose params failed to structure; answered with ``-32602``."""

    id: MsgId
    method: str
    message: str
    jsonrpc: str = JsonRPCProtocol.VERSION
    code: int = INVALID_PARAMS


def _unexpected_reply(data: dict[str, Any]) -> Any:
    # pygls 2.1.1 structures a reply by the result type of the request it answers
    # (``workspace/configuration`` wants a list); a client replying ``null`` or a bad
    # error object failed to structure, and the request awaiting it hung until its
    # timeout (10 s for the configuration pull, before any command could run).
    """A reply (``id``, no ``method``) whose ``result`` or ``error`` does not have the
    expected type, as a message that still settles the request awaiting it: the raw
    ``result``, or an ``InternalError`` naming the bad error object (JSON-RPC 2.0 §5)."""
    if "error" in data:
        error = types.ResponseError(code=INTERNAL_ERROR, message="malformed error reply")
        return types.ResponseErrorMessage(id=data["id"], error=error)
    return JsonRPCResponseMessage(
        id=data["id"], jsonrpc=JsonRPCProtocol.VERSION, result=data.get("result")
    )


class ClioLanguageServerProtocol(LanguageServerProtocol):
    """pygls' LSP protocol with the lifecycle rules of LSP 3.17 enforced.

    The server object (``clio_acp.lsp.server``) registers ordinary features; this class
    only decides *when* and *how* messages are answered. ``stop_requested`` is set when
    the process should end (``exit``, editor death); ``exit_code`` says with what code.
    """

    def __init__(self, server: Any, converter: Any):
        super().__init__(server, converter)
        self.initialize_received = False
        self.shutdown_requested = False
        self.exit_code: int | None = None
        self.stop_requested = asyncio.Event()
        self._parent_watch: asyncio.Task[None] | None = None
        self.shutdown_task: asyncio.Task[Any] | None = None
        """The task answering ``shutdown``; the runner lets it finish before stopping."""
        self._background: set[asyncio.Future[Any]] = set()

    def spawn(self, awaitable: Any) -> asyncio.Future[Any]:
        """Run ``awaitable`` in the background, keeping a reference until it ends."""
        task = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- stopping -------------------------------------------------------------------

    def request_stop(self, code: int) -> None:
        """Ask the runner to stop the process with ``code`` (first request wins)."""
        if self.exit_code is None:
            self.exit_code = code
        self.stop_requested.set()

    # -- incoming messages ------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        # pygls 2.1.1: a request whose params fail to structure raises out of the
        # reader loop, which logs it and never answers; the client waits forever.
        # This is json.loads' object_hook: it also sees every object nested in params.
        # One of those that looks like a message but does not structure is kept as a
        # plain dict (raising would lose the whole message and its reply, issue 17).
        """Parse one JSON-RPC message; a malformed one is answered with an error instead
        of raising."""
        is_request = "id" in data and isinstance(data.get("method"), str)
        try:
            structured = super().structure_message(data)
        except JsonRpcException:
            if is_request:
                return _MalformedRequest(
                    id=data["id"],
                    method=data["method"],
                    message=f"Invalid params for {data['method']}",
                )
            if "id" in data and "method" not in data:
                return _unexpected_reply(data)
            return data
        if is_request and "jsonrpc" in data and not isinstance(structured, RPCRequest):
            # A notification method sent with an id (``initialized``, ``$/cancelRequest``)
            # structures as a notification and would never be answered.
            return _MalformedRequest(
                id=data["id"],
                method=data["method"],
                message=f"{data['method']} is a notification, not a request",
                code=INVALID_REQUEST,
            )
        return structured

    def handle_message(self, message: Any) -> None:
        # Replaces pygls 2.1.1 JsonRPCProtocol.handle_message, which silently drops every
        # message after `shutdown` (LSP 3.17 wants InvalidRequest for requests) and
        # does not refuse requests before `initialize` (ServerNotInitialized).
        """Dispatch one message (requests after ``shutdown`` are ``InvalidRequest``; LSP
        3.17 lifecycle)."""
        if isinstance(message, _MalformedRequest):
            self._send_error(message.id, message.code, message.message)
            return
        if getattr(message, "jsonrpc", None) != JsonRPCProtocol.VERSION:
            logger.warning("Ignoring a message that is not JSON-RPC 2.0")
            return

        method = getattr(message, "method", None)
        is_request = isinstance(message, RPCRequest)
        is_notification = not is_request and isinstance(message, RPCNotification)

        if method != types.EXIT:
            if self.shutdown_requested and (is_request or is_notification):
                if is_request:
                    self._send_error(
                        message.id, INVALID_REQUEST, f"{method}: the server is shutting down"
                    )
                else:
                    logger.debug("Dropping %s after shutdown", method)
                return
            if not self.initialize_received and method != types.INITIALIZE:
                if is_request:
                    self._send_error(
                        message.id, SERVER_NOT_INITIALIZED, f"{method}: initialize first"
                    )
                    return
                if is_notification:
                    logger.debug("Dropping %s before initialize", method)
                    return

        if is_request and method == types.SHUTDOWN:
            # Set before the (async) shutdown handler runs: an `exit` read right after
            # it must already see that shutdown was requested.
            self.shutdown_requested = True
        ctx = contextvars.copy_context()
        if is_request:
            ctx.run(self._handle_request, message.id, message.method, message.params)
        elif is_notification:
            ctx.run(self._handle_notification, message.method, message.params)
        elif hasattr(message, "result"):
            ctx.run(self._handle_response, message.id, message.result)
        elif hasattr(message, "error"):
            ctx.run(self._handle_response, message.id, None, message.error)
        else:
            logger.warning("Ignoring an unrecognised JSON-RPC message")

    def _handle_response(
        self, msg_id: MsgId, result: Any | None = None, error: Any | None = None
    ) -> None:
        # pygls 2.1.1 calls set_result on the future even when we cancelled it, which
        # raises InvalidStateError out of the reader loop and shows the user an error
        # message. A late reply to a cancelled (or unknown) request is ignored quietly.
        future = self._request_futures.get(msg_id)
        if future is None or future.done():
            self._request_futures.pop(msg_id, None)
            self._result_types.pop(msg_id, None)
            logger.debug("Ignoring a late or unknown reply to request %r", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    # -- outgoing messages ------------------------------------------------------------

    def _send_response(
        self,
        msg_id: MsgId,
        result: Any | None = None,
        error: types.ResponseError | None = None,
    ) -> None:
        # pygls 2.1.1 puts tracebacks (data.traceback) and raw exception text, which
        # often holds local paths, into error responses.
        if error is not None:
            error = sanitize_error(error)
        super()._send_response(msg_id, result, error)

    def _send_handler_result(self, future: Future[Any], *, msg_id: MsgId) -> None:
        # pygls 2.1.1 logs every JsonRpcException a handler raises with a full traceback
        # at ERROR and reports it as a server error. Those are answers to client
        # mistakes (unknown command, bad arguments, unknown session): one warning line
        # and the error reply. Anything else keeps pygls' internal-error path.
        if not future.cancelled() and isinstance(future.exception(), JsonRpcException):
            self._request_futures.pop(msg_id, None)
            exc = future.exception()
            assert isinstance(exc, JsonRpcException)
            logger.warning("Request %s failed: %s", msg_id, exc.message)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def refuse_stream(self, problem: str) -> None:
        """The byte stream cannot be read on (``problem``): log it, tell the client
        (an error with ``id: null``) and let reading end, which closes the connection."""
        logger.error("Closing the connection: %s", problem)
        self._send_null_id_error(INVALID_REQUEST, f"{problem}; closing the connection")

    def report_unreadable(self, error: Exception) -> None:
        """A message body that could not be handled. An unparseable body (bad JSON,
        bad UTF-8, nesting past the parser's stack) gets ``-32700`` with ``id: null``
        (JSON-RPC 2.0 §5); anything else is logged. Never a ``window/showMessage``:
        protocol noise is not the user's business."""
        if isinstance(error, ValueError | RecursionError):
            logger.warning("Unparseable message body: %s", error)
            self._send_null_id_error(PARSE_ERROR, "Parse error: the body is not JSON")
            return
        logger.warning("Message could not be handled: %s: %s", type(error).__name__, error)

    def _send_null_id_error(self, code: int, message: str) -> None:
        self._send_data(
            {"jsonrpc": self.VERSION, "id": None, "error": {"code": code, "message": message}}
        )

    def _send_error(self, msg_id: MsgId, code: int, message: str) -> None:
        self._send_response(msg_id, error=types.ResponseError(code=code, message=message))

    async def request(self, method: str, params: Any, *, timeout_s: float | None = None) -> Any:
        """Send a server→client request and await its result.

        If the awaiting task is cancelled (or ``timeout_s`` passes), ``$/cancelRequest``
        is sent to the client and any late reply is ignored quietly. Raises
        ``asyncio.CancelledError`` / ``TimeoutError`` in those cases and
        ``JsonRpcException`` for an error reply.
        """
        msg_id = str(uuid.uuid4())
        fut = asyncio.wrap_future(self.send_request(method, params, msg_id=msg_id))
        try:
            if timeout_s is None:
                return await fut
            return await asyncio.wait_for(fut, timeout_s)
        except (asyncio.CancelledError, TimeoutError):
            self._forget_outgoing(msg_id)
            raise

    def _forget_outgoing(self, msg_id: MsgId) -> None:
        pending = self._request_futures.pop(msg_id, None)
        self._result_types.pop(msg_id, None)
        if pending is not None and not pending.done():
            pending.cancel()
        if not self.stop_requested.is_set():
            self.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    # -- lifecycle methods ------------------------------------------------------------

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        """LSP ``initialize``: records the client's process id (watched for editor death)
        and answers the capabilities."""
        self.initialize_received = True
        result = yield from super().lsp_initialize(params)
        if params.process_id:
            self._parent_watch = asyncio.ensure_future(self._watch_parent(params.process_id))
        return result

    async def _watch_parent(self, pid: int) -> None:
        # pygls 2.1.1 records processId but never watches it.
        while not self.stop_requested.is_set():
            await asyncio.sleep(PARENT_POLL_INTERVAL_S)
            if not pid_alive(pid):
                logger.warning("Editor process %s is gone; exiting", pid)
                self.request_stop(0 if self.shutdown_requested else 1)
                return

    @lsp_method(types.SHUTDOWN)
    async def lsp_shutdown(self, *args: Any) -> None:
        # pygls 2.1.1 cancels other requests' futures and answers at once, while the
        # tasks behind them (turns) keep running; it then drops later requests unanswered.
        """LSP ``shutdown``: the face stops turns and clears diagnostics before the
        answer."""
        self.shutdown_requested = True
        self.shutdown_task = asyncio.current_task()
        handler = self.fm.features.get(types.SHUTDOWN)
        if handler is not None:
            try:
                result = handler(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("Shutdown cleanup failed")
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:
        # pygls 2.1.1 closes stdout and raises SystemExit inside the handler; the exit
        # code is then lost in JsonRPCServer.start_io. We only record it and stop.
        """LSP ``exit``: exit code 0 after ``shutdown``, else 1."""
        handler = self.fm.features.get(types.EXIT)
        if handler is not None:
            try:
                handler(*args)
            except Exception:
                logger.exception("Exit handler failed")
        self.request_stop(0 if self.shutdown_requested else 1)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        # pygls 2.1.1 runs the command as a separate task under a random id, so
        # $/cancelRequest only cancels the reply while the command keeps running. Here the
        # command runs inside the request's own task: cancelling the request cancels it.
        """LSP ``workspace/executeCommand``: run one ``clio.*`` command with the request's
        progress token in context."""
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams(f"Unknown command {params.command!r}")
        try:
            args, kwargs = _prepare_command_arguments(handler, params, self._converter)
        except Exception as exc:
            raise JsonRpcInvalidParams(f"{params.command}: {exc}") from exc
        current_command.set(params)
        result = handler(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    @lsp_method(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def lsp_work_done_progress_cancel(self, params: types.WorkDoneProgressCancelParams) -> None:
        # pygls 2.1.1 warns for tokens it did not create; we track our own.
        """LSP ``window/workDoneProgress/cancel``: cancel the progress (and with it the
        turn)."""
        future: Future[Any] | None = self.progress.tokens.get(params.token)
        if future is not None and not future.done():
            future.cancel()
        handler = self.fm.features.get(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
        if handler is not None:
            result = handler(params)
            if inspect.isawaitable(result):
                self.spawn(result)

    def cancel_parent_watch(self) -> None:
        """Stop polling the editor process (the runner calls this when it stops)."""
        if self._parent_watch is not None:
            self._parent_watch.cancel()
