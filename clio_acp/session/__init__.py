"""Sessions: lifecycle (new, load, resume, fork, close), the typed event stream a
face subscribes to, the journal, and the session's verbs. Does not know which
protocol is speaking.

This package's names are the only core names a face (``acp/``, ``lsp/``, ``cli/``)
imports; everything else under ``clio_acp`` is below the faces' floor. Names are
loaded on first use (PEP 562), so ``import clio_acp.session`` stays cheap for a
face's ``initialize``:

- :class:`SessionManager`, :class:`Session`, :class:`SessionInfo`,
  :class:`SessionNotFound`, :class:`SessionBusy` — lifecycle (``session/manager.py``);
- :mod:`events` and each event class — the event stream (``clio_acp/events.py``);
- :func:`neutralize_untrusted`, :func:`fence_for` — attached content in a prompt is
  not the user's typing (MEMORY_SPEC §13.8, ``clio_acp/advisory.py``);
- :func:`write_atomic` — the one atomic write (the LSP memory document);
- :mod:`commands` — the protocol-neutral verbs both faces call
  (``session/commands.py``), with :class:`CommandError` and :class:`UsageTotals`;
- :class:`PermissionDecision`, :class:`PermissionRequest`, :data:`PERMISSION_MODES` —
  what a face's permission handler receives and answers;
- :func:`attach_mcp_servers`, :class:`McpServerSpec`, :class:`McpAttachment` — the
  client's MCP servers for a session (``session/mcp_servers.py``);
- :class:`LocalToolHost`, :class:`CommandResult`, :data:`OutputCallback` — for a face
  that hosts tools on the client (ACP ``fs/*``, ``terminal/*``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Session": "clio_acp.session.manager",
    "SessionManager": "clio_acp.session.manager",
    "SessionInfo": "clio_acp.session.manager",
    "SessionNotFound": "clio_acp.session.manager",
    "SessionBusy": "clio_acp.session.manager",
    "JournalUnavailable": "clio_acp.session.journal",
    "McpAttachment": "clio_acp.session.mcp_servers",
    "McpServerSpec": "clio_acp.session.mcp_servers",
    "attach_mcp_servers": "clio_acp.session.mcp_servers",
    "CommandError": "clio_acp.session.commands",
    "UsageTotals": "clio_acp.session.commands",
    "PermissionDecision": "clio_acp.agent.permissions",
    "PermissionRequest": "clio_acp.agent.permissions",
    "PERMISSION_MODES": "clio_acp.agent.permissions",
    "LocalToolHost": "clio_acp.agent.tools",
    "CommandResult": "clio_acp.agent.tools",
    "OutputCallback": "clio_acp.agent.tools",
    "SessionEvent": "clio_acp.events",
    "MessageChunk": "clio_acp.events",
    "ThoughtChunk": "clio_acp.events",
    "UserMessage": "clio_acp.events",
    "ToolCallStarted": "clio_acp.events",
    "ToolCallUpdated": "clio_acp.events",
    "ToolCallFinished": "clio_acp.events",
    "Plan": "clio_acp.events",
    "PlanEntry": "clio_acp.events",
    "MemoryReminder": "clio_acp.events",
    "MemoryProposal": "clio_acp.events",
    "MemoryCleared": "clio_acp.events",
    "HandoffOffer": "clio_acp.events",
    "UsageUpdate": "clio_acp.events",
    "Notice": "clio_acp.events",
    "TurnEnded": "clio_acp.events",
    "neutralize_untrusted": "clio_acp.advisory",
    "fence_for": "clio_acp.advisory",
    "write_atomic": "clio_acp.atomic",
}
_MODULES = {"events": "clio_acp.events", "commands": "clio_acp.session.commands"}

__all__ = [
    "PERMISSION_MODES",
    "CommandError",
    "CommandResult",
    "HandoffOffer",
    "JournalUnavailable",
    "LocalToolHost",
    "McpAttachment",
    "McpServerSpec",
    "MemoryCleared",
    "MemoryProposal",
    "MemoryReminder",
    "MessageChunk",
    "Notice",
    "OutputCallback",
    "PermissionDecision",
    "PermissionRequest",
    "Plan",
    "PlanEntry",
    "Session",
    "SessionBusy",
    "SessionEvent",
    "SessionInfo",
    "SessionManager",
    "SessionNotFound",
    "ThoughtChunk",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolCallUpdated",
    "TurnEnded",
    "UsageTotals",
    "UsageUpdate",
    "UserMessage",
    "attach_mcp_servers",
    "commands",
    "events",
    "fence_for",
    "neutralize_untrusted",
    "write_atomic",
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from clio_acp import events
    from clio_acp.advisory import fence_for, neutralize_untrusted
    from clio_acp.agent.permissions import (
        PERMISSION_MODES,
        PermissionDecision,
        PermissionRequest,
    )
    from clio_acp.agent.tools import CommandResult, LocalToolHost, OutputCallback
    from clio_acp.atomic import write_atomic
    from clio_acp.events import (
        HandoffOffer,
        MemoryCleared,
        MemoryProposal,
        MemoryReminder,
        MessageChunk,
        Notice,
        Plan,
        PlanEntry,
        SessionEvent,
        ThoughtChunk,
        ToolCallFinished,
        ToolCallStarted,
        ToolCallUpdated,
        TurnEnded,
        UsageUpdate,
        UserMessage,
    )
    from clio_acp.session import commands
    from clio_acp.session.commands import CommandError, UsageTotals
    from clio_acp.session.journal import JournalUnavailable
    from clio_acp.session.manager import (
        Session,
        SessionBusy,
        SessionInfo,
        SessionManager,
        SessionNotFound,
    )
    from clio_acp.session.mcp_servers import McpAttachment, McpServerSpec, attach_mcp_servers
