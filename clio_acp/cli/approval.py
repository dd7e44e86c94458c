"""What ``clio-acp run`` shows before asking to approve a tool call (issue 20 item 7).

Owns the terminal preview of a permission request: the command to run, or the diff
of the edit (``edit_file``: old → new text; ``write_file``: the file as it is → the
new content, or the new content when the file is new), at most ``PREVIEW_LINES``
lines. It reads the file only inside the workspace and never writes.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

PREVIEW_LINES = 60


def _diff(path: str, old: str, new: str) -> list[str]:
    return list(
        difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
        )
    )


def _current(workspace: Path, path: str) -> str:
    target = (workspace / path).resolve()
    if not target.is_relative_to(workspace.resolve()) or not target.is_file():
        return ""
    try:
        return target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def approval_preview(tool_name: str, arguments: dict[str, Any], workspace: Path) -> str:
    """The lines to show above "Allow …?": ``$ command`` or a unified diff; ``""``
    when the call has nothing to preview."""
    path = str(arguments.get("path") or "")
    if isinstance(arguments.get("command"), str):
        lines = [f"$ {line}" for line in arguments["command"].splitlines()] or ["$"]
    elif tool_name == "edit_file":
        lines = _diff(
            path, str(arguments.get("old_text") or ""), str(arguments.get("new_text") or "")
        )
    elif tool_name == "write_file":
        lines = _diff(path, _current(workspace, path), str(arguments.get("content") or ""))
    else:
        return ""
    if len(lines) > PREVIEW_LINES:
        lines = [*lines[:PREVIEW_LINES], f"… {len(lines) - PREVIEW_LINES} more line(s)"]
    return "\n".join(lines)
