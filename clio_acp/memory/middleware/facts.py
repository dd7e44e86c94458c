"""What the rules tier knows about one tool call from the call alone (MEMORY_SPEC §4
tool observation, §12.1, §13.1, §13.5, §13.7).

``CallFacts`` holds the canonical call string and its operation fingerprint, and
works out the rest only when a rule asks for it: whether the call changes the
workspace, the command as a user would type it, the shell text, the call
description, the paths it names, whether it only reverts, the files it writes. A
successful read never pays for the description or the written files; a failure asks
for what its reminder needs.

``call_facts`` returns the facts of a call, shared by every later call with the
same tool name, canonical arguments, kind and workspace root (a session reruns its
tests and rereads its files): a bounded LRU of ``FACTS_CACHE_ENTRIES`` entries, calls
whose canonical text is over ``FACTS_CACHE_MAX_CHARS`` are not kept. For arguments
as tools receive them (JSON values) every fact is a pure function of the key
(``tests/memory/middleware/test_facts.py`` checks cached against fresh facts on the
shared recordings and generated commands), so sharing never changes a decision.
(Python-only values that canonicalise alike — a tuple and a list, a datetime and its
ISO text — share a key, as they did in the cache this replaced.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clio_acp.memory.calls import (
    UNREPRESENTABLE,
    call_description,
    canonical_call,
    changed_paths,
    flat_json_object,
    is_revert,
    is_state_changing,
    operation_fingerprint,
    shell_command_of,
    typed_command,
)

__all__ = ["FACTS_CACHE_ENTRIES", "CallFacts", "call_facts", "call_paths", "clear_facts_cache"]

# Bounded in entries and in size per entry (a kept call also keeps its arguments, so a
# long-lived server holds at most ~2048 × 2 × 4 KiB): commands and reads are short
# (median 45 chars on the shared runs); a long here-document script is rarely rerun.
FACTS_CACHE_ENTRIES = 2048
FACTS_CACHE_MAX_CHARS = 4096
_PATH_KEYS = ("path", "file_path", "paths")
_UNSET: Any = object()


def call_paths(args: Any, workspace_root: Path | None) -> tuple[str, ...]:
    """Absolute paths a tool call names in its ``path``/``file_path``/``paths``
    arguments (relative ones resolved against ``workspace_root``; dropped when there
    is none). Never raises; non-string values are ignored."""
    if not isinstance(args, Mapping):
        return ()
    found: list[str] = []
    for key in _PATH_KEYS:
        value = args.get(key)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not isinstance(item, str) or not item.strip() or "\0" in item:
                continue
            path = Path(item)
            if not path.is_absolute():
                if workspace_root is None:
                    continue
                path = workspace_root / path
            found.append(str(path))
    return tuple(dict.fromkeys(found))


class CallFacts:
    """The facts of one call (tool ``name`` stripped, ``args``, ACP ``kind``,
    workspace ``root``). ``canonical`` and ``fingerprint`` are set at once; every
    other attribute is computed on first read and kept. All values are immutable.

    The facts must not follow later changes of the caller's ``args``: a flat
    arguments dict (``calls.flat_json_object``, nearly every call) is copied, which
    freezes it; any other value has every fact computed at once instead. ``flat``:
    the caller's ``flat_json_object(args)``, when it has it."""

    __slots__ = (
        "_args",
        "_call",
        "_command",
        "_paths",
        "_revert",
        "_shell",
        "_state_changing",
        "_writes",
        "canonical",
        "fingerprint",
        "kind",
        "name",
        "root",
    )

    def __init__(
        self,
        name: str,
        canonical: str,
        args: Any,
        kind: str | None,
        root: Path | None,
        flat: bool | None = None,
    ) -> None:
        self.name, self.canonical, self.kind, self.root = name, canonical, kind, root
        self.fingerprint = operation_fingerprint(canonical)
        self._state_changing = self._command = self._shell = self._call = _UNSET
        self._paths = self._revert = self._writes = _UNSET
        if flat_json_object(args) if flat is None else flat:
            self._args = dict(args)
        else:
            self._args = args
            self._settle()

    def _settle(self) -> None:
        """Compute every fact now and let go of the arguments."""
        for name in ("state_changing", "command", "shell", "call", "paths", "revert", "writes"):
            getattr(self, name)
        self._args = None

    @property
    def state_changing(self) -> bool:
        """§12.1: the call changes the workspace (``calls.is_state_changing``)."""
        if self._state_changing is _UNSET:
            self._state_changing = is_state_changing(self.name, self._args, self.kind)
        return self._state_changing

    @property
    def command(self) -> str:
        """§13.7: the call as a user would type it (``calls.typed_command``)."""
        if self._command is _UNSET:
            self._command = typed_command(self.name, self._args)
        return self._command

    @property
    def shell(self) -> str | None:
        """The shell command line of a shell tool call, else None."""
        if self._shell is _UNSET:
            self._shell = shell_command_of(self.name, self._args)
        return self._shell

    @property
    def call(self) -> str:
        """§4 ``callDescription`` (collapsed canonical text, ≤180 chars)."""
        if self._call is _UNSET:
            self._call = call_description(self.canonical)
        return self._call

    @property
    def paths(self) -> tuple[str, ...]:
        """Absolute paths named by the call's path arguments (``call_paths``)."""
        if self._paths is _UNSET:
            self._paths = call_paths(self._args, self.root)
        return self._paths

    @property
    def revert(self) -> bool:
        """§13.1: a state change that only reverts (git checkout/restore/stash/reset)."""
        if self._revert is _UNSET:
            self._revert = self.state_changing and is_revert(self.name, self._args)
        return self._revert

    @property
    def writes(self) -> tuple[str, ...]:
        """§13.5: the files a state-changing call writes, as it names them."""
        if self._writes is _UNSET:
            changing = self.state_changing
            self._writes = changed_paths(self.name, self._args, self.kind) if changing else ()
        return self._writes


_CACHE: OrderedDict[tuple[str, str, str | None, Path | None], CallFacts] = OrderedDict()


def call_facts(name: str, args: Any, kind: str | None, root: Path | None) -> CallFacts:
    """The facts of a call to tool ``name`` (stripped, non-empty) with ``args``:
    the cached ones of an earlier call with the same canonical text, kind and root,
    or new ones (kept unless the arguments are unrepresentable, which would share
    one key, or their canonical text is over ``FACTS_CACHE_MAX_CHARS``)."""
    flat = flat_json_object(args)  # asked once for the canonical text and the copy
    canonical = canonical_call(name, args, flat)
    key = (name, canonical, kind, root)
    facts = _CACHE.get(key)
    if facts is not None:
        _CACHE.move_to_end(key)
        return facts
    facts = CallFacts(name, canonical, args, kind, root, flat)
    if len(canonical) <= FACTS_CACHE_MAX_CHARS and not canonical.endswith(UNREPRESENTABLE):
        _CACHE[key] = facts
        if len(_CACHE) > FACTS_CACHE_ENTRIES:
            _CACHE.popitem(last=False)
    return facts


def clear_facts_cache() -> None:
    """Forget every cached call (benchmarks measure first sightings this way)."""
    _CACHE.clear()
