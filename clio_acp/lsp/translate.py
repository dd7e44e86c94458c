"""Pure translations from core session events to LSP shapes (ARCHITECTURE.md table).

Owns the wire shape of ``clio/sessionUpdate`` (the event, camelCase), the short status
line a running turn shows through ``$/progress``, reminder and proposal diagnostics
(``source: "clio-memory"``, the trigger as ``code``, cited entry ids and a proposal id
in ``data``), and the code actions that approve or reject a proposal. No I/O, no
server: every function here is testable with plain values. Diagnostics are matched by
``source``/``data``/message, never by range (Neovim 0.7 echoes byte columns).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

if TYPE_CHECKING:  # the event classes load pydantic: imported where used
    from clio_acp.session import MemoryProposal, MemoryReminder

MEMORY_SOURCE = "clio-memory"
"""``Diagnostic.source`` of every memory diagnostic (issue 8 item 2)."""

SESSION_UPDATE = "clio/sessionUpdate"
"""Server→client notification carrying one session event."""

SESSION_CHANGED = "clio/sessionChanged"
"""Client→server notification: the editor's session changed (clears the bank)."""

APPROVE_COMMAND = "clio.memory.approve"
REJECT_COMMAND = "clio.memory.reject"
SHOW_COMMAND = "clio.memory.show"
PROPOSALS_ACTION_KIND = "source.clio.memoryProposals"
"""Code action kind of the source action listing every pending proposal."""

_TITLE_CHARS = 60  # proposal text shown in a code action title, characters


def camel_keys(value: Any) -> Any:
    """``value`` with every dict key turned camelCase (the LSP wire convention)."""
    from pydantic.alias_generators import to_camel

    def convert(item: Any) -> Any:
        if isinstance(item, dict):
            return {to_camel(k): convert(v) for k, v in item.items()}
        if isinstance(item, list):
            return [convert(v) for v in item]
        return item

    return convert(value)


def session_update(event: Any, *, replay: bool = False) -> dict[str, Any]:
    """The ``clio/sessionUpdate`` params for one event: its fields in camelCase (with
    ``type`` and ``sessionId``), plus ``replay: true`` for history sent after a load."""
    params = camel_keys(event.model_dump(mode="json"))
    if replay:
        params["replay"] = True
    return params


def progress_message(event: Any) -> str | None:
    """A short status line for ``$/progress`` reports, or None when ``event`` changes
    nothing the user needs to see."""
    from clio_acp.session import (
        MemoryReminder,
        MessageChunk,
        Notice,
        ThoughtChunk,
        ToolCallFinished,
        ToolCallStarted,
        TurnEnded,
    )

    if isinstance(event, ThoughtChunk):
        return "thinking…"
    if isinstance(event, MessageChunk):
        return "answering…"
    if isinstance(event, ToolCallStarted):
        return _clip(event.title or event.tool_name, 80)
    if isinstance(event, ToolCallFinished):
        return "tool failed" if event.status == "failed" else "tool finished"
    if isinstance(event, MemoryReminder):
        return "memory reminder"
    if isinstance(event, Notice):
        return _clip(event.text, 80)
    if isinstance(event, TurnEnded):
        return event.stop_reason
    return None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _severity(name: str) -> types.DiagnosticSeverity:
    if name == "hint":
        return types.DiagnosticSeverity.Hint
    return types.DiagnosticSeverity.Information


def reminder_files(reminder: MemoryReminder, workspace: Path) -> list[tuple[Path, int]]:
    """``(file, 0-based line)`` for each file of ``workspace`` a reminder names (its
    failure's line, else line 0), in the reminder's order; empty when it names none
    (the reminder is then shown on the memory document)."""
    lines = list(reminder.lines) or [reminder.line]
    targets: dict[Path, int] = {}
    for index, raw in enumerate(reminder.paths):
        path = Path(raw)
        if not path.is_absolute() or path in targets or not _inside(path, workspace):
            continue
        line = lines[index] if index < len(lines) else None
        targets[path] = max(0, line) if isinstance(line, int) else 0
    return list(targets.items())


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def line_range(text: str | None, line: int, units: Callable[[str], int]) -> types.Range:
    """The range of line ``line`` whose text is ``text``: from its first non-blank
    character to its end, counted with ``units`` (the negotiated position encoding:
    UTF-16 or UTF-8 code units); zero-width at column 0 when the text is unknown."""
    if not text or not text.strip():
        position = types.Position(line=line, character=0)
        return types.Range(start=position, end=position)
    indent = text[: len(text) - len(text.lstrip())]
    return types.Range(
        start=types.Position(line=line, character=units(indent)),
        end=types.Position(line=line, character=units(text.rstrip())),
    )


def reminder_diagnostic(
    reminder: MemoryReminder,
    line: int,
    *,
    severity: str,
    proposal_id: str | None,
    range_: types.Range | None = None,
) -> types.Diagnostic:
    """The diagnostic of one reminder at ``line`` (``range_``, else zero-width at
    column 0)."""
    position = types.Position(line=line, character=0)
    data: dict[str, Any] = {
        "kind": "reminder",
        "sessionId": reminder.session_id,
        "citedEntries": list(reminder.cited_entries),
        "channel": reminder.channel,
    }
    if proposal_id:
        data["proposalId"] = proposal_id
    return types.Diagnostic(
        range=range_ or types.Range(start=position, end=position),
        message=reminder.text,
        severity=_severity(severity),
        source=MEMORY_SOURCE,
        code=reminder.trigger or reminder.channel,
        data=data,
    )


def proposal_diagnostic(proposal: MemoryProposal, line: int, *, severity: str) -> types.Diagnostic:
    """The diagnostic of a pending proposal, shown on the memory document."""
    position = types.Position(line=line, character=0)
    return types.Diagnostic(
        range=types.Range(start=position, end=position),
        message=f"Memory proposal ({proposal.scope}): {proposal.content}",
        severity=_severity(severity),
        source=MEMORY_SOURCE,
        code="proposal",
        data={
            "kind": "proposal",
            "sessionId": proposal.session_id,
            "proposalId": proposal.record_id,
            "citedEntries": [proposal.entry_id] if proposal.entry_id else [],
        },
    )


def diagnostic_proposal_id(diagnostic: types.Diagnostic) -> str | None:
    """The proposal id a memory diagnostic carries in ``data``, if any."""
    if diagnostic.source != MEMORY_SOURCE or not isinstance(diagnostic.data, dict):
        return None
    value = diagnostic.data.get("proposalId")
    return value if isinstance(value, str) and value else None


def same_diagnostic(a: types.Diagnostic, b: types.Diagnostic) -> bool:
    """Whether two diagnostics are the same memory diagnostic, by source, code and
    message (an echoed range is never compared)."""
    return a.source == b.source and a.code == b.code and a.message == b.message


def proposal_quick_fixes(
    proposal: MemoryProposal, diagnostic: types.Diagnostic | None
) -> list[types.CodeAction]:
    """ "Approve memory: …" and "Reject memory: …" quick fixes for one proposal."""
    text = _clip(proposal.content, _TITLE_CHARS)
    actions = []
    for verb, command in (("Approve", APPROVE_COMMAND), ("Reject", REJECT_COMMAND)):
        actions.append(
            types.CodeAction(
                title=f"{verb} memory: {text}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic] if diagnostic is not None else None,
                is_preferred=verb == "Approve" or None,
                command=types.Command(
                    title=f"{verb} memory", command=command, arguments=[proposal.record_id]
                ),
            )
        )
    return actions


def proposals_source_action(proposals: list[MemoryProposal]) -> types.CodeAction:
    """The source action listing every pending proposal (runs ``clio.memory.show``)."""
    listing = "; ".join(_clip(p.content, 40) for p in proposals)
    return types.CodeAction(
        title=f"Memory proposals ({len(proposals)} pending): {listing}",
        kind=PROPOSALS_ACTION_KIND,
        command=types.Command(
            title="Show memory proposals",
            command=SHOW_COMMAND,
            arguments=[{"proposals": [p.record_id for p in proposals]}],
        ),
    )
