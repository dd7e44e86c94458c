"""Memory spend: the fold over ``steps.jsonl`` and the out-of-turn usage rows.

Owns the spend fold shown by ``/memory`` (MEMORY_SPEC §5 "Spend fold"; §12: the hit
rate's denominator is llm steps that *reached the model*, so ``dropped`` rows are
excluded), its one-line display, and the ``<state>/usage/out-of-turn.jsonl`` usage
rows (§5 "Usage rows": one per llm call that reported usage, a ring of 1000 rows,
written under the *origin* session even when the answer arrives late). It reads the
ledger tolerantly (a torn tail line is normal) and never raises to its caller.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field

from clio_acp.atomic import write_atomic
from clio_acp.memory.telemetry import StepRecord, parse_step_line
from clio_acp.timestamps import utc_now

__all__ = [
    "USAGE_LABEL",
    "USAGE_RING_ROWS",
    "SpendSummary",
    "UsageRow",
    "append_usage_row",
    "fold_spend",
    "fold_spend_file",
    "format_spend",
]

log = logging.getLogger(__name__)

# MEMORY_SPEC §5 "Usage rows".
USAGE_LABEL = "background-memory"
USAGE_RING_ROWS = 1000


@dataclass
class SpendSummary:
    """The fold of memory steps (§5). Token and time figures count llm-tier rows that
    reached the model; ``endpoint_busy_skips`` counts rows of any tier."""

    llm_steps: int = 0
    injections: int = 0
    timeouts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    model_ms: float = 0.0
    slowest_step_ms: float = 0.0
    endpoint_busy_skips: int = 0
    first_at: str | None = None
    last_at: str | None = None
    rows: int = 0

    @property
    def hit_rate(self) -> float:
        """injections / llm steps that reached the model; 0 when there are none."""
        return self.injections / self.llm_steps if self.llm_steps else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The summary as camelCase JSON (the ``/memory`` board's ``spend``)."""
        return {
            "llmSteps": self.llm_steps,
            "injections": self.injections,
            "timeouts": self.timeouts,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens,
            "modelMs": self.model_ms,
            "slowestStepMs": self.slowest_step_ms,
            "endpointBusySkips": self.endpoint_busy_skips,
            "hitRate": self.hit_rate,
            "firstAt": self.first_at,
            "lastAt": self.last_at,
        }


def fold_spend(records: list[StepRecord]) -> SpendSummary:
    """Fold parsed rows into a ``SpendSummary`` (§5, §12 denominator)."""
    summary = SpendSummary()
    for row in records:
        summary.rows += 1
        if summary.first_at is None or row.at < summary.first_at:
            summary.first_at = row.at
        if summary.last_at is None or row.at > summary.last_at:
            summary.last_at = row.at
        if row.reason == "endpoint_busy":
            summary.endpoint_busy_skips += 1
        if row.tier != "llm" or row.decision == "dropped":
            continue
        summary.llm_steps += 1
        summary.injections += row.decision == "injected"
        summary.timeouts += row.decision == "timeout"
        summary.input_tokens += row.token_cost.input
        summary.output_tokens += row.token_cost.output
        summary.total_tokens += row.token_cost.total
        summary.model_ms += float(row.latency_ms)
        summary.slowest_step_ms = max(summary.slowest_step_ms, float(row.latency_ms))
    return summary


_CACHE: dict[str, tuple[tuple[tuple[int, int], ...], SpendSummary]] = {}


def _read_rows(path: Path) -> list[StepRecord]:
    rows = []
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    rows.append(parse_step_line(line))
                except ValueError:
                    continue  # blank, torn or foreign rows are skipped (§5)
    except FileNotFoundError:
        pass
    return rows


def fold_spend_file(path: Path) -> SpendSummary:
    """Fold ``path`` and its rotated ``.1`` generation; cached by mtime and size.
    Never raises: an unreadable ledger folds to an empty summary."""
    files = [path.with_name(path.name + ".1"), path]
    key = []
    for file in files:
        try:
            stat = file.stat()
            key.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            key.append((0, -1))
    cache_key = tuple(key)
    cached = _CACHE.get(str(path))
    if cached and cached[0] == cache_key:
        return cached[1]
    try:
        rows = [row for file in files for row in _read_rows(file)]
        summary = fold_spend(rows)
    except Exception:
        log.debug("spend fold failed", exc_info=True)
        summary = SpendSummary()
    _CACHE[str(path)] = (cache_key, summary)
    return summary


def _tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _duration(ms: float) -> str:
    seconds = ms / 1000
    return f"{seconds / 60:.1f}m" if seconds >= 60 else f"{seconds:.1f}s"


def format_spend(summary: SpendSummary) -> str:
    """``spend N steps · X tok · T · hit I/N (P%)``; empty when there are no llm steps."""
    if not summary.llm_steps:
        return ""
    return (
        f"spend {summary.llm_steps} steps · {_tokens(summary.total_tokens)} tok · "
        f"{_duration(summary.model_ms)} · hit {summary.injections}/{summary.llm_steps} "
        f"({round(summary.hit_rate * 100)}%)"
    )


class _Row(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class UsageFigures(_Row):
    """Token counts (and cost in USD when known) of one usage row (§5)."""

    input: int = 0
    output: int = 0
    cache_read: int = Field(default=0, alias="cacheRead")
    cache_write: int = Field(default=0, alias="cacheWrite")
    reasoning: int = 0
    total_tokens: int = Field(default=0, alias="totalTokens")
    cost_usd: float | None = Field(default=None, alias="costUsd")
    cost_provenance: str = Field(default="unknown", alias="costProvenance")


class UsageTiming(_Row):
    """Wall time of the call a usage row accounts for, in milliseconds."""

    duration_ms: float = Field(alias="durationMs", ge=0)


class UsageRow(_Row):
    """One line of ``out-of-turn.jsonl`` (§5 "Usage rows")."""

    label: str = USAGE_LABEL
    session_id: str = Field(alias="sessionId")
    repo_identity: str | None = Field(default=None, alias="repoIdentity")
    timestamp: str = Field(default_factory=utc_now)
    target: str | None = None
    attributed_model_id: str | None = Field(default=None, alias="attributedModelId")
    usage: UsageFigures
    timing: UsageTiming
    prompt_cache: dict[str, Any] | None = Field(default=None, alias="promptCache")


def append_usage_row(path: Path, row: UsageRow) -> None:
    """Append ``row`` to the usage ring at ``path``, keeping the newest 1000 rows.

    Serialized across processes with a lock file; written atomically
    (``clio_acp.atomic``). Best effort: errors are logged and swallowed. This does file I/O;
    async callers run it in an executor."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row.model_dump(by_alias=True, exclude_none=True), separators=(",", ":"))
        with FileLock(str(path) + ".lock", timeout=10):
            try:
                # surrogateescape: a corrupt line's bytes survive the rewrite unchanged
                # instead of making every later append fail.
                text = path.read_text(encoding="utf-8", errors="surrogateescape")
                lines = [ln for ln in text.split("\n") if ln.strip()]
            except FileNotFoundError:
                lines = []
            lines.append(line)
            lines = lines[-USAGE_RING_ROWS:]
            write_atomic(path, "\n".join(lines) + "\n", errors="surrogateescape")
    except Exception:
        log.warning("could not record memory usage row in %s", path, exc_info=True)
