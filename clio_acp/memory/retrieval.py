"""Which approved records reach a prompt, in what order, and how they read (MEMORY_SPEC §6).

Owns eligibility (approved, evidence, no regressions, allowed scope, exact canonical
identity for repo/runtime/agent), the priority order, the opt-in ``lexical-v1``
relevance ranking, and the ``# Memory`` prompt section (≤ 5 items within 400
estimated tokens) with per-candidate selection diagnostics. Pure functions over
``MemoryRecord`` lists: it must not read files (callers load the store) and must
never let a proposed, rejected or foreign-repository record through
(ARCHITECTURE invariants 3 and 4).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from clio_acp.memory.identity import is_canonical_repository_key
from clio_acp.memory.records import MemoryRecord

__all__ = [
    "MEMORY_PROMPT_DEFAULT_SCOPES",
    "MEMORY_PROMPT_MAX_ITEMS",
    "MEMORY_PROMPT_TOKEN_BUDGET",
    "MEMORY_RELEVANCE_VERSION",
    "ActiveIdentity",
    "PromptDecision",
    "PromptSection",
    "RankedRecord",
    "RelevanceInput",
    "build_prompt_section",
    "eligible_records",
    "is_eligible",
    "rank_by_relevance",
    "render_prompt_section",
]

MEMORY_PROMPT_MAX_ITEMS = 5  # MEMORY_SPEC §6: at most 5 items
MEMORY_PROMPT_TOKEN_BUDGET = 400  # §6: within 400 estimated tokens
MEMORY_PROMPT_DEFAULT_SCOPES: tuple[str, ...] = ("global", "repo")  # §6 default allowed set
MEMORY_RELEVANCE_VERSION = "lexical-v1"  # §6
# §6 lexical-v1 weights.
WEIGHT_TASK_TERM = 1
WEIGHT_PATH = 8
WEIGHT_SYMBOL = 4
# §6 lexical-v1 caps on the query features.
MAX_TASK_TERMS = 64
MAX_PATHS = 32
MAX_SYMBOLS = 32
# §6 lexical-v1 stop list.
STOP_WORDS = frozenset(
    {"and", "are", "for", "from", "into", "the", "this", "that", "with", "use", "when"}
)

_CAVEAT = (
    "Approved long-term memory records that may apply. Each lesson is gated by human "
    "approval and cited evidence; do not extrapolate beyond the cited findings."
)


@dataclass(frozen=True)
class ActiveIdentity:
    """The identities of the running session. ``repository`` must already be the
    canonical key (``canonical_repository_identity(cwd)``); None excludes that scope."""

    repository: str | None = None
    runtime: str | None = None
    agent: str | None = None


def _canonical_active_repository(active: ActiveIdentity) -> str | None:
    # §6: "If the active key is not already canonical, no repo record applies."
    if active.repository is None or not is_canonical_repository_key(active.repository):
        return None
    return active.repository


def _eligible(
    record: MemoryRecord, repository: str | None, active: ActiveIdentity, scopes: frozenset[str]
) -> bool:
    if not record.approved or not record.evidence_refs or record.regressions:
        return False
    if record.scope not in scopes:
        return False
    if record.scope == "repo":
        return (
            record.repository is not None
            and repository is not None
            and record.repository.key == repository
        )
    if record.scope == "runtime":
        return record.runtime is not None and record.runtime.key == active.runtime
    if record.scope == "agent":
        return record.agent is not None and record.agent.key == active.agent
    return True


def is_eligible(
    record: MemoryRecord,
    active: ActiveIdentity,
    scopes: Iterable[str] = MEMORY_PROMPT_DEFAULT_SCOPES,
) -> bool:
    """§6 eligibility: approved, ≥1 evidence ref, no regressions, scope allowed, and for
    repo/runtime/agent an exact match with the active identity (appliesWhen never
    counts; a non-canonical active repository key matches nothing)."""
    return _eligible(record, _canonical_active_repository(active), active, frozenset(scopes))


def eligible_records(
    records: Iterable[MemoryRecord],
    active: ActiveIdentity,
    scopes: Iterable[str] = MEMORY_PROMPT_DEFAULT_SCOPES,
) -> list[MemoryRecord]:
    """Eligible records in priority order: (lastVerifiedAt ?? createdAt) desc, then id."""
    repository = _canonical_active_repository(active)  # filesystem work: once, not per record
    allowed = frozenset(scopes)
    chosen = [r for r in records if _eligible(r, repository, active, allowed)]
    chosen.sort(key=lambda r: r.id)
    chosen.sort(key=lambda r: r.verified_at, reverse=True)
    return chosen


# -- lexical-v1 relevance --------------------------------------------------------------

_CAMEL = re.compile(r"([a-z])([A-Z])")
_TERM = re.compile(r"[^\W_]+")  # runs of letters and digits
_PATH_TOKEN = re.compile(r"[\w./\\:-]+")
_SYMBOL_TOKEN = re.compile(r"[\w$]+")


def _normalized(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _terms(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for term in _TERM.findall(_normalized(_CAMEL.sub(r"\1 \2", text))):
        if len(term) >= 2 and term not in STOP_WORDS:
            seen.setdefault(term)
    return list(seen)


def _path_key(text: str) -> str:
    key = _normalized(text).replace("\\", "/")
    return key[2:] if key.startswith("./") else key


@dataclass(frozen=True)
class RelevanceInput:
    """The query of ``lexical-v1``: task text, active paths and symbols (in priority order)."""

    task_text: str
    active_paths: Sequence[str] = ()
    active_symbols: Sequence[str] = ()


@dataclass(frozen=True)
class RankedRecord:
    """One scored candidate: score = terms×1 + paths×8 + symbols×4 (§6)."""

    record: MemoryRecord
    score: int
    task_terms: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    fallback: bool = False


def rank_by_relevance(
    records: Iterable[MemoryRecord],
    active: ActiveIdentity,
    query: RelevanceInput,
    scopes: Iterable[str] = MEMORY_PROMPT_DEFAULT_SCOPES,
) -> list[RankedRecord]:
    """Eligible records ranked by ``lexical-v1`` (never changes eligibility).

    Record text is key + lesson + appliesWhen (evidence and avoidWhen ignored).
    Stable sort by score desc over the priority order; when the top score is > 0 the
    first zero-score record moves to position 2 with ``fallback=True`` (§6).
    """
    terms = _terms(query.task_text)[:MAX_TASK_TERMS]
    paths = list(dict.fromkeys(p for p in map(_path_key, query.active_paths) if p))[:MAX_PATHS]
    symbols = list(dict.fromkeys(s for s in map(_normalized, query.active_symbols) if s))[
        :MAX_SYMBOLS
    ]
    ranked: list[RankedRecord] = []
    for record in eligible_records(records, active, scopes):
        text = "\n".join([record.key, record.lesson, *record.applies_when])
        text_terms = set(_terms(text))
        text_paths = {_path_key(t.rstrip(".:")) for t in _PATH_TOKEN.findall(text)}
        text_symbols = set(_SYMBOL_TOKEN.findall(_normalized(text)))
        hit_terms = tuple(t for t in terms if t in text_terms)
        hit_paths = tuple(p for p in paths if p in text_paths)
        hit_symbols = tuple(s for s in symbols if s in text_symbols)
        score = (
            len(hit_terms) * WEIGHT_TASK_TERM
            + len(hit_paths) * WEIGHT_PATH
            + len(hit_symbols) * WEIGHT_SYMBOL
        )
        ranked.append(RankedRecord(record, score, hit_terms, hit_paths, hit_symbols))
    ranked.sort(key=lambda r: r.score, reverse=True)
    if ranked and ranked[0].score > 0:
        for index, candidate in enumerate(ranked):
            if candidate.score == 0:
                del ranked[index]
                ranked.insert(1, RankedRecord(**{**candidate.__dict__, "fallback": True}))
                break
    return ranked


# -- prompt section ----------------------------------------------------------------------


def _compact(text: str) -> str:
    return " ".join(text.split())


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _applicability(record: MemoryRecord) -> str:
    if record.scope == "repo" and record.repository is not None:
        return "scope=repo, repository=" + _json_string(
            f"{record.repository.kind}:{record.repository.key}"
        )
    if record.scope == "runtime" and record.runtime is not None:
        return "scope=runtime, runtime=" + _json_string(record.runtime.key)
    if record.scope == "agent" and record.agent is not None:
        return "scope=agent, agent=" + _json_string(record.agent.key)
    return f"scope={record.scope}"


def render_prompt_section(records: Sequence[MemoryRecord]) -> str:
    """The ``# Memory`` section for ``records`` in the given order; ``""`` for none (§6).

    Layout: header, blank line, caveat, blank line, then per record
    ``- [id] (scope=…) <lesson> Evidence: a, b.`` and optional ``  Applies when: …;
    ….`` / ``  Avoid when: ….`` lines.
    """
    if not records:
        return ""
    lines = ["# Memory", "", _CAVEAT, ""]
    for record in records:
        evidence = ", ".join(record.evidence_refs)
        lines.append(
            f"- [{record.id}] ({_applicability(record)}) {_compact(record.lesson)} "
            f"Evidence: {evidence}."
        )
        if record.applies_when:
            lines.append("  Applies when: " + "; ".join(map(_compact, record.applies_when)) + ".")
        if record.avoid_when:
            lines.append("  Avoid when: " + "; ".join(map(_compact, record.avoid_when)) + ".")
    return "\n".join(lines)


def _estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class PromptDecision:
    """Why a candidate was or was not selected."""

    id: str
    reason: Literal["selected", "token-budget", "item-limit"]
    score: int | None = None
    fallback: bool = False


@dataclass(frozen=True)
class PromptSection:
    """The rendered section, the selected records, its estimated tokens and diagnostics."""

    text: str
    records: list[MemoryRecord] = field(default_factory=list)
    tokens: int = 0
    decisions: list[PromptDecision] = field(default_factory=list)

    @property
    def selected_ids(self) -> list[str]:
        """Ids of the selected records, in section order."""
        return [r.id for r in self.records]


def build_prompt_section(
    records: Iterable[MemoryRecord],
    active: ActiveIdentity,
    *,
    relevance: RelevanceInput | None = None,
    scopes: Iterable[str] = MEMORY_PROMPT_DEFAULT_SCOPES,
    max_items: int = MEMORY_PROMPT_MAX_ITEMS,
    budget_tokens: int = MEMORY_PROMPT_TOKEN_BUDGET,
) -> PromptSection:
    """Select and render the prompt section (§6).

    Candidates come in priority order (or ``lexical-v1`` order when ``relevance`` is
    given). Adding stops at ``max_items`` (later candidates: ``item-limit``); a
    candidate whose addition would make ``ceil(len(whole section)/4)`` exceed
    ``budget_tokens`` is skipped (``token-budget``) and the walk goes on. A budget
    ≤ 0 or a non-positive item limit selects nothing and reports nothing.
    """
    if budget_tokens <= 0 or max_items < 1:
        return PromptSection(text="")
    if relevance is None:
        candidates = [RankedRecord(r, 0) for r in eligible_records(records, active, scopes)]
        scored = False
    else:
        candidates = rank_by_relevance(records, active, relevance, scopes)
        scored = True
    selected: list[MemoryRecord] = []
    decisions: list[PromptDecision] = []
    for candidate in candidates:
        if len(selected) >= max_items:
            reason: Literal["selected", "token-budget", "item-limit"] = "item-limit"
        elif _estimate_tokens(render_prompt_section([*selected, candidate.record])) > budget_tokens:
            reason = "token-budget"
        else:
            reason = "selected"
        decisions.append(
            PromptDecision(
                candidate.record.id,
                reason,
                score=candidate.score if scored else None,
                fallback=candidate.fallback,
            )
        )
        if reason == "selected":
            selected.append(candidate.record)
    text = render_prompt_section(selected)
    return PromptSection(
        text=text, records=selected, tokens=_estimate_tokens(text), decisions=decisions
    )
