"""Tools of the client's MCP servers (ACP ``session/new`` ``mcpServers``), through the
official ``mcp`` Python SDK (a stdio client per server; no protocol code of ours).

Owns starting a stdio server (``StdioServerParameters``: command, args, env over the
SDK's safe default environment, the session folder as cwd), listing its tools, turning
each into a :class:`ToolSpec` the agent loop offers the model, calling it, and
stopping the server. A tool is named ``mcp__<server>__<tool>`` (OpenAI function names:
``[A-Za-z0-9_-]``, at most 64 characters); annotated ``readOnlyHint`` it is kind and
category ``read`` (never asks), otherwise kind ``other`` / category ``execute`` (asks
under the same permission modes as ``run_command``). It must not decide permissions
or talk to a face: a server that cannot start is reported as a problem string.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from clio_acp.agent.tools.results import ToolResult, error_result, ok_result
from clio_acp.agent.tools.spec import ToolContext, ToolSpec

log = logging.getLogger(__name__)

START_TIMEOUT_S = 20.0
"""How long one server may take to start and list its tools, seconds."""
CALL_TIMEOUT_S = 300.0
"""How long one MCP tool call may take, seconds."""
STOP_TIMEOUT_S = 5.0
"""How long a server may take to stop before its task is cancelled, seconds."""
NAME_MAX = 64
"""OpenAI function names are at most 64 characters."""


@dataclass(frozen=True)
class McpServerSpec:
    """One stdio MCP server: ``name`` (for tool names and notices), ``command`` and
    ``args`` to start it, ``env`` added to the SDK's default environment."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


class McpArgs(BaseModel):
    """An MCP tool's arguments: any JSON object (the server validates them)."""

    model_config = ConfigDict(extra="allow")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>`` with other characters as ``_``, cut to 64."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")
    return clean[:NAME_MAX]


class McpServer:
    """One running stdio server: its SDK ``ClientSession`` lives in its own task."""

    def __init__(self, spec: McpServerSpec, cwd: str) -> None:
        self.spec = spec
        self._cwd = cwd
        self._session: Any = None
        self.tools: list[Any] = []
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the server and list its tools; raises on failure or after ``timeout_s``."""
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(), name=f"mcp-{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout_s)
        except BaseException:
            await self.stop()
            raise

    async def _run(self) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import get_default_environment, stdio_client

        params = StdioServerParameters(
            command=self.spec.command,
            args=list(self.spec.args),
            env={**get_default_environment(), **self.spec.env},
            cwd=self._cwd,
            encoding_error_handler="replace",
        )
        assert self._ready is not None
        try:
            async with stdio_client(params, errlog=sys.stderr) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.tools = list((await session.list_tools()).tools)
                    self._session = session
                    self._ready.set_result(None)
                    await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(
                    exc if isinstance(exc, Exception) else RuntimeError(str(exc))
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.info("MCP server %s ended: %s", self.spec.name, exc)
        finally:
            self._session = None

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call tool ``name``; its text content as a result (``isError`` → error)."""
        session = self._session
        if session is None:
            return error_result(f"MCP server {self.spec.name} is not running")
        result = await session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT_S)
        text = result_text(result)
        if getattr(result, "is_error", getattr(result, "isError", False)):
            return error_result(text or f"{name} failed", output=f"Error: {text}")
        return ok_result(text)

    def specs(self) -> list[ToolSpec]:
        """The server's tools as agent tool specs."""
        return [self._spec_of(tool) for tool in self.tools]

    def _spec_of(self, tool: Any) -> ToolSpec:
        annotations = getattr(tool, "annotations", None)
        read_only = bool(annotations is not None and getattr(annotations, "read_only_hint", None))
        remote = tool.name

        async def run(args: BaseModel, ctx: ToolContext) -> ToolResult:
            return await self.call(remote, args.model_dump())

        schema = inline_refs(
            dict(getattr(tool, "input_schema", None) or {"type": "object", "properties": {}})
        )
        return ToolSpec(
            name=tool_name(self.spec.name, remote),
            description=(tool.description or remote) + f" (MCP server {self.spec.name})",
            args_model=McpArgs,
            kind="read" if read_only else "other",
            category="read" if read_only else "execute",
            run=run,
            parameters=schema,
        )

    async def stop(self) -> None:
        """Stop the server (its process ends with the stdio client)."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S)
        except (TimeoutError, Exception):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def inline_refs(schema: dict[str, Any], depth: int = 8) -> dict[str, Any]:
    """``schema`` with local ``$ref``s (``#/$defs/X``, ``#/definitions/X``) replaced by
    their definitions and the definitions dropped (grammar-constrained local models
    cannot resolve a reference); a reference nested deeper than ``depth`` (a recursive
    type) becomes ``{}`` (any value)."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def walk(node: Any, level: int) -> Any:
        if isinstance(node, list):
            return [walk(n, level) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            target = defs.get(ref.rsplit("/", 1)[1])
            if target is None or level >= depth:
                return {}
            return walk({**target, **{k: v for k, v in node.items() if k != "$ref"}}, level + 1)
        return {k: walk(v, level) for k, v in node.items() if k not in ("$defs", "definitions")}

    return walk(schema, 0)


def result_text(result: Any) -> str:
    """The text of a ``CallToolResult``: text blocks joined; other blocks named."""
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(str(result.structured_content))
    return "\n".join(parts)


async def start_servers(specs: list[McpServerSpec], cwd: str) -> tuple[list[McpServer], list[str]]:
    """Start every server concurrently: (the running ones, one problem line per server
    that could not start)."""
    servers = [McpServer(spec, cwd) for spec in specs]
    outcomes = await asyncio.gather(*(s.start() for s in servers), return_exceptions=True)
    running, problems = [], []
    for server, outcome in zip(servers, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            problems.append(f"MCP server {server.spec.name} did not start: {_why(outcome)}")
        else:
            running.append(server)
    return running, problems


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {START_TIMEOUT_S:.0f} s"
    inner = getattr(exc, "exceptions", None)  # an anyio ExceptionGroup
    if inner:
        return _why(inner[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
