"""A ``ToolHost`` backed by the ACP client's ``fs/*`` and ``terminal/*`` methods.

When the client advertises ``fs.readTextFile`` / ``fs.writeTextFile`` / ``terminal``
in ``initialize``, file reads see the editor's unsaved buffers, writes go through the
editor, and commands run in terminals the editor shows (issue 7 item 6). Each
capability the client lacks falls back to the core's local host. A terminal is always
released (``terminal/release`` in ``finally``); a cancelled command is killed first
(``terminal/kill``). This module translates; it must not decide permissions (the
core's permission gate runs before any tool reaches a host).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.connection import Connection
from acp.schema import (
    CreateTerminalResponse,
    ReadTextFileResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from clio_acp.session import CommandResult, LocalToolHost, OutputCallback

if TYPE_CHECKING:
    from clio_acp.acp.hosting import ClientTools

log = logging.getLogger(__name__)

OUTPUT_BYTE_LIMIT = 1_000_000
"""``terminal/create`` ``outputByteLimit``, bytes: the client keeps at most this much."""

POLL_INTERVAL_S = 0.25
"""How often a running terminal's output is fetched for streaming, seconds."""


class AcpToolHost:
    """``ToolHost`` for one ACP session (``read_text``, ``write_text``, ``run_command``)."""

    def __init__(
        self,
        conn: Connection,
        session_id: Callable[[], str] | str,
        tools: ClientTools,
        local: LocalToolHost | None = None,
    ) -> None:
        self._conn = conn
        self._session_id = session_id
        self._tools = tools
        self._local = local or LocalToolHost()

    @property
    def session_id(self) -> str:
        """The ACP session id the client's methods are called for."""
        return self._session_id() if callable(self._session_id) else self._session_id

    async def read_text(self, path: Path) -> str:
        """The file's text as the editor sees it (``fs/read_text_file``), else from disk."""
        if not self._tools.read_text_file:
            return await self._local.read_text(path)
        raw = await self._conn.send_request(
            "fs/read_text_file", {"sessionId": self.session_id, "path": str(path)}
        )
        return ReadTextFileResponse.model_validate(raw).content

    async def write_text(self, path: Path, text: str) -> None:
        """Write through the editor (``fs/write_text_file``), else to disk."""
        if not self._tools.write_text_file:
            await self._local.write_text(path, text)
            return
        await self._conn.send_request(
            "fs/write_text_file",
            {"sessionId": self.session_id, "path": str(path), "content": text},
        )

    async def run_command(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_ms: int,
        on_output: OutputCallback | None = None,
    ) -> CommandResult:
        """Run ``command`` in a client terminal (``sh -c``), else locally.

        Streams new output to ``on_output`` while it runs; on timeout or cancellation
        the terminal is killed; it is released in every case.
        """
        if not self._tools.terminal:
            return await self._local.run_command(
                command, cwd=cwd, timeout_ms=timeout_ms, on_output=on_output
            )
        sid = self.session_id
        created = CreateTerminalResponse.model_validate(
            await self._conn.send_request(
                "terminal/create",
                {
                    "sessionId": sid,
                    "command": "sh",
                    "args": ["-c", command],
                    "cwd": str(cwd),
                    "outputByteLimit": OUTPUT_BYTE_LIMIT,
                },
            )
        )
        tid = created.terminal_id
        ref = {"sessionId": sid, "terminalId": tid}
        timed_out = False
        seen = 0
        try:
            waiter = asyncio.ensure_future(self._conn.send_request("terminal/wait_for_exit", ref))
            try:
                deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
                while not waiter.done():
                    remaining = deadline - asyncio.get_running_loop().time()
                    if remaining <= 0:
                        timed_out = True
                        break
                    await asyncio.wait({waiter}, timeout=min(POLL_INTERVAL_S, remaining))
                    if on_output is not None:
                        seen = await self._stream(ref, seen, on_output)
                if timed_out:
                    with contextlib.suppress(Exception):
                        await self._conn.send_request("terminal/kill", ref)
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(waiter, timeout=2)
                else:
                    WaitForTerminalExitResponse.model_validate(waiter.result())
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._conn.send_request("terminal/kill", ref))
                raise
            finally:
                if not waiter.done():
                    waiter.cancel()
            output = TerminalOutputResponse.model_validate(
                await self._conn.send_request("terminal/output", ref)
            )
            if on_output is not None and len(output.output) > seen:
                await _maybe_await(on_output(output.output[seen:]))
            status = output.exit_status
            exit_code = None if timed_out or status is None else status.exit_code
            return CommandResult(
                exit_code=exit_code, stdout=output.output, stderr="", timed_out=timed_out
            )
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._conn.send_request("terminal/release", ref))

    async def _stream(self, ref: dict[str, Any], seen: int, on_output: OutputCallback) -> int:
        try:
            out = TerminalOutputResponse.model_validate(
                await self._conn.send_request("terminal/output", ref)
            )
        except Exception:
            log.debug("terminal/output failed", exc_info=True)
            return seen
        if len(out.output) > seen:
            await _maybe_await(on_output(out.output[seen:]))
            return len(out.output)
        return seen


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if value is not None and hasattr(value, "__await__"):
        await value
