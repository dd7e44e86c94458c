"""``mcpServers`` of ``session/new`` / ``session/load`` / ``session/resume`` → the
session's MCP servers (ACP v1 "MCP servers"; we advertise ``mcpCapabilities`` http and
sse false, so only stdio entries are started).

Owns the translation of the schema's server entries into ``McpServerSpec`` and the
problem line for each entry we do not serve (an ``http``/``sse``/``acp`` entry: the
client should not send it); the servers themselves run in the core
(``clio_acp.session.attach_mcp_servers``).
"""

from __future__ import annotations

from typing import Any

from clio_acp import session as core  # names resolve on first use: a fast initialize


def server_specs(entries: list[Any] | None) -> tuple[list[Any], list[str]]:
    """(``McpServerSpec`` for each stdio entry, a problem line for each other entry)."""
    specs: list[Any] = []
    problems: list[str] = []
    for entry in entries or []:
        kind = getattr(entry, "type", None) or "stdio"
        name = getattr(entry, "name", "?")
        if kind != "stdio" or not getattr(entry, "command", None):
            problems.append(
                f"MCP server {name}: {kind} transport is not supported by clio-acp "
                f"(mcpCapabilities.{kind} is false); only stdio servers are started"
            )
            continue
        env = {v.name: v.value for v in getattr(entry, "env", None) or []}
        specs.append(
            core.McpServerSpec(
                name=name, command=entry.command, args=tuple(entry.args or ()), env=env
            )
        )
    return specs, problems
