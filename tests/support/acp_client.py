"""Test clients for ``clio-acp acp``: the official Python SDK over a real subprocess,
and a raw line-level peer for wire tests.

``RecordingClient`` implements the SDK's client side (``session/update``,
``session/request_permission``, ``fs/*``, ``terminal/*``) and records everything the
agent sent, with an observer on the raw stream so updates the SDK cannot parse (the
``notice`` update, newer than SDK 0.12.1) are still visible. It must not import
``clio_acp``: it is the far side of the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    DeniedOutcome,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def agent_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


AGENT_ARGV = [sys.executable, "-m", "clio_acp", "--log-level", "INFO", "acp"]

AGENT_EXIT_TIMEOUT_S = 30.0
"""How long closing ``acp_agent`` waits for the agent to exit after end of input before
the SDK terminates it. The SDK's default (2 s) is short on a loaded 2-core machine: an
exit that lands between that timeout and the SDK's ``terminate()`` raised
``ProcessLookupError`` out of ``spawn_stdio_transport`` (seen in a CI-condition run at
load 9)."""


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


@dataclass
class _Terminal:
    proc: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    pump: asyncio.Task[None] | None = None
    released: bool = False


class RecordingClient:
    """An ACP client that records updates and answers permission requests by policy.

    ``permission``: an option id to choose (``"allow_once"`` …), ``"cancelled"``, or a
    callable ``(params) -> awaitable outcome dict``; ``permission_requests`` records
    each request. ``files``: an in-memory editor buffer map for ``fs/*``.
    """

    def __init__(self, permission: Any = "allow_once") -> None:
        self.permission = permission
        self.raw_updates: list[dict[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.permission_waiting = asyncio.Event()
        self.release_permission = asyncio.Event()
        self.hold_permission = False
        self.files: dict[str, str] = {}
        self.writes: list[tuple[str, str]] = []
        self.terminals: dict[str, _Terminal] = {}
        self.terminal_log: list[str] = []
        self.requests_seen: list[str] = []
        self._update_waiters: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Future]] = []

    # raw observer: sees every message, including ones the SDK can't validate
    def observe(self, event: StreamEvent) -> None:
        msg = event.message
        if event.direction is StreamDirection.INCOMING and msg.get("method") == "session/update":
            params = msg.get("params") or {}
            self.raw_updates.append(params)
            for pred, fut in list(self._update_waiters):
                if not fut.done() and pred(params):
                    fut.set_result(params)
        if event.direction is StreamDirection.INCOMING and "method" in msg and "id" in msg:
            self.requests_seen.append(msg["method"])

    def updates(self, kind: str | None = None, session_id: str | None = None) -> list[dict]:
        out = []
        for params in self.raw_updates:
            upd = params.get("update", {})
            if kind is not None and upd.get("sessionUpdate") != kind:
                continue
            if session_id is not None and params.get("sessionId") != session_id:
                continue
            out.append(upd)
        return out

    async def wait_update(self, pred: Callable[[dict[str, Any]], bool], wait_s: float = 20):
        for params in self.raw_updates:
            if pred(params):
                return params
        fut = asyncio.get_running_loop().create_future()
        self._update_waiters.append((pred, fut))
        return await asyncio.wait_for(fut, wait_s)

    # -- Client protocol (SDK) -------------------------------------------------
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, options, session_id, tool_call, **kwargs: Any):
        self.permission_requests.append(
            {
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
                "options": [o.option_id for o in options],
            }
        )
        self.permission_waiting.set()
        if self.hold_permission:
            await self.release_permission.wait()
        choice = self.permission
        if callable(choice):
            choice = await choice()
        if choice == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def read_text_file(self, path, session_id, limit=None, line=None, **kwargs):
        if path in self.files:
            return ReadTextFileResponse(content=self.files[path])
        return ReadTextFileResponse(content=await asyncio.to_thread(Path(path).read_text))

    async def write_text_file(self, content, path, session_id, **kwargs):
        self.writes.append((path, content))
        self.files[path] = content
        await asyncio.to_thread(_write, Path(path), content)
        return WriteTextFileResponse()

    async def create_terminal(
        self, command, session_id, args=None, cwd=None, env=None, output_byte_limit=None, **kwargs
    ):
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        tid = f"term-{len(self.terminals) + 1}"
        term = _Terminal(proc)

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(4096):
                term.output.extend(chunk)

        term.pump = asyncio.create_task(pump())
        self.terminals[tid] = term
        self.terminal_log.append(f"create {tid} {command} {' '.join(args or [])}")
        return CreateTerminalResponse(terminal_id=tid)

    async def terminal_output(self, session_id, terminal_id, **kwargs):
        term = self.terminals[terminal_id]
        status = None
        if term.proc.returncode is not None:
            status = TerminalExitStatus(exit_code=term.proc.returncode)
        return TerminalOutputResponse(
            output=term.output.decode(errors="replace"), truncated=False, exit_status=status
        )

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kwargs):
        term = self.terminals[terminal_id]
        code = await term.proc.wait()
        if term.pump:
            await term.pump
        return WaitForTerminalExitResponse(exit_code=code if code >= 0 else None)

    async def kill_terminal(self, session_id, terminal_id, **kwargs):
        term = self.terminals[terminal_id]
        self.terminal_log.append(f"kill {terminal_id}")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(term.proc.pid, 9)
        return KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kwargs):
        term = self.terminals[terminal_id]
        term.released = True
        self.terminal_log.append(f"release {terminal_id}")
        if term.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(term.proc.pid, 9)
        return ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict) -> dict:
        return {}

    async def ext_notification(self, method: str, params: dict) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        pass


@contextlib.asynccontextmanager
async def acp_agent(
    client: RecordingClient | None = None,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[tuple[Any, RecordingClient, asyncio.subprocess.Process]]:
    """``clio-acp acp`` as a real subprocess with the SDK's ``ClientSideConnection``."""
    client = client or RecordingClient()
    async with spawn_agent_process(
        client,
        AGENT_ARGV[0],
        *AGENT_ARGV[1:],
        env=agent_env(env),
        cwd=cwd,
        transport_kwargs={"stderr": None, "shutdown_timeout": AGENT_EXIT_TIMEOUT_S},
    ) as (conn, proc):
        conn._conn.add_observer(client.observe)
        yield conn, client, proc


async def raw_request(conn: Any, method: str, params: dict[str, Any]) -> Any:
    """A request the SDK client has no method for (``session/delete``, ``logout``)."""
    return await conn._conn.send_request(method, params)


class RawPeer:
    """Line-level peer for wire tests: write raw lines, read decoded JSON lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[bytes] = []

    @classmethod
    async def start(cls, env: dict[str, str] | None = None, cwd: Path | None = None) -> RawPeer:
        proc = await asyncio.create_subprocess_exec(
            *AGENT_ARGV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=agent_env(env),
            cwd=cwd,
        )
        return cls(proc)

    async def send_line(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        data = line if isinstance(line, bytes) else line.encode()
        self.proc.stdin.write(data + b"\n")
        await self.proc.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message))

    async def recv(self, wait_s: float = 20) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), wait_s)
        if not line:
            raise EOFError("agent closed stdout")
        self.lines.append(line)
        return json.loads(line)  # a non-JSON line on stdout fails the test here

    async def recv_until(
        self, pred: Callable[[dict], bool], wait_s: float = 20
    ) -> tuple[dict, list[dict]]:
        seen: list[dict] = []
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            msg = await self.recv(max(0.1, deadline - asyncio.get_running_loop().time()))
            if pred(msg):
                return msg, seen
            seen.append(msg)

    async def close(self) -> tuple[bytes, bytes]:
        assert self.proc.stdin is not None
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
        try:
            rest, err = await asyncio.wait_for(self.proc.communicate(), 20)
        except TimeoutError:
            self.proc.kill()
            rest, err = await self.proc.communicate()
        return rest, err
