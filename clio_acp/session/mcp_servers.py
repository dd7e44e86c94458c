"""The client's MCP servers attached to a live session (ACP ``session/new``, ``load``,
``resume`` ``mcpServers``; issue 21 item 1).

Owns the lifetime of a session's servers: started in the session folder, their tools
added to the session's tool registry (the agent loop offers them from the next model
request on, under the session's permission mode), and removed and stopped together.
A server that cannot start is a problem line for the face to show; the session goes
on without it. It knows no protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clio_acp.agent.tools.mcp import McpServer, McpServerSpec, start_servers

if TYPE_CHECKING:
    from clio_acp.session.manager import Session

__all__ = ["McpAttachment", "McpServerSpec", "attach_mcp_servers"]


@dataclass
class McpAttachment:
    """A session's running MCP servers: ``tool_names`` offered, ``problems`` (one line
    per server that did not start)."""

    session: Session
    servers: list[McpServer] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    async def aclose(self) -> None:
        """Withdraw the tools and stop every server (idempotent)."""
        for name in self.tool_names:
            self.session.loop.registry.remove(name)
        self.session.loop.tools_changed()
        self.tool_names = []
        servers, self.servers = self.servers, []
        for server in servers:
            await server.stop()


async def attach_mcp_servers(session: Session, specs: list[McpServerSpec]) -> McpAttachment:
    """Start ``specs`` (stdio servers) for ``session`` and offer their tools. Never
    raises for a server that fails: it is listed in ``problems``."""
    attachment = McpAttachment(session)
    if not specs:
        return attachment
    running, attachment.problems = await start_servers(specs, str(session.cwd))
    attachment.servers = running
    for server in running:
        for spec in server.specs():
            session.loop.registry.add(spec)
            attachment.tool_names.append(spec.name)
    session.loop.tools_changed()
    return attachment
