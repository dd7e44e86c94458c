"""The memory document ``<workspace>/.clio-coder/memory.md``: a real file every editor
can open, kept current with the memory board.

Owns the document's Markdown layout and where each reminder and pending proposal sits
in it (so a diagnostic without a file of its own can point at a line), and writing it
atomically (temp file, fsync, rename; ARCHITECTURE.md invariant 8). It renders what it
is given (the session's ``board()``, recent reminders, pending proposals) and decides
no memory policy. Status is never rendered (MEMORY_SPEC §1: status is private).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clio_acp.paths import WORKSPACE_GITIGNORE
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
            lines += _bullets(key, board.pop(key), 0)
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
    if board:
        lines += ["## Details", ""]
        for key, value in board.items():
            lines += _bullets(key, value, 0)
    out.text = "\n".join(lines).rstrip("\n") + "\n"
    return out


MAX_DEPTH = 3
"""Nesting shown for the board's details; deeper values are summarised."""
MAX_ITEMS = 20
"""Items of one list or object shown; the rest are counted."""


def _label(key: Any) -> str:
    """``lastDecision`` / ``last_decision`` → ``last decision``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(key)).replace("_", " ")
    return text.lower()


def _scalar(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return _one_line(value)


def _bullets(key: Any, value: Any, depth: int) -> list[str]:
    """``value`` under ``key`` as Markdown bullets (nested objects and lists indented),
    never as JSON."""
    pad = "  " * depth
    head = f"{pad}- {_label(key)}" if key is not None else f"{pad}-"
    if isinstance(value, dict | list) and not value:
        return [f"{head}: none"]
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        shown = ", ".join(_scalar(v) for v in value[:MAX_ITEMS])
        more = f" (+{len(value) - MAX_ITEMS} more)" if len(value) > MAX_ITEMS else ""
        return [f"{head}: {shown}{more}"]
    if not isinstance(value, dict | list):
        return [f"{head}: {_scalar(value)}"]
    if depth >= MAX_DEPTH:
        return [f"{head}: {len(value)} items"]
    items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    lines = [f"{head}:" if key is not None else head]
    for child_key, child in items[:MAX_ITEMS]:
        lines += _bullets(child_key, child, depth + 1)
    if len(items) > MAX_ITEMS:
        lines.append(f"{pad}  - … {len(items) - MAX_ITEMS} more")
    return lines


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
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, WORKSPACE_GITIGNORE)
    write_atomic(path, text)
    return True
