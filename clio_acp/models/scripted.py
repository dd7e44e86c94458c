"""A scripted OpenAI-compatible model server on loopback (issue 5 item 7, issue 10).

Product code since issue 10: it is the deterministic model of ``clio-acp eval ab
--scripted`` and the far side of the wire in the tests (``tests/support/model_server``
re-exports it and registers the ``model_server`` fixture).

Owns a real HTTP server on ``127.0.0.1`` (random port) that answers
``POST /v1/chat/completions`` from a per-test *script* of ``Reply`` objects, streamed
(SSE, chunked transfer) or not, and records every request. It also answers
``GET /v1/models``, ``/health`` and, when a test sets them, llama.cpp's ``/props``
and ``/slots``. It runs in its own thread, so a test may block (``subprocess.run``)
or drive its own event loop while the server answers a ``clio-acp`` child process.
It must not import the rest of ``clio_acp``: it is the far side of the wire.

Use in a test (the ``model_server`` fixture is registered in ``tests/conftest.py``)::

    def test_x(model_server, run_cli):
        model_server.push(Reply(text="Hello there", usage=usage(12, 3)))
        model_server.install_settings()          # <config>/settings.yaml: chat (and memory) → this server
        ...
        assert model_server.bodies[0]["stream"] is True

Or standalone, e.g. beside a hand-run ``clio-acp acp``::

    python -m tests.support.model_server --script replies.json --record requests.jsonl
    # prints "http://127.0.0.1:PORT/v1" on stdout, serves until SIGTERM/SIGINT

``replies.json`` is a JSON list of ``Reply`` fields (``tool_calls`` as a list of
``ToolCall`` field dicts); ``when`` predicates exist only in-process.

Reply choice: the first queued reply whose ``when`` accepts the request body is
consumed; with none, ``responder(body)`` is called if set, else ``default`` is
used if set, else the server answers HTTP 500 "no reply scripted" (loud on
purpose: an unscripted call is a test bug).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "scripted-model"
TARGET_ID = "scripted"


@dataclass
class ToolCall:
    """One tool call the model makes; ``arguments`` (JSON text) is streamed in pieces
    of ``split`` characters, so pieces cut the JSON mid-token."""

    name: str
    arguments: str = "{}"
    id: str | None = None
    split: int = 7


@dataclass
class Reply:
    """One scripted answer.

    - ``text`` / ``reasoning``: a string (streamed word by word) or an explicit list
      of chunks; reasoning goes out as ``reasoning_content`` before the text.
    - ``tool_calls``: streamed as deltas split mid-JSON (see ``ToolCall.split``).
    - ``usage``: sent in the final chunk (llama.cpp style), or in a separate
      ``choices: []`` chunk when ``usage_in_separate_chunk`` (OpenAI
      ``stream_options.include_usage`` style). ``timings``: llama.cpp's object.
    - ``status`` ≠ 200: an error answer with ``error`` as the message (or a whole
      JSON body when a dict) and ``headers`` (e.g. ``{"Retry-After": "1"}``).
    - ``delay``: seconds before the status line; ``chunk_delay``: seconds between
      SSE events (a slow stream).
    - ``done=False``: the stream ends cleanly without ``data: [DONE]``.
    - ``disconnect_after=N``: the connection is cut after N SSE events (no chunked
      terminator, no ``[DONE]``): a dropped stream.
    - ``raw``: exact SSE ``data:`` payloads to send instead of generated ones.
    - ``when``: predicate on the request body; the reply is only used for matches.
    """

    text: str | Sequence[str] = ""
    reasoning: str | Sequence[str] = ""
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    usage_in_separate_chunk: bool = False
    timings: dict[str, Any] | None = None
    status: int = 200
    error: str | dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    done: bool = True
    disconnect_after: int | None = None
    raw: Sequence[str] | None = None
    model: str | None = None
    when: Callable[[dict[str, Any]], bool] | None = None


def usage(prompt: int, completion: int, cached: int | None = None) -> dict[str, Any]:
    """An OpenAI ``usage`` object (tokens); ``cached`` fills ``prompt_tokens_details``."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def busy(status: int = 503, message: str = "server busy", retry_after: str | None = None) -> Reply:
    """An endpoint-busy answer (429 or 503), optionally with ``Retry-After``."""
    headers = {"Retry-After": retry_after} if retry_after else {}
    return Reply(status=status, error=message, headers=headers)


@dataclass
class RecordedRequest:
    """One request as received: method, path, headers (lower-case keys), JSON body
    (``None`` when absent or not JSON), and whether the client went away while we
    were still writing the answer (``client_disconnected``)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client_disconnected: bool = False


def _pieces(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return re.findall(r"\s*\S+|\s+", value) if value else []
    return list(value)


class _Cut(Exception):
    """Raised inside the handler to drop the connection without a clean end."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows stderr
        pass

    # -- plumbing -------------------------------------------------------------
    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: Any) -> RecordedRequest:
        rec = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.server.owner._record(rec)
        return rec

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    # -- routes ---------------------------------------------------------------
    def do_GET(self) -> None:
        owner = self.server.owner
        self._record(None)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            data = [
                {"id": m, "object": "model", "owned_by": "scripted", **owner.model_meta.get(m, {})}
                for m in owner.models
            ]
            self._json(200, {"object": "list", "data": data})
        elif path == "/health":
            self._json(200, {"status": "ok"})
        elif path == "/props" and owner.props is not None:
            self._json(200, owner.props)
        elif path == "/slots" and owner.slots is not None:
            self._json(200, owner.slots)
        else:
            self._json(404, {"error": {"message": f"not found: {path}", "code": 404}})

    def do_POST(self) -> None:
        owner = self.server.owner
        body = self._read_body()
        rec = self._record(body)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"error": {"message": f"not found: {path}", "code": 404}})
            return
        if not isinstance(body, dict):
            self._json(400, {"error": {"message": "body is not a JSON object", "code": 400}})
            return
        reply = owner._next_reply(body)
        if reply is None:
            self._json(500, {"error": {"message": "scripted model server: no reply scripted"}})
            return
        if reply.delay and owner._stopping.wait(reply.delay):
            return
        try:
            if reply.status != 200:
                err = reply.error if reply.error is not None else f"HTTP {reply.status}"
                payload = (
                    err
                    if isinstance(err, dict)
                    else {"error": {"message": err, "code": reply.status}}
                )
                self.close_connection = True
                self._json(reply.status, payload, reply.headers)
            elif body.get("stream"):
                self._stream(reply, body)
            else:
                self._json(200, _completion(reply, body), reply.headers)
        except (BrokenPipeError, ConnectionResetError, _Cut) as exc:
            if not isinstance(exc, _Cut):
                rec.client_disconnected = True
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
        owner = self.server.owner
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.close_connection = True
        payloads = list(reply.raw) if reply.raw is not None else _stream_payloads(reply, body)
        sent = 0
        for index, payload in enumerate(payloads):
            if reply.disconnect_after is not None and sent >= reply.disconnect_after:
                raise _Cut
            if index and reply.chunk_delay and owner._stopping.wait(reply.chunk_delay):
                raise _Cut
            self._chunk(f"data: {payload}\n\n".encode())
            sent += 1
        if reply.disconnect_after is not None and sent >= reply.disconnect_after:
            raise _Cut
        if reply.done:
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _completion(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` object for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(_pieces(reply.text)) or None}
    reasoning = "".join(_pieces(reply.reasoning))
    if reasoning:
        message["reasoning_content"] = reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    out: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or body.get("model") or DEFAULT_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
    }
    if reply.usage is not None:
        out["usage"] = reply.usage
    if reply.timings is not None:
        out["timings"] = reply.timings
    return out


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _stream_payloads(reply: Reply, body: dict[str, Any]) -> list[str]:
    """The SSE ``data:`` payloads (JSON text) of a streamed ``reply``."""
    model = reply.model or body.get("model") or DEFAULT_MODEL
    created = int(time.time())

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        obj: dict[str, Any] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        obj.update(extra)
        return json.dumps(obj)

    out = [chunk({"role": "assistant", "content": None})]
    out += [chunk({"reasoning_content": piece}) for piece in _pieces(reply.reasoning)]
    out += [chunk({"content": piece}) for piece in _pieces(reply.text)]
    for index, call in enumerate(reply.tool_calls):
        args = call.arguments
        step = max(1, call.split)
        parts = [args[i : i + step] for i in range(0, len(args), step)] or [""]
        first = {
            "index": index,
            "id": call.id or f"call_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": parts[0]},
        }
        out.append(chunk({"tool_calls": [first]}))
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in parts[1:]
        ]
    extra: dict[str, Any] = {}
    if reply.usage is not None and not reply.usage_in_separate_chunk:
        extra["usage"] = reply.usage
    if reply.timings is not None:
        extra["timings"] = reply.timings
    out.append(chunk({}, _finish(reply), **extra))
    if reply.usage is not None and reply.usage_in_separate_chunk:
        out.append(chunk(None, usage=reply.usage))
    return out


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a cut or abandoned connection is part of the script, not a failure


class ScriptedModelServer:
    """The server object tests talk to. Thread-safe; start/stop or use as a context
    manager. ``url`` is the root (``http://127.0.0.1:PORT``), ``base_url`` the
    OpenAI base (``…/v1``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: list[Reply] = []
        self._stopping = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[dict[str, Any]], Reply | None] | None = None
        self.default: Reply | None = None
        self.models: list[str] = [DEFAULT_MODEL]
        self.model_meta: dict[str, dict[str, Any]] = {}
        """Extra fields of a model's ``/v1/models`` entry (e.g. vLLM ``max_model_len``)."""
        self.props: dict[str, Any] | None = None
        self.slots: list[dict[str, Any]] | None = None
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------
    @property
    def port(self) -> int:
        """The loopback port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``<url>/v1``."""
        return f"{self.url}/v1"

    def start(self) -> ScriptedModelServer:
        """Serve in a daemon thread; returns the server (chainable)."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; streams in progress end."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script ---------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Append replies to the script (consumed in order, subject to ``when``)."""
        with self._lock:
            self._queue.extend(replies)

    def script(self, replies: Sequence[Reply]) -> None:
        """Replace the script."""
        with self._lock:
            self._queue = list(replies)

    @property
    def pending(self) -> int:
        """Replies still queued."""
        with self._lock:
            return len(self._queue)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            for i, reply in enumerate(self._queue):
                if reply.when is None or reply.when(body):
                    return self._queue.pop(i)
        if self.responder is not None:
            answer = self.responder(body)
            if answer is not None:
                return answer
        return self.default

    # -- recording ------------------------------------------------------------
    def _record(self, rec: RecordedRequest) -> None:
        with self._changed:
            self.requests.append(rec)
            self._changed.notify_all()

    @property
    def completions(self) -> list[RecordedRequest]:
        """The recorded ``POST …/chat/completions`` requests, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST"]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the recorded chat completion requests."""
        return [r.body for r in self.completions]

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` completion requests arrived (``TimeoutError`` after
        ``timeout`` seconds); returns them."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while sum(r.method == "POST" for r in self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"expected {count} completion requests")
                self._changed.wait(left)
            return [r for r in self.requests if r.method == "POST"]

    # -- pointing the product at it -------------------------------------------
    def settings_yaml(
        self,
        *,
        runtime: str = "llamacpp",
        memory: bool = True,
        max_concurrent_requests: int | None = 4,
        model: str = DEFAULT_MODEL,
        extra: str = "",
    ) -> str:
        """A ``settings.yaml`` text whose target ``scripted`` is this server and whose
        ``chat`` role (and ``context.memory`` role when ``memory``) routes to it.
        ``max_concurrent_requests=None`` leaves capacity to discovery/defaults
        (one slot for a local runtime). ``extra`` is appended verbatim."""
        lines = [
            "version: 2",
            "targets:",
            f"  - id: {TARGET_ID}",
            f"    runtime: {runtime}",
            f"    url: {self.base_url}",
        ]
        if max_concurrent_requests is not None:
            lines.append(f"    maxConcurrentRequests: {max_concurrent_requests}")
        lines += ["chat:", f"  target: {TARGET_ID}", f"  model: {model}"]
        if memory:
            lines += [
                "context:",
                "  memory:",
                f"    target: {TARGET_ID}",
                f"    model: {model}",
            ]
        text = "\n".join(lines) + "\n"
        return text + (extra if extra.endswith("\n") or not extra else extra + "\n")

    def install_settings(self, config_dir: Path | None = None, **kwargs: Any) -> Path:
        """Write ``settings_yaml(**kwargs)`` to ``<config>/settings.yaml`` (default:
        ``$CLIO_ACP_CONFIG_DIR``, which the autouse ``isolated_dirs`` fixture sets per
        test, so child processes started afterwards see it too). Returns the path."""
        if config_dir is None:
            config_dir = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
        config_dir.mkdir(parents=True, exist_ok=True)
        path = config_dir / "settings.yaml"
        path.write_text(self.settings_yaml(**kwargs), encoding="utf-8")
        return path


@contextlib.contextmanager
def running_server() -> Iterator[ScriptedModelServer]:
    """A started server, stopped on exit (what the ``model_server`` fixture yields)."""
    with ScriptedModelServer() as server:
        yield server


def _reply_from_json(data: dict[str, Any]) -> Reply:
    calls = [ToolCall(**c) for c in data.pop("tool_calls", [])]
    return Reply(tool_calls=calls, **data)


def main(argv: list[str] | None = None) -> int:
    """Standalone mode: serve until SIGTERM/SIGINT; print the base URL first."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.model_server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", type=Path, help="JSON list of Reply field dicts")
    parser.add_argument("--default-text", help="answer this text when the script is empty")
    parser.add_argument("--record", type=Path, help="append each request as a JSON line here")
    args = parser.parse_args(argv)
    server = ScriptedModelServer(port=args.port)
    if args.script:
        server.script([_reply_from_json(d) for d in json.loads(args.script.read_text())])
    if args.default_text is not None:
        server.default = Reply(text=args.default_text)
    if args.record:
        record_path = args.record
        original = server._record

        def record(rec: RecordedRequest) -> None:
            original(rec)
            line = {"method": rec.method, "path": rec.path, "body": rec.body}
            with record_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")

        server._record = record  # type: ignore[method-assign]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    # Standalone test tool, not a protocol server: its stdout is the base URL, for the
    # caller (tests, editor-client harnesses) to read.
    print(server.base_url, flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
