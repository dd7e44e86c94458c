"""Failure locations in tool output: which workspace file and line a failure names.

Owns the one reading of a failed command's output for the places it points at, so a
reminder about that failure can be shown on the user's code (issue 16). Recognised:

- Python tracebacks (``File "src/app.py", line 3, in f``): the innermost frame that
  is a workspace file comes first, then the outer ones;
- ``path:line:`` and ``path:line:col:`` (gcc/clang, mypy, ruff, flake8, eslint
  ``unix``, go vet, pytest's ``tests/test_x.py:12: AssertionError``), and
  ``path(line,col):`` (tsc, MSVC);
- pytest node ids (``tests/test_x.py::test_name``): the file only.

Pure except for ``exists`` (default ``Path.is_file``): nothing is written, nothing
run. A location is kept only when it resolves to a file inside ``workspace_root``
(relative paths against ``cwd``, else the root); system and site-packages frames are
dropped. Lines and columns are returned 0-based; a column counts characters as the
tool printed it (tools differ; the face turns it into its protocol's unit).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FailureLocation", "failure_locations"]

MAX_LOCATIONS = 8
"""At most this many locations per output (the first ones matter)."""
MAX_CANDIDATES = 200
"""At most this many path-like matches are checked against the workspace (each is a
path resolution and a stat)."""
MAX_SCAN_CHARS = 200_000
"""Only the last this-many characters of an output are read (tracebacks end it)."""

_TRACEBACK_FRAME = re.compile(r'^\s*File "(?P<path>[^"\n]+)", line (?P<line>\d+)', re.MULTILINE)
_PATH_CHARS = r"[^\s:\"'<>|()\[\]]+"
_COLON_FORM = re.compile(
    rf"(?:^|[\s\"'(\[])(?P<path>(?:[A-Za-z]:[\\/])?{_PATH_CHARS}\.[^\s:\"'<>|()\[\]/\\]+)"
    r":(?P<line>\d+)(?::(?P<col>\d+))?(?=[:\s,]|$)",
    re.MULTILINE,
)
_PAREN_FORM = re.compile(
    rf"(?:^|\s)(?P<path>{_PATH_CHARS}\.[A-Za-z0-9]+)\((?P<line>\d+)(?:,(?P<col>\d+))?\)\s*:",
    re.MULTILINE,
)
_NODE_ID = re.compile(rf"(?:^|\s)(?P<path>{_PATH_CHARS}\.py)::[\w\[\]-]", re.MULTILINE)


@dataclass(frozen=True)
class FailureLocation:
    """One place a failure names: an absolute workspace file, 0-based line and column
    (None when the output gave none)."""

    path: str
    line: int | None = None
    column: int | None = None


def _resolve(raw: str, root: Path, cwd: Path | None) -> Path | None:
    path = Path(raw.strip())
    if not path.is_absolute():
        path = (cwd or root) / path
    resolved = Path(os.path.normpath(path))
    try:
        resolved.relative_to(root)
    except ValueError:
        return None
    return resolved


def _zero_based(value: str | None) -> int | None:
    if value is None:
        return None
    number = int(value)
    return number - 1 if number > 0 else 0


def _candidates(text: str) -> list[tuple[str, str | None, str | None]]:
    """``(path, line, column)`` strings in the order they matter: traceback frames
    innermost first, then colon/paren forms and node ids in output order."""
    found: list[tuple[str, str | None, str | None]] = []
    frames = [(m["path"], m["line"], None) for m in _TRACEBACK_FRAME.finditer(text)]
    found.extend(reversed(frames))
    ordered: list[tuple[int, tuple[str, str | None, str | None]]] = []
    for pattern in (_COLON_FORM, _PAREN_FORM):
        for m in pattern.finditer(text):
            ordered.append((m.start("path"), (m["path"], m["line"], m["col"])))
    for m in _NODE_ID.finditer(text):
        ordered.append((m.start("path"), (m["path"], None, None)))
    found.extend(item for _, item in sorted(ordered, key=lambda pair: pair[0]))
    return found


def failure_locations(
    output: str,
    workspace_root: Path | None,
    *,
    cwd: Path | None = None,
    exists: Callable[[Path], bool] = Path.is_file,
) -> tuple[FailureLocation, ...]:
    """The workspace files and lines ``output`` names, most relevant first, one per
    file (its first location with a line), at most ``MAX_LOCATIONS``. Empty when there is no root
    or nothing names a workspace file. Never raises."""
    if workspace_root is None or not output:
        return ()
    root = Path(os.path.normpath(workspace_root))
    seen: dict[str, FailureLocation] = {}
    for raw_path, line, column in _candidates(output[-MAX_SCAN_CHARS:])[:MAX_CANDIDATES]:
        try:
            path = _resolve(raw_path, root, cwd)
            if path is None or not exists(path):
                continue
            known = seen.get(str(path))
            if known is not None and (known.line is not None or line is None):
                continue
        except (OSError, ValueError):
            continue
        seen[str(path)] = FailureLocation(str(path), _zero_based(line), _zero_based(column))
        if len(seen) >= MAX_LOCATIONS:
            break
    return tuple(seen.values())
