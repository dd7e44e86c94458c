"""Canonical repository identity for repo-scoped memory (MEMORY_SPEC §6).

Owns the one function that turns a working directory into the key a repo-scoped
record is matched against: an absolute path with no NUL/CR/LF, resolved through
realpath (for a missing path: the realpath of the deepest existing parent plus the
remaining tail), with a linked git worktree mapped to its main checkout (read from
the worktree's ``.git`` file ``gitdir:`` and that folder's ``commondir``) so lessons
carry across lanes — only when the link holds both ways (the admin folder's
``gitdir`` file points back to this worktree). It reads a few small files and never runs git; it does not check
that the folder is a repository. Blocking (filesystem); callers on an event loop use
``asyncio.to_thread``.
"""

from __future__ import annotations

import os

__all__ = ["canonical_repository_identity", "is_canonical_repository_key"]

_FORBIDDEN = ("\x00", "\r", "\n")
_GITFILE_MAX_BYTES = 4096


def _realpath_with_tail(path: str) -> str:
    """realpath of the deepest existing ancestor of ``path``, plus the missing tail."""
    path = os.path.normpath(path)
    tail: list[str] = []
    current = path
    while not os.path.lexists(current):
        parent, name = os.path.split(current)
        if parent == current:  # reached the root without finding anything
            break
        tail.append(name)
        current = parent
    resolved = os.path.realpath(current)
    for name in reversed(tail):
        resolved = os.path.join(resolved, name)
    return os.path.normpath(resolved)


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(_GITFILE_MAX_BYTES)
    except (OSError, UnicodeDecodeError):
        return None


def _main_checkout_of_worktree(worktree_root: str) -> str | None:
    """The main checkout of the linked worktree rooted at ``worktree_root``, or None
    when ``.git`` there is not a linked-worktree pointer (a directory, a submodule's
    gitfile without ``commondir``, a bare common dir)."""
    text = _read_small(os.path.join(worktree_root, ".git"))
    if text is None:
        return None
    first = text.splitlines()[0].strip() if text.strip() else ""
    if not first.startswith("gitdir:"):
        return None
    gitdir = first[len("gitdir:") :].strip()
    if not gitdir:
        return None
    gitdir = os.path.realpath(os.path.join(worktree_root, gitdir))
    commondir_text = _read_small(os.path.join(gitdir, "commondir"))
    if commondir_text is None or not commondir_text.strip():
        return None
    common = os.path.realpath(os.path.join(gitdir, commondir_text.strip().splitlines()[0]))
    if os.path.basename(common) != ".git":
        return None  # bare repository: there is no main checkout to map to
    if not _points_back(gitdir, common, worktree_root):
        return None  # a .git file claiming another repository's worktree: not mapped
    return os.path.dirname(common)


def _points_back(gitdir: str, common: str, worktree_root: str) -> bool:
    """Verify the link the other way, as git does: the worktree's admin folder lies in
    ``<common>/worktrees/`` and its ``gitdir`` file names this worktree's ``.git``.
    Without this, any folder could write ``gitdir: <other repo>/.git/worktrees/x``
    and inherit that repository's records."""
    if os.path.dirname(gitdir) != os.path.join(common, "worktrees"):
        return False
    back = _read_small(os.path.join(gitdir, "gitdir"))
    if back is None or not back.strip():
        return False
    target = back.strip().splitlines()[0].strip()
    target = os.path.realpath(os.path.join(gitdir, target))
    return target == os.path.realpath(os.path.join(worktree_root, ".git"))


def _map_linked_worktree(path: str) -> str:
    """If ``path`` lies in a linked worktree, the same relative place in its main checkout."""
    current = path
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            return path  # an ordinary checkout (or the main checkout itself)
        if os.path.isfile(dot_git):
            main = _main_checkout_of_worktree(current)
            if main is None:
                return path
            relative = os.path.relpath(path, current)
            return os.path.normpath(main if relative == "." else os.path.join(main, relative))
        parent = os.path.dirname(current)
        if parent == current:
            return path
        current = parent


def canonical_repository_identity(path: str | os.PathLike[str] | None) -> str | None:
    """The canonical repository key of ``path``, or None when it has none.

    None for: a non-string, an empty or relative path, or one containing NUL, CR or LF.
    Otherwise an absolute, normalized real path (§6), with linked git worktrees mapped
    to the main checkout. Never raises for an unreadable tree (it keeps what it could
    resolve).
    """
    if path is None:
        return None
    raw = os.fspath(path)
    if not isinstance(raw, str) or not raw or any(ch in raw for ch in _FORBIDDEN):
        return None
    if not os.path.isabs(raw):
        return None
    try:
        resolved = _realpath_with_tail(raw)
        return _map_linked_worktree(resolved)
    except (OSError, ValueError):
        return None


def is_canonical_repository_key(key: str | None) -> bool:
    """True when ``key`` is already canonical (its own identity), as repo scope needs."""
    return key is not None and canonical_repository_identity(key) == key
