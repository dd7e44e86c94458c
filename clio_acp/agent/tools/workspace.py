"""Workspace confinement: every path a tool touches is resolved against the session's
cwd and must lie inside one of its roots; a symlink leading out is refused."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class WorkspaceError(ValueError):
    """A path outside the session's workspace roots (or escaping them by symlink)."""


@dataclass(frozen=True)
class Workspace:
    """The session's cwd and extra roots (absolute, realpath-resolved)."""

    cwd: Path
    roots: tuple[Path, ...]

    @classmethod
    def create(cls, cwd: Path, extra_roots: Sequence[Path] = ()) -> Workspace:
        """Raises ``ValueError`` for a relative cwd or root."""
        if not Path(cwd).is_absolute():
            raise ValueError(f"workspace cwd must be absolute: {cwd}")
        real_cwd = Path(os.path.realpath(cwd))
        roots = [real_cwd]
        for root in extra_roots:
            if not Path(root).is_absolute():
                raise ValueError(f"workspace root must be absolute: {root}")
            real = Path(os.path.realpath(root))
            if real not in roots:
                roots.append(real)
        return cls(cwd=real_cwd, roots=tuple(roots))

    def contains(self, real: Path) -> bool:
        """True when the realpath ``real`` is one of the roots or lies below one."""
        return any(real == root or root in real.parents for root in self.roots)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The realpath of ``path`` (relative to cwd) if it lies inside a root.

        Raises :class:`WorkspaceError` when the path is outside every root, or when
        it is lexically inside but a symlink leads it out.
        """
        raw = str(path).strip() if path is not None else ""
        if not raw:
            raise WorkspaceError("empty path")
        if "\0" in raw:
            raise WorkspaceError("path contains a NUL character")
        candidate = Path(os.path.expanduser(raw))
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        lexical = Path(os.path.normpath(candidate))
        real = Path(os.path.realpath(lexical))
        if self.contains(real):
            return real
        if self.contains(lexical) or any(
            lexical == root or root in lexical.parents for root in self._lexical_roots()
        ):
            raise WorkspaceError(
                f"path {raw!r} resolves through a symlink to {real}, outside the workspace "
                f"({', '.join(map(str, self.roots))}); refused"
            )
        raise WorkspaceError(
            f"path {raw!r} is outside the workspace ({', '.join(map(str, self.roots))}); refused"
        )

    def _lexical_roots(self) -> list[Path]:
        return list(self.roots)

    def display(self, real: Path) -> str:
        """``real`` relative to the first root containing it (for titles)."""
        for root in self.roots:
            if real == root:
                return "."
            if root in real.parents:
                return str(real.relative_to(root))
        return str(real)
