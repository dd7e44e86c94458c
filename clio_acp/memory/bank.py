"""The session task bank (MEMORY_SPEC §1): in-memory entries of one live session.

Three classes: one private ``status`` entry, ``knowledge`` (cap 20) and
``procedural`` (cap 30). Ids come from one base36 counter shared by all classes.
The bank never leaves the process by itself: the session core saves snapshots in the
journal, the handoff module renders it, the policy step renders it for the memory
model. Status is private: ``render`` never includes it; only
``render_restored_state`` (the post-compaction restore) does.
This module makes no model calls and does no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any, Literal

from clio_acp.memory.redact import cut_keeping_markers, redact_preserving_markers
from clio_acp.timestamps import format_timestamp, is_canonical_timestamp, utc_now

EntryKind = Literal["status", "knowledge", "procedural"]
SavableKind = Literal["knowledge", "procedural"]
# MEMORY_SPEC §14.2: who wrote an entry. ``rules`` (the rules tier), ``model`` (an LLM
# memory step), ``seed`` (imported from a handoff), ``user`` (written by hand).
EntryOrigin = Literal["rules", "model", "seed", "user"]
ENTRY_ORIGINS: tuple[EntryOrigin, ...] = ("rules", "model", "seed", "user")
# Snapshots written before §14 carry no origin; every entry then was open to the model.
LEGACY_ORIGIN: EntryOrigin = "model"

# MEMORY_SPEC §1 constants.
DEFAULT_KNOWLEDGE_CAP = 20
DEFAULT_PROCEDURAL_CAP = 30
MAX_CONTENT_CHARS = 1200
SNAPSHOT_VERSION = 1

_ID_LETTER = {"status": "s", "knowledge": "k", "procedural": "p"}
_ID_PATTERN = re.compile(r"^tm-[skp]-([0-9a-z]+)$")
_WHITESPACE = re.compile(r"\s+")
# A lone UTF-16 surrogate (e.g. from a JSON "\ud800" escape) cannot be written as
# UTF-8 (stdout, journal, handoff, records.json): it becomes U+FFFD.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def estimate_tokens(text: str) -> int:
    """Token estimate used by every memory budget: ``ceil(chars / 4)``."""
    return math.ceil(len(text) / 4)


def collapse_whitespace(text: str) -> str:
    """Every whitespace run becomes one space; leading/trailing whitespace is trimmed.
    (``_WHITESPACE.sub(" ", text).strip()``, done by ``str.split``: the same
    characters, both use ``str.isspace``; several times faster.)"""
    return " ".join(text.split())


def well_formed_text(text: str) -> str:
    """``text`` with every lone surrogate code point replaced by U+FFFD, so that it
    can always be encoded as UTF-8. Paired surrogates never reach a ``str`` from
    ``json.loads`` (it combines them), so each surrogate left is a lone one."""
    if text.isascii():  # O(1): no surrogate in it, nothing to scan
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def normalize_content(text: str) -> str:
    """Bank content normalization (§1): redact secrets (§8, markers preserved),
    collapse whitespace, trim, cut to 1200 chars. Lone surrogates become U+FFFD
    (``well_formed_text``).

    Redaction happens here, when content is written (rules, model, seeding and
    journal restore alike), so every view of the bank — board, memory.md, journal,
    memory-model requests, handoff — is clean. The cut comes after redaction, so a
    marker longer than its secret cannot push content past the limit. Raises
    ``ValueError`` when nothing is left. The bank truncates; the envelope parser
    instead rejects content over 1200 chars before it gets here.
    """
    if not isinstance(text, str):
        raise ValueError("task memory content must be a string")
    known = _NORMALIZED.get(text)
    if known is not None:
        return known
    content = collapse_whitespace(redact_preserving_markers(well_formed_text(text)))
    if not content:
        raise ValueError("task memory content is empty")
    result = cut_keeping_markers(content, MAX_CONTENT_CHARS).rstrip()
    if len(_NORMALIZED) >= NORMALIZED_MEMO_ENTRIES:
        _NORMALIZED.clear()
    # Normalization is idempotent, so its result maps to itself: content normalized
    # by a caller and handed to the bank (the rules status) is not redacted twice.
    _NORMALIZED[text] = _NORMALIZED[result] = result
    return result


# Recent inputs and results of ``normalize_content`` (redaction is the costly part of
# a rules-tier write); a plain dict cleared when full, safe across threads.
NORMALIZED_MEMO_ENTRIES = 512
_NORMALIZED: dict[str, str] = {}


# Eviction takes the least recently touched entry (then the oldest, then the lowest id):
# the tuple a lambda would build, made by the C-level attrgetter.
_EVICTION_ORDER = attrgetter("last_touched_at", "created_at", "id")


def _base36(n: int) -> str:
    digits = ""
    while True:
        n, rem = divmod(n, 36)
        digits = _BASE36[rem] + digits
        if n == 0:
            return digits


def id_suffix(entry_id: str) -> int | None:
    """The counter value encoded in a ``tm-<s|k|p>-<base36>`` id, or None."""
    match = _ID_PATTERN.match(entry_id)
    return int(match.group(1), 36) if match else None


@dataclass
class TaskMemoryEntry:
    """One bank entry. Timestamps are canonical UTC ISO strings (``…sssZ``);
    ``origin`` says who wrote it last (§14.2)."""

    id: str
    kind: EntryKind
    content: str
    created_at: str
    last_touched_at: str
    injection_count: int = 0
    origin: EntryOrigin = "model"

    def copy(self) -> TaskMemoryEntry:
        """A copy (``dataclasses.replace(self)`` without its per-call field lookup:
        readers get copies of the bank's entries on every read)."""
        return type(self)(
            self.id,
            self.kind,
            self.content,
            self.created_at,
            self.last_touched_at,
            self.injection_count,
            self.origin,
        )

    def to_dict(self) -> dict[str, Any]:
        """The camelCase wire/snapshot shape of the reference implementation, plus
        ``origin`` (§14.2; readers that do not know it ignore it)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "content": self.content,
            "createdAt": self.created_at,
            "lastTouchedAt": self.last_touched_at,
            "injectionCount": self.injection_count,
            "origin": self.origin,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskMemoryEntry:
        """Inverse of ``to_dict``. Raises ``KeyError``/``ValueError`` on a bad shape."""
        kind = data["kind"]
        if kind not in _ID_LETTER:
            raise ValueError(f"unknown entry kind {kind!r}")
        count = data.get("injectionCount", 0)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError("injectionCount must be an integer >= 0")
        entry_id = data["id"]
        if not isinstance(entry_id, str) or not entry_id.strip():
            raise ValueError("entry id must be a non-blank string")
        origin = data.get("origin", LEGACY_ORIGIN)
        if origin not in ENTRY_ORIGINS:
            raise ValueError(f"unknown entry origin {origin!r} of {entry_id}")
        for field in ("createdAt", "lastTouchedAt"):
            # §1: canonical UTC ISO with milliseconds and Z; anything else would sort
            # wrongly for eviction and make a later handoff unparseable (§7).
            if not is_canonical_timestamp(data[field]):
                raise ValueError(f"{field} of {entry_id} is not a canonical UTC timestamp")
        return cls(
            id=entry_id,
            kind=kind,
            content=normalize_content(data["content"]),
            created_at=data["createdAt"],
            last_touched_at=data["lastTouchedAt"],
            injection_count=count,
            origin=origin,
        )


def check_origin(origin: object) -> EntryOrigin:
    """``origin`` if it is one of ``ENTRY_ORIGINS``; else ``ValueError``."""
    if origin not in ENTRY_ORIGINS:
        raise ValueError(f"unknown entry origin {origin!r}")
    return origin  # type: ignore[return-value]


def _positive_cap(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return default


class TaskMemoryBank:
    """The task bank of one live session (MEMORY_SPEC §1).

    ``clock`` returns the current time (default: UTC now); tests inject one.
    Caps that are not positive integers fall back to 20 (knowledge) / 30 (procedural).
    """

    def __init__(
        self,
        knowledge_cap: int = DEFAULT_KNOWLEDGE_CAP,
        procedural_cap: int = DEFAULT_PROCEDURAL_CAP,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.knowledge_cap = _positive_cap(knowledge_cap, DEFAULT_KNOWLEDGE_CAP)
        self.procedural_cap = _positive_cap(procedural_cap, DEFAULT_PROCEDURAL_CAP)
        self._clock = clock
        self._status: TaskMemoryEntry | None = None
        self._entries: dict[SavableKind, dict[str, TaskMemoryEntry]] = {
            "knowledge": {},
            "procedural": {},
        }
        self._counter = 1
        # ``delta_view``'s dicts, kept as the entries change. One handed out by
        # ``delta_view`` is shared (``_shared``): the next change copies it first.
        self._views: dict[str, dict[str, tuple[str, str]]] = {}
        self._shared: set[str] = set()
        self._reset_views()

    # -- reading ---------------------------------------------------------------

    @property
    def status(self) -> TaskMemoryEntry | None:
        """A copy of the private status entry (operator view and restore only)."""
        return self._status.copy() if self._status else None

    @property
    def knowledge(self) -> list[TaskMemoryEntry]:
        """Copies of the knowledge entries, oldest first (§2)."""
        return [e.copy() for e in self._entries["knowledge"].values()]

    @property
    def procedural(self) -> list[TaskMemoryEntry]:
        """Copies of the procedural entries, oldest first (§2)."""
        return [e.copy() for e in self._entries["procedural"].values()]

    def delta_view(self) -> dict[str, dict[str, tuple[str, str]]]:
        """``{"status" | "knowledge" | "procedural": {id: (content, createdAt)}}``
        (oldest first; status has at most one entry): what a bank delta compares
        (``telemetry.view_delta_counts``; taken once per telemetry row after a write).
        Kept up to date by every write instead of read from the entries: a class's
        dict is the same object as in the previous view while nothing in it changed.
        Read the dicts; never change them."""
        self._shared.update(self._views)
        return dict(self._views)

    def _reset_views(self) -> None:
        """Every class's view read from the entries (after a clear or restore)."""
        status = self._status
        self._views = {
            "status": {status.id: (status.content, status.created_at)} if status else {},
            **{
                kind: {e.id: (e.content, e.created_at) for e in entries.values()}
                for kind, entries in self._entries.items()
            },
        }
        self._shared.clear()

    def _view(self, kind: str) -> dict[str, tuple[str, str]]:
        """The view of ``kind`` to change (a copy when ``delta_view`` handed it out)."""
        view = self._views[kind]
        if kind in self._shared:
            view = self._views[kind] = dict(view)
            self._shared.discard(kind)
        return view

    @property
    def size(self) -> int:
        """Number of entries, status included."""
        return (
            len(self._entries["knowledge"])
            + len(self._entries["procedural"])
            + (1 if self._status else 0)
        )

    def get(self, entry_id: str) -> TaskMemoryEntry | None:
        """A copy of the entry with this id in any class, or None."""
        if self._status and self._status.id == entry_id:
            return self._status.copy()
        for entries in self._entries.values():
            if entry_id in entries:
                return entries[entry_id].copy()
        return None

    def origin_of(self, entry_id: str) -> EntryOrigin | None:
        """The origin of the entry with this id (any class), or None (§14.2)."""
        entry = self.get(entry_id)
        return entry.origin if entry else None

    def kind_of(self, entry_id: str) -> EntryKind | None:
        """The class holding ``entry_id``, or None."""
        if self._status and self._status.id == entry_id:
            return "status"
        for kind, entries in self._entries.items():
            if entry_id in entries:
                return kind
        return None

    def ids(self) -> set[str]:
        """Every id in the bank, status included."""
        ids = {i for entries in self._entries.values() for i in entries}
        if self._status:
            ids.add(self._status.id)
        return ids

    # -- writing ---------------------------------------------------------------

    def _now(self) -> str:
        if self._clock is None:  # UTC now
            return utc_now()
        return format_timestamp(self._clock())

    def _next_id(self, kind: EntryKind) -> str:
        entry_id = f"tm-{_ID_LETTER[kind]}-{_base36(self._counter)}"
        self._counter += 1
        return entry_id

    def update_status(self, content: str, *, origin: EntryOrigin = "model") -> TaskMemoryEntry:
        """Create the status entry or overwrite its content (id, createdAt and
        injectionCount kept; lastTouchedAt bumped; origin becomes ``origin``).
        Raises ``ValueError`` if empty or for an unknown origin. The bank does not
        police who may overwrite whom: the policy step does (§14.2)."""
        origin = check_origin(origin)
        text = normalize_content(content)
        now = self._now()
        if self._status is None:
            self._status = TaskMemoryEntry(
                self._next_id("status"), "status", text, now, now, origin=origin
            )
        else:
            self._status.content = text
            self._status.last_touched_at = now
            self._status.origin = origin
        self._views["status"] = {self._status.id: (text, self._status.created_at)}
        return self._status.copy()

    def save(
        self,
        kind: SavableKind,
        content: str,
        entry_id: str | None = None,
        *,
        origin: EntryOrigin = "model",
    ) -> TaskMemoryEntry:
        """Create (no id) or update (id of an entry *in this class*) an entry, then
        evict while the class is over its cap. The entry's origin becomes ``origin``.

        Raises ``KeyError`` ("… not found") for an id not in ``kind``, ``ValueError``
        for empty content, an unknown kind or an unknown origin.
        """
        if kind not in self._entries:
            raise ValueError(f"cannot save task memory of kind {kind!r}")
        origin = check_origin(origin)
        text = normalize_content(content)
        entries = self._entries[kind]
        now = self._now()
        if entry_id is not None:
            if entry_id not in entries:
                raise KeyError(f"task memory entry {entry_id} not found in {kind}")
            entry = entries[entry_id]
            entry.content = text
            entry.last_touched_at = now
            entry.origin = origin
        else:
            entry = TaskMemoryEntry(self._next_id(kind), kind, text, now, now, origin=origin)
            entries[entry.id] = entry
        self._view(kind)[entry.id] = (text, entry.created_at)
        result = entry.copy()
        self._evict(kind)
        return result

    def _evict(self, kind: SavableKind) -> None:
        entries = self._entries[kind]
        cap = self.knowledge_cap if kind == "knowledge" else self.procedural_cap
        while len(entries) > cap:
            victim = min(entries.values(), key=_EVICTION_ORDER)
            del entries[victim.id]
            del self._view(kind)[victim.id]

    def delete_entry(self, entry_id: str) -> bool:
        """Delete the entry with this id (status included). True if one was deleted."""
        if self._status and self._status.id == entry_id:
            self._status = None
            self._views["status"] = {}
            return True
        for kind, entries in self._entries.items():
            if entries.pop(entry_id, None) is not None:
                del self._view(kind)[entry_id]
                return True
        return False

    def record_injection(self, entry_ids: Iterable[str]) -> None:
        """Count a citation: each distinct knowledge/procedural id gets
        injectionCount+1 and lastTouchedAt=now. Status and unknown ids are ignored."""
        now = self._now()
        for entry_id in dict.fromkeys(entry_ids):
            for entries in self._entries.values():
                entry = entries.get(entry_id)
                if entry is not None:
                    entry.injection_count += 1
                    entry.last_touched_at = now

    def clear(self) -> None:
        """Empty the bank and reset the id counter to 1 (ids repeat across sessions)."""
        self._status = None
        for entries in self._entries.values():
            entries.clear()
        self._counter = 1
        self._reset_views()

    # -- rendering -------------------------------------------------------------

    def _render_order(self, kinds: Iterable[str]) -> list[TaskMemoryEntry]:
        chosen = [
            e for k in ("knowledge", "procedural") if k in kinds for e in self._entries[k].values()
        ]
        # id asc first (stable), then knowledge-before-procedural, then lastTouchedAt desc.
        chosen.sort(key=lambda e: e.id)
        chosen.sort(key=lambda e: 0 if e.kind == "knowledge" else 1)
        chosen.sort(key=lambda e: e.last_touched_at, reverse=True)
        return chosen

    def render(
        self, budget_tokens: float, kinds: Iterable[str] = ("knowledge", "procedural")
    ) -> str:
        """Render entries as ``- [<id>] <kind>: <content>`` lines joined by ``\\n``.

        Walks the render order (lastTouchedAt desc; knowledge before procedural on a
        tie; id asc) and skips any entry that would push ``ceil(len(block)/4)`` of the
        cumulative block over ``budget_tokens``. A budget ≤ 0 or non-finite gives
        ``""``. Status is never rendered, even when asked for.
        """
        if not _usable_budget(budget_tokens):
            return ""
        kinds = set(kinds)
        lines: list[str] = []
        length = 0
        for entry in self._render_order(kinds):
            line = f"- [{entry.id}] {entry.kind}: {entry.content}"
            new_length = length + len(line) + (1 if lines else 0)
            if math.ceil(new_length / 4) > budget_tokens:
                continue
            lines.append(line)
            length = new_length
        return "\n".join(lines)

    def render_restored_state(self, budget_tokens: float) -> str:
        """The post-compaction restore (§1): the status line, then knowledge within
        ``budget − ceil(len(status line)/4)``. If the status line alone exceeds the
        budget (or there is no status), knowledge only with the full budget.
        Procedural entries are never included. The only render that shows status."""
        if not _usable_budget(budget_tokens):
            return ""
        if self._status is None:
            return self.render(budget_tokens, ("knowledge",))
        status_line = f"- [{self._status.id}] status: {self._status.content}"
        status_cost = estimate_tokens(status_line)
        if status_cost > budget_tokens:
            return self.render(budget_tokens, ("knowledge",))
        knowledge = self.render(budget_tokens - status_cost, ("knowledge",))
        return status_line + ("\n" + knowledge if knowledge else "")

    # -- snapshots -------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """``{version:1, status|None, knowledge[], procedural[]}`` of copies (entries
        carry ``origin``, §14.2), each class in createdAt asc then id order. Every
        dict and list is new and every value in them immutable (str, int), so nothing
        in a snapshot is shared with the bank or another snapshot."""

        def ordered(kind: SavableKind) -> list[dict[str, Any]]:
            entries = sorted(self._entries[kind].values(), key=lambda e: (e.created_at, e.id))
            return [e.to_dict() for e in entries]

        return {
            "version": SNAPSHOT_VERSION,
            "status": self._status.to_dict() if self._status else None,
            "knowledge": ordered("knowledge"),
            "procedural": ordered("procedural"),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Replace the bank with a snapshot's entries, keeping their ids; the counter
        becomes max id suffix + 1 (§12.7). Raises ``ValueError`` for a malformed
        snapshot, leaving the bank unchanged."""
        try:
            version = snapshot.get("version")
            if isinstance(version, bool) or version != SNAPSHOT_VERSION:
                raise ValueError("unsupported bank snapshot version")
            status = snapshot.get("status")
            status_entry = TaskMemoryEntry.from_dict(status) if status else None
            loaded: dict[SavableKind, dict[str, TaskMemoryEntry]] = {
                "knowledge": {},
                "procedural": {},
            }
            for kind in ("knowledge", "procedural"):
                for raw in snapshot.get(kind) or []:
                    entry = TaskMemoryEntry.from_dict(raw)
                    if entry.kind != kind:
                        raise ValueError(
                            f"entry {entry.id} of kind {entry.kind} listed under {kind}"
                        )
                    loaded[kind][entry.id] = entry
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed bank snapshot: {exc}") from exc
        if status_entry and status_entry.kind != "status":
            raise ValueError("status entry has the wrong kind")
        all_entries = [*loaded["knowledge"].values(), *loaded["procedural"].values()]
        if status_entry:
            all_entries.append(status_entry)
        listed = (1 if status_entry else 0) + sum(
            len(snapshot.get(kind) or []) for kind in ("knowledge", "procedural")
        )
        if len({e.id for e in all_entries}) != listed:
            raise ValueError("bank snapshot repeats an entry id")
        suffixes = [s for s in (id_suffix(e.id) for e in all_entries) if s is not None]
        self._status = status_entry
        self._entries = loaded
        self._reset_views()
        self._counter = max(suffixes, default=0) + 1

    def entries(self) -> list[TaskMemoryEntry]:
        """Copies of every knowledge and procedural entry (status excluded)."""
        return self.knowledge + self.procedural


def _usable_budget(budget: float) -> bool:
    try:
        return math.isfinite(budget) and budget > 0
    except TypeError:
        return False


__all__ = [
    "DEFAULT_KNOWLEDGE_CAP",
    "DEFAULT_PROCEDURAL_CAP",
    "ENTRY_ORIGINS",
    "MAX_CONTENT_CHARS",
    "EntryKind",
    "EntryOrigin",
    "TaskMemoryBank",
    "TaskMemoryEntry",
    "check_origin",
    "collapse_whitespace",
    "estimate_tokens",
    "id_suffix",
    "normalize_content",
    "well_formed_text",
]
