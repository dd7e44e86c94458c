"""The memory document ``<workspace>/.clio-coder/memory.md``: a real file every editor
can open, kept current with the memory board.

Owns the document's Markdown layout and where each reminder and pending proposal sits
in it (so a diagnostic without a file of its own can point at a line), and writing it
atomically (temp file, fsync, rename; ARCHITECTURE.md invariant 8). It renders what it
is given (the session's ``board()``, recent reminders, pending proposals) and decides
no memory policy. Status is never rendered (MEMORY_SPEC §1: status is private).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clio_acp.session import MemoryProposal, MemoryReminder, write_atomic

DOC_DIR = ".clio-coder"
DOC_NAME = "memory.md"


def memory_doc_path(workspace: Path) -> Path:
    """``<workspace>/.clio-coder/memory.md`` (the folder name kept from the reference
    implementation, like ``.clio-coder/handoffs``)."""
    return workspace / DOC_DIR / DOC_NAME


@dataclass
class RenderedDocument:
    """The document text and the 0-based line of each reminder and proposal."""

    text: str
    reminder_lines: list[int] = field(default_factory=list)
    proposal_lines: dict[str, int] = field(default_factory=dict)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _entries(bank: Any, kind: str) -> list[dict[str, Any]]:
    if not isinstance(bank, dict):
        return []
    items = bank.get(kind)
    return [e for e in items if isinstance(e, dict)] if isinstance(items, list) else []


def render_memory_document(
    *,
    session_id: str | None,
    board: dict[str, Any] | None,
    reminders: list[MemoryReminder],
    proposals: list[MemoryProposal],
) -> RenderedDocument:
    """Render the document. ``board`` is ``Session.board()`` (tier, last decision, bank
    without status, activity, spend); unknown keys are listed compactly."""
    lines: list[str] = ["# clio memory", ""]
    out = RenderedDocument(text="")
    if session_id is None:
        lines += ["No live session. Run `clio.prompt` or `clio.session.new` to start one.", ""]
    else:
        lines += [f"Session: `{session_id}`", ""]
    board = dict(board or {})
    board.pop("status", None)
    bank = board.pop("bank", None)
    if isinstance(bank, dict):
        bank = {k: v for k, v in bank.items() if k != "status"}
    for key in ("tier", "enabled", "lastDecision", "last_decision"):
        if key in board:
            value = board.pop(key)
            label = "last decision" if key.startswith("last") else key
            shown = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
            lines.append(f"- {label}: {_one_line(shown)}")
    if len(lines) > 4:
        lines.append("")
    for kind, title in (("knowledge", "Knowledge"), ("procedural", "Procedural")):
        entries = _entries(bank, kind)
        lines += [f"## {title}", ""]
        if not entries:
            lines.append("(none)")
        for entry in entries:
            count = entry.get("injectionCount", entry.get("injection_count"))
            suffix = f" (cited {count}×)" if count else ""
            lines.append(
                f"- [{entry.get('id', '?')}] {_one_line(entry.get('content', ''))}{suffix}"
            )
        lines.append("")
    lines += ["## Pending proposals", ""]
    if not proposals:
        lines.append("(none)")
    for proposal in proposals:
        out.proposal_lines[proposal.record_id] = len(lines)
        lines.append(
            f"- [{proposal.record_id}] ({proposal.scope}) {_one_line(proposal.content)}"
            " — approve or reject with the quick fix on this line"
        )
    lines += ["", "## Recent reminders", ""]
    if not reminders:
        lines.append("(none)")
    for reminder in reminders:
        out.reminder_lines.append(len(lines))
        trigger = f" ({reminder.trigger})" if reminder.trigger else ""
        lines.append(f"- {_one_line(reminder.text)}{trigger}")
    lines.append("")
    for key, value in board.items():
        shown = json.dumps(value, sort_keys=True, default=str)
        lines.append(f"- {key}: {_one_line(shown)}")
    out.text = "\n".join(lines).rstrip("\n") + "\n"
    return out


def write_atomically(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` atomically (``clio_acp.atomic``) unless it holds it.

    Returns False when the file already holds exactly ``text`` (nothing written).
    Raises ``OSError`` when the folder cannot be created or written. Blocking: call it
    through ``asyncio.to_thread``.
    """
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return True
