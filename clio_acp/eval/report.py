"""The A/B report: trial metrics, per-variant figures and the regression verdict
(MEMORY_SPEC §9).

Owns the arithmetic only: :class:`TrialResult` (what one runner call produced),
:func:`variant_reports` (the per-variant figures, ``added*`` relative to the baseline
trial of the same task), :func:`build_report` (the whole JSON object) and
:func:`format_report` (the readable table). It runs nothing and reads no files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clio_acp.memory.telemetry import StepRecord

__all__ = [
    "REGRESSION_TEXT",
    "VARIANTS",
    "TrialResult",
    "VariantReport",
    "build_report",
    "format_report",
    "variant_reports",
]

VARIANTS: tuple[str, ...] = ("baseline", "rules", "llm")
"""Fixed run order (MEMORY_SPEC §9 "Variants")."""

REGRESSION_TEXT = "REGRESSION: always noisy without a pass-rate gain"  # §9 text report
MEASURED_TEXT = "measured"


@dataclass
class TrialResult:
    """One (variant, task) trial. Tokens are counts, latency is ms. ``rows`` are the
    exact telemetry rows the trial emitted (MEMORY_SPEC §5). ``error`` is set when the
    runner raised (then ``passed`` is False and every figure is zero, §9 "Runner")."""

    variant: str
    task_id: str
    passed: bool
    action_input_tokens: int = 0
    action_output_tokens: int = 0
    action_latency_ms: float = 0.0
    rows: list[StepRecord] = field(default_factory=list)
    error: str | None = None

    # -- §9 "Trial metrics" ---------------------------------------------------
    @property
    def memory_tokens(self) -> int:
        """Σ tokenCost.total over the rows."""
        return sum(r.token_cost.total for r in self.rows)

    @property
    def memory_latency_ms(self) -> float:
        """Σ latencyMs over the rows."""
        return float(sum(r.latency_ms for r in self.rows))

    @property
    def injected(self) -> int:
        """Rows with decision ``injected``."""
        return sum(1 for r in self.rows if r.decision == "injected")

    @property
    def cited(self) -> int:
        """Injected rows with citedEntries > 0."""
        return sum(1 for r in self.rows if r.decision == "injected" and r.cited_entries > 0)

    @property
    def total_tokens(self) -> int:
        """Action input + output + memory tokens."""
        return self.action_input_tokens + self.action_output_tokens + self.memory_tokens

    @property
    def total_latency_ms(self) -> float:
        """Action latency + memory latency, ms."""
        return self.action_latency_ms + self.memory_latency_ms

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "variant": self.variant,
            "taskId": self.task_id,
            "pass": self.passed,
            "actionInputTokens": self.action_input_tokens,
            "actionOutputTokens": self.action_output_tokens,
            "actionLatencyMs": round(self.action_latency_ms, 3),
            "memoryTokens": self.memory_tokens,
            "memoryLatencyMs": round(self.memory_latency_ms, 3),
            "injected": self.injected,
            "cited": self.cited,
            "totalTokens": self.total_tokens,
            "totalLatencyMs": round(self.total_latency_ms, 3),
            "memoryRows": len(self.rows),
        }
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass
class VariantReport:
    """§9 "Per-variant report"; latency figures in ms."""

    variant: str
    runs: int
    passed: int
    pass_rate: float
    injected: int
    cited: int
    uncited: int
    reminders_per_task: float
    cited_reminder_rate: float
    total_tokens: int
    added_tokens: int
    total_latency_ms: float
    added_latency_ms: float
    always_noisy_regression: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "runs": self.runs,
            "passed": self.passed,
            "passRate": self.pass_rate,
            "injected": self.injected,
            "cited": self.cited,
            "uncited": self.uncited,
            "remindersPerTask": self.reminders_per_task,
            "citedReminderRate": self.cited_reminder_rate,
            "totalTokens": self.total_tokens,
            "addedTokens": self.added_tokens,
            "totalLatencyMs": round(self.total_latency_ms, 3),
            "addedLatencyMs": round(self.added_latency_ms, 3),
            "alwaysNoisyRegression": self.always_noisy_regression,
        }


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def variant_reports(trials: Sequence[TrialResult]) -> list[VariantReport]:
    """One report per variant present in ``trials`` (order: baseline, rules, llm, then
    any other in first-seen order). ``addedTokens``/``addedLatencyMs`` are per task,
    relative to the baseline trial of the same task; a task without a baseline trial
    contributes its full totals (§9). ``alwaysNoisyRegression`` = variant ≠ baseline
    AND runs > 0 AND injected ≥ runs AND passRate ≤ baseline passRate (a missing
    baseline counts as passRate 0)."""
    order = [v for v in VARIANTS if any(t.variant == v for t in trials)]
    order += [v for v in dict.fromkeys(t.variant for t in trials) if v not in order]
    baseline = {t.task_id: t for t in trials if t.variant == "baseline"}
    reports: list[VariantReport] = []
    for variant in order:
        mine = [t for t in trials if t.variant == variant]
        runs = len(mine)
        passed = sum(1 for t in mine if t.passed)
        injected = sum(t.injected for t in mine)
        cited = sum(t.cited for t in mine)
        added_tokens = 0
        added_latency = 0.0
        for t in mine:
            base = baseline.get(t.task_id)
            added_tokens += t.total_tokens - (base.total_tokens if base else 0)
            added_latency += t.total_latency_ms - (base.total_latency_ms if base else 0.0)
        reports.append(
            VariantReport(
                variant=variant,
                runs=runs,
                passed=passed,
                pass_rate=_ratio(passed, runs),
                injected=injected,
                cited=cited,
                uncited=max(0, injected - cited),
                reminders_per_task=_ratio(injected, runs),
                cited_reminder_rate=_ratio(cited, injected),
                total_tokens=sum(t.total_tokens for t in mine),
                added_tokens=added_tokens,
                total_latency_ms=sum(t.total_latency_ms for t in mine),
                added_latency_ms=added_latency,
            )
        )
    base_rate = next((r.pass_rate for r in reports if r.variant == "baseline"), 0.0)
    for r in reports:
        r.always_noisy_regression = (
            r.variant != "baseline"
            and r.runs > 0
            and r.injected >= r.runs
            and r.pass_rate <= base_rate
        )
    return reports


def build_report(
    trials: Sequence[TrialResult], *, target: dict[str, str], tasks: Sequence[str]
) -> dict[str, Any]:
    """The ``--json`` object: target, task ids, trials, variants, verdict."""
    reports = variant_reports(trials)
    regression = any(r.always_noisy_regression for r in reports)
    return {
        "target": dict(target),
        "tasks": list(tasks),
        "trials": [t.to_dict() for t in trials],
        "variants": [r.to_dict() for r in reports],
        "alwaysNoisyRegression": regression,
        "verdict": REGRESSION_TEXT if regression else MEASURED_TEXT,
    }


def format_report(report: dict[str, Any]) -> str:
    """The readable table: one line per trial, one line per variant, the verdict."""
    lines = [f"target {report['target'].get('id')} / {report['target'].get('model')}", ""]
    lines.append(
        f"{'variant':<9} {'task':<32} {'pass':<5} {'inj':>4} {'cited':>5} {'tokens':>8} {'ms':>9}"
    )
    for t in report["trials"]:
        mark = "yes" if t["pass"] else ("ERR" if "error" in t else "no")
        lines.append(
            f"{t['variant']:<9} {t['taskId'][:32]:<32} {mark:<5} {t['injected']:>4} "
            f"{t['cited']:>5} {t['totalTokens']:>8} {t['totalLatencyMs']:>9.0f}"
        )
        if "error" in t:
            lines.append(f"{'':<9} error: {t['error']}")
    lines.append("")
    head = (
        f"{'variant':<9} {'runs':>4} {'pass':>5} {'rate':>5} {'inj':>4} {'cited':>5} "
        f"{'uncit':>5} {'rem/task':>8} {'citeRate':>8} {'tokens':>8} {'+tokens':>8} "
        f"{'ms':>9} {'+ms':>9}  flag"
    )
    lines.append(head)
    for v in report["variants"]:
        lines.append(
            f"{v['variant']:<9} {v['runs']:>4} {v['passed']:>5} {v['passRate']:>5.2f} "
            f"{v['injected']:>4} {v['cited']:>5} {v['uncited']:>5} "
            f"{v['remindersPerTask']:>8.2f} {v['citedReminderRate']:>8.2f} "
            f"{v['totalTokens']:>8} {v['addedTokens']:>8} {v['totalLatencyMs']:>9.0f} "
            f"{v['addedLatencyMs']:>9.0f}  {'always-noisy' if v['alwaysNoisyRegression'] else ''}"
        )
    lines += ["", report["verdict"]]
    return "\n".join(lines)
