"""``clio-acp usage report``: what the memory plane cost (MEMORY_SPEC §5, §12).

Owns the operator's report that folds ``<state>/memory/steps.jsonl`` (plus its
rotated ``.1``) and ``<state>/usage/out-of-turn.jsonl``: per route (target/model)
the llm steps that reached the model, injections, hit rate, tokens, model time and
endpoint-busy skips, the rules tier's steps, and the background usage rows (tokens,
cache, reasoning, duration, known cost). The per-step fold itself is
``spend.fold_spend`` (one definition of the hit rate: its denominator excludes
``dropped`` rows, §12); rows are parsed by ``telemetry.parse_step_line`` and
``spend.UsageRow``. Unparseable lines (a torn tail, rows of another version) are
counted and skipped, never fatal. Read-only: it never writes either file.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from clio_acp.memory.spend import SpendSummary, UsageRow, fold_spend
from clio_acp.memory.telemetry import StepRecord, parse_step_line
from clio_acp.paths import Paths

__all__ = ["RouteFold", "UsageReport", "UsageTotals", "build_usage_report", "format_usage_report"]

RULES_ROUTE = "rules tier"
UNRECORDED_ROUTE = "llm (route not recorded)"


def _lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    yield line
    except FileNotFoundError:
        return


@dataclass
class RouteFold:
    """One table row: the spend fold of the rows of one route."""

    route: str
    rows: int
    spend: SpendSummary
    injected: int = 0  # rules tier: injected rows (no model involved)

    def to_dict(self) -> dict[str, Any]:
        """The route's fold as camelCase JSON."""
        return {"route": self.route, "rows": self.rows, **self.spend.to_dict()}


@dataclass
class UsageTotals:
    """The fold of ``out-of-turn.jsonl`` rows (tokens, time in ms, cost in USD)."""

    rows: int = 0
    sessions: set[str] = field(default_factory=set)
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    total_tokens: int = 0
    duration_ms: float = 0.0
    cost_usd: float = 0.0
    cost_rows: int = 0
    first_at: str | None = None
    last_at: str | None = None

    def add(self, row: UsageRow) -> None:
        """Fold one usage row into the totals."""
        self.rows += 1
        self.sessions.add(row.session_id)
        usage = row.usage
        self.input += usage.input
        self.output += usage.output
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_write
        self.reasoning += usage.reasoning
        self.total_tokens += usage.total_tokens
        self.duration_ms += float(row.timing.duration_ms)
        if usage.cost_usd is not None:
            self.cost_usd += usage.cost_usd
            self.cost_rows += 1
        if self.first_at is None or row.timestamp < self.first_at:
            self.first_at = row.timestamp
        if self.last_at is None or row.timestamp > self.last_at:
            self.last_at = row.timestamp

    def to_dict(self) -> dict[str, Any]:
        """The totals as camelCase JSON (tokens, ms, USD)."""
        return {
            "rows": self.rows,
            "sessions": len(self.sessions),
            "inputTokens": self.input,
            "outputTokens": self.output,
            "cacheReadTokens": self.cache_read,
            "cacheWriteTokens": self.cache_write,
            "reasoningTokens": self.reasoning,
            "totalTokens": self.total_tokens,
            "durationMs": self.duration_ms,
            "costUsd": self.cost_usd,
            "costKnownRows": self.cost_rows,
            "firstAt": self.first_at,
            "lastAt": self.last_at,
        }


@dataclass
class UsageReport:
    """The whole report: the llm total, one fold per route, the usage rows."""

    steps_file: Path
    steps_files: list[Path]
    usage_file: Path
    total: SpendSummary
    routes: list[RouteFold]
    step_rows: int
    skipped_step_lines: int
    usage: UsageTotals
    skipped_usage_lines: int

    def to_dict(self) -> dict[str, Any]:
        """JSON shape of ``clio-acp usage report --json``."""
        return {
            "stepsFiles": [str(p) for p in self.steps_files],
            "usageFile": str(self.usage_file),
            "stepRows": self.step_rows,
            "skippedStepLines": self.skipped_step_lines,
            "total": self.total.to_dict(),
            "routes": [r.to_dict() for r in self.routes],
            "usage": self.usage.to_dict(),
            "skippedUsageLines": self.skipped_usage_lines,
        }


def _route_of(row: StepRecord) -> str:
    if row.tier == "rules":
        return RULES_ROUTE
    if row.target_id and row.model_id:
        return f"{row.target_id}/{row.model_id}"
    return UNRECORDED_ROUTE


def build_usage_report(paths: Paths) -> UsageReport:
    """Fold the step ledger (``.1`` generation first) and the usage ring. Never raises
    for missing files or bad lines (they are counted in ``skipped_*``)."""
    steps = paths.steps_file
    files = [steps.with_name(steps.name + ".1"), steps]
    rows: list[StepRecord] = []
    skipped = 0
    for file in files:
        for line in _lines(file):
            try:
                rows.append(parse_step_line(line))
            except ValueError:
                skipped += 1
    groups: dict[str, list[StepRecord]] = {}
    for row in rows:
        groups.setdefault(_route_of(row), []).append(row)
    routes = [
        RouteFold(
            route,
            len(group),
            fold_spend(group),
            injected=sum(r.decision == "injected" for r in group),
        )
        for route, group in sorted(
            groups.items(), key=lambda item: (item[0] == RULES_ROUTE, item[0])
        )
    ]
    usage = UsageTotals()
    skipped_usage = 0
    for line in _lines(paths.usage_file):
        try:
            usage.add(UsageRow.model_validate_json(line))
        except (ValidationError, ValueError):
            skipped_usage += 1
    return UsageReport(
        steps_file=steps,
        steps_files=[f for f in files if f.exists()],
        usage_file=paths.usage_file,
        total=fold_spend(rows),
        routes=routes,
        step_rows=len(rows),
        skipped_step_lines=skipped,
        usage=usage,
        skipped_usage_lines=skipped_usage,
    )


def _tokens(n: int) -> str:
    # §5 display: tokens ≥ 1000 show as x.xk.
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _duration(ms: float) -> str:
    # §5 display: ≥ 60 s in minutes with 1 decimal, otherwise seconds with 1 decimal.
    seconds = ms / 1000
    return f"{seconds / 60:.1f}m" if seconds >= 60 else f"{seconds:.1f}s"


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "-"


def format_usage_report(report: UsageReport) -> str:
    """The text table printed by ``clio-acp usage report``."""
    out: list[str] = []
    if not report.step_rows and not report.usage.rows:
        out.append("no memory usage recorded yet")
        out.append(f"  steps: {report.steps_file}")
        out.append(f"  usage: {report.usage_file}")
        return "\n".join(out)
    header = (
        f"{'route':<32} {'steps':>6} {'injected':>8} {'hit':>5} {'tokens':>8} "
        f"{'model time':>10} {'slowest':>8} {'busy skips':>10}"
    )
    out.append(header)
    out.append("-" * len(header))

    def line(name: str, steps: int, injected: int, spend: SpendSummary, llm: bool) -> str:
        if not llm:
            return (
                f"{name:<32} {steps:>6} {injected:>8} {'-':>5} {'-':>8} {'-':>10} {'-':>8} "
                f"{spend.endpoint_busy_skips:>10}"
            )
        return (
            f"{name:<32} {steps:>6} {injected:>8} {_percent(injected, steps):>5} "
            f"{_tokens(spend.total_tokens):>8} {_duration(spend.model_ms):>10} "
            f"{_duration(spend.slowest_step_ms):>8} {spend.endpoint_busy_skips:>10}"
        )

    for route in report.routes:
        if route.route == RULES_ROUTE:
            out.append(line(route.route, route.rows, route.injected, route.spend, llm=False))
        else:
            spend = route.spend
            out.append(line(route.route[:32], spend.llm_steps, spend.injections, spend, llm=True))
    total = report.total
    out.append("-" * len(header))
    out.append(line("llm total", total.llm_steps, total.injections, total, llm=True))
    out.append(
        f"llm steps count rows that reached the model (dropped rows excluded); "
        f"{total.timeouts} timeout(s); {report.step_rows} step row(s)"
        + (
            f", {report.skipped_step_lines} unreadable line(s) skipped"
            if report.skipped_step_lines
            else ""
        )
    )
    if total.first_at:
        out.append(f"steps from {total.first_at} to {total.last_at}")
    usage = report.usage
    out.append("")
    out.append(
        f"out-of-turn usage: {usage.rows} row(s), {len(usage.sessions)} session(s), "
        f"{_tokens(usage.total_tokens)} tok (in {_tokens(usage.input)} · out "
        f"{_tokens(usage.output)} · cache read {_tokens(usage.cache_read)} · reasoning "
        f"{_tokens(usage.reasoning)}), {_duration(usage.duration_ms)}"
        + (
            f", cost ${usage.cost_usd:.4f} ({usage.cost_rows} of {usage.rows} row(s) priced)"
            if usage.cost_rows
            else ""
        )
        + (
            f", {report.skipped_usage_lines} unreadable line(s) skipped"
            if report.skipped_usage_lines
            else ""
        )
    )
    return "\n".join(out)
