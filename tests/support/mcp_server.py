"""A real stdio MCP server for the ACP face's MCP tests, written with the official
``mcp`` SDK (``MCPServer``). Run as ``python -m tests.support.mcp_server``.

Tools: ``add(a, b)`` (the sum as text), ``shout(text)`` (read-only: upper case) and
``fail()`` (an ``isError`` result). With ``MCP_PID_FILE`` set it writes its pid there
(tests check that it is stopped with the session)."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("demo")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def fail() -> str:
    """Always fails."""
    raise RuntimeError("the demo tool failed on purpose")


if __name__ == "__main__":
    pid_file = os.environ.get("MCP_PID_FILE")
    if pid_file:
        with open(pid_file, "w", encoding="ascii") as handle:
            handle.write(str(os.getpid()))
    server.run()
