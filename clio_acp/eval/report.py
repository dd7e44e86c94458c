"""The A/B report: trial metrics, per-variant figures and the regression verdict
(MEMORY_SPEC §9).

Owns the arithmetic only: :class:`TrialResult` (what one runner call produced),
:func:`variant_reports` (the per-variant figures, ``added*`` relative to the baseline
trial of the same task, distractor flag and seed), :func:`wilson_interval` (95 %
score interval of a pass rate), the per-variant verdicts read from those intervals,
:func:`build_report` (the whole JSON object) and :func:`format_report` (the readable
table). It runs nothing and reads no files.

Pass rates are over the main (non-distractor) trials; the distractor trials — memory
speaking about something that does not help — are reported beside them and must
score as the baseline's. A variant is ``better``/``worse`` than the baseline only
when the two 95 % intervals do not overlap, else ``inconclusive``;
``alwaysNoisyRegression`` (§9) is a variant injecting at least once per run without
being ``better``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clio_acp.memory.telemetry import StepRecord

__all__ = [
    "REGRESSION_TEXT",
    "VARIANTS",
    "VERDICT_TEXTS",
    "TrialResult",
    "VariantReport",
    "build_report",
    "format_report",
    "variant_reports",
    "wilson_interval",
]

VARIANTS: tuple[str, ...] = ("baseline", "rules", "llm")
"""Fixed run order (MEMORY_SPEC §9 "Variants")."""

REGRESSION_TEXT = "REGRESSION: always noisy without a pass-rate gain"  # §9 text report
MEASURED_TEXT = "measured"
VERDICT_TEXTS: dict[str, str] = {
    "measured": MEASURED_TEXT,
    "alwaysNoisyRegression": REGRESSION_TEXT,
    "passRateRegression": "REGRESSION: pass rate below the baseline's (95 % intervals apart)",
    "distractorLeak": (
        "INVALID: memory without the key fact changed pass rates (distractor above baseline)"
    ),
}
"""Overall verdict codes, most serious first, and their report lines."""
Z_95 = 1.959963984540054


def wilson_interval(passed: int, runs: int, z: float = Z_95) -> tuple[float, float]:
    """95 % Wilson score interval of ``passed``/``runs`` (``(0.0, 1.0)`` for no runs)."""
    if runs <= 0:
        return (0.0, 1.0)
    p = passed / runs
    denom = 1 + z * z / runs
    centre = (p + z * z / (2 * runs)) / denom
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def compare_intervals(mine: tuple[float, float], base: tuple[float, float]) -> str:
    """``better`` / ``worse`` when the intervals do not overlap, else ``inconclusive``."""
    if mine[0] > base[1]:
        return "better"
    if mine[1] < base[0]:
        return "worse"
    return "inconclusive"


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
    seed: int = 0
    distractor: bool = False
    """A trial of the task's distractor variant."""
    negative: bool = False
    """The task has no key fact: any reminder is a cost."""
    memory_seen: bool | None = None
    """Memory text reached the agent (None: unknown)."""
    key_fact_seen: bool | None = None
    """That text carried the task's key fact (None: unknown)."""

    @property
    def key(self) -> tuple[str, bool, int]:
        """What pairs a trial with its baseline trial: task, distractor, seed."""
        return (self.task_id, self.distractor, self.seed)

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
        """The trial as the report's ``trials`` list holds it (camelCase keys; latencies in ms,
        rounded to µs)."""
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
            "seed": self.seed,
            "distractor": self.distractor,
            "negative": self.negative,
            "memorySeen": self.memory_seen,
            "keyFactSeen": self.key_fact_seen,
        }
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass
class VariantReport:
    """§9 "Per-variant report" over the main (non-distractor) trials, plus the 95 %
    intervals, the distractor figures and the verdict against the baseline; latency
    figures in ms."""

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
    pass_interval: tuple[float, float] = (0.0, 1.0)
    distractor_runs: int = 0
    distractor_passed: int = 0
    distractor_interval: tuple[float, float] = (0.0, 1.0)
    negative_runs: int = 0
    negative_injected: int = 0
    key_fact_runs: int = 0
    """Positive main trials whose memory carried the key fact."""
    unexplained: int = 0
    """Trials whose pass differs from their baseline trial although no memory text
    carried the key fact (the harness would be measuring presence, not content)."""
    verdict: str = "inconclusive"
    """baseline | better | worse | inconclusive (95 % intervals vs the baseline's)."""
    distractor_verdict: str = "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        """The variant's figures as the report's ``variants`` list holds it (camelCase keys;
        rates as fractions, intervals as ``[low, high]``)."""
        return {
            "variant": self.variant,
            "runs": self.runs,
            "passed": self.passed,
            "passRate": self.pass_rate,
            "passRateInterval": [round(x, 4) for x in self.pass_interval],
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
            "distractorRuns": self.distractor_runs,
            "distractorPassed": self.distractor_passed,
            "distractorPassRate": _ratio(self.distractor_passed, self.distractor_runs),
            "distractorPassRateInterval": [round(x, 4) for x in self.distractor_interval],
            "negativeRuns": self.negative_runs,
            "negativeReminders": self.negative_injected,
            "keyFactRuns": self.key_fact_runs,
            "unexplainedDifferences": self.unexplained,
            "verdict": self.verdict,
            "distractorVerdict": self.distractor_verdict,
        }


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _variant_order(trials: Sequence[TrialResult]) -> list[str]:
    order = [v for v in VARIANTS if any(t.variant == v for t in trials)]
    return order + [v for v in dict.fromkeys(t.variant for t in trials) if v not in order]


def _one_variant(
    variant: str, mine: list[TrialResult], baseline: dict[tuple[str, bool, int], TrialResult]
) -> VariantReport:
    main = [t for t in mine if not t.distractor]
    side = [t for t in mine if t.distractor]
    runs, passed = len(main), sum(1 for t in main if t.passed)
    injected = sum(t.injected for t in main)
    cited = sum(t.cited for t in main)
    added_tokens, added_latency, unexplained = 0, 0.0, 0
    for t in mine:
        base = baseline.get(t.key)
        if not t.distractor:
            added_tokens += t.total_tokens - (base.total_tokens if base else 0)
            added_latency += t.total_latency_ms - (base.total_latency_ms if base else 0.0)
        if base is not None and base is not t and base.passed != t.passed and not t.key_fact_seen:
            unexplained += 1
    side_passed = sum(1 for t in side if t.passed)
    negatives = [t for t in main if t.negative]
    return VariantReport(
        variant=variant,
        runs=runs,
        passed=passed,
        pass_rate=_ratio(passed, runs),
        injected=injected,
        cited=cited,
        uncited=max(0, injected - cited),
        reminders_per_task=_ratio(injected, runs),
        cited_reminder_rate=_ratio(cited, injected),
        total_tokens=sum(t.total_tokens for t in main),
        added_tokens=added_tokens,
        total_latency_ms=sum(t.total_latency_ms for t in main),
        added_latency_ms=added_latency,
        pass_interval=wilson_interval(passed, runs),
        distractor_runs=len(side),
        distractor_passed=side_passed,
        distractor_interval=wilson_interval(side_passed, len(side)),
        negative_runs=len(negatives),
        negative_injected=sum(t.injected for t in negatives),
        key_fact_runs=sum(1 for t in main if not t.negative and t.key_fact_seen),
        unexplained=unexplained,
    )


def variant_reports(trials: Sequence[TrialResult]) -> list[VariantReport]:
    """One report per variant present in ``trials`` (order: baseline, rules, llm, then
    any other in first-seen order). Pass figures are over the main trials;
    ``addedTokens``/``addedLatencyMs`` are per trial, relative to the baseline trial
    of the same task and seed; a trial without one contributes its full totals (§9).
    ``verdict`` compares the 95 % pass-rate intervals with the baseline's
    (``better``/``worse``/``inconclusive``); ``alwaysNoisyRegression`` = variant ≠
    baseline AND runs > 0 AND injected ≥ runs AND not ``better`` (a missing baseline
    counts as 0 of 0 runs: interval (0, 1))."""
    baseline = {t.key: t for t in trials if t.variant == "baseline"}
    reports = [
        _one_variant(v, [t for t in trials if t.variant == v], baseline)
        for v in _variant_order(trials)
    ]
    base = next((r for r in reports if r.variant == "baseline"), None)
    base_main = base.pass_interval if base else (0.0, 1.0)
    base_side = base.distractor_interval if base else (0.0, 1.0)
    for r in reports:
        if r.variant == "baseline":
            r.verdict = r.distractor_verdict = "baseline"
            continue
        r.verdict = compare_intervals(r.pass_interval, base_main)
        r.distractor_verdict = (
            compare_intervals(r.distractor_interval, base_side) if r.distractor_runs else "none"
        )
        r.always_noisy_regression = r.runs > 0 and r.injected >= r.runs and r.verdict != "better"
    return reports


def overall_verdict(reports: Sequence[VariantReport]) -> str:
    """The most serious code of ``VERDICT_TEXTS`` that applies to any variant."""
    if any(r.always_noisy_regression for r in reports):
        return "alwaysNoisyRegression"
    if any(r.verdict == "worse" for r in reports):
        return "passRateRegression"
    if any(r.distractor_verdict == "better" for r in reports):
        return "distractorLeak"
    return "measured"


def build_report(
    trials: Sequence[TrialResult], *, target: dict[str, str], tasks: Sequence[str]
) -> dict[str, Any]:
    """The ``--json`` object: target, task ids, trials, variants, verdict."""
    reports = variant_reports(trials)
    code = overall_verdict(reports)
    return {
        "target": dict(target),
        "tasks": list(tasks),
        "trials": [t.to_dict() for t in trials],
        "variants": [r.to_dict() for r in reports],
        "alwaysNoisyRegression": code == "alwaysNoisyRegression",
        "verdictCode": code,
        "verdict": VERDICT_TEXTS[code],
    }


def _task_matrix(report: dict[str, Any]) -> list[str]:
    """One line per task: passes/runs per variant, main then distractor."""
    variants = [v["variant"] for v in report["variants"]]
    cells: dict[tuple[str, bool, str], list[int]] = {}
    for t in report["trials"]:
        cell = cells.setdefault((t["taskId"], bool(t.get("distractor")), t["variant"]), [0, 0])
        cell[0] += 1 if t["pass"] else 0
        cell[1] += 1
    width = max([len(task) for task in report["tasks"]] + [4])
    head = f"{'task':<{width}}  " + " ".join(f"{v:>8}" for v in variants)
    lines = [head + "  | distractor " + " ".join(f"{v:>8}" for v in variants)]
    for task in report["tasks"]:

        def row(side: bool, task: str = task) -> str:
            out = []
            for v in variants:
                got = cells.get((task, side, v))
                out.append(f"{f'{got[0]}/{got[1]}' if got else '-':>8}")
            return " ".join(out)

        lines.append(f"{task:<{width}}  {row(False)}  | {'':>10} {row(True)}")
    return lines


def _interval(values: Sequence[float]) -> str:
    return f"[{values[0]:.2f}-{values[1]:.2f}]"


def format_report(report: dict[str, Any]) -> str:
    """The readable report: passes per task and variant, failed trials, one line per
    variant with its 95 % interval and verdict, the distractor line, the verdict."""
    lines = [f"target {report['target'].get('id')} / {report['target'].get('model')}", ""]
    lines += _task_matrix(report)
    errors = [t for t in report["trials"] if "error" in t]
    for t in errors:
        lines.append(f"error {t['variant']} {t['taskId']} seed {t.get('seed', 0)}: {t['error']}")
    lines.append("")
    lines.append(
        f"{'variant':<9} {'runs':>4} {'pass':>5} {'rate':>5} {'95% CI':>11} {'inj':>4} "
        f"{'cited':>5} {'rem/task':>8} {'+tokens':>8} {'+ms':>9}  verdict"
    )
    for v in report["variants"]:
        flag = "  always-noisy" if v["alwaysNoisyRegression"] else ""
        lines.append(
            f"{v['variant']:<9} {v['runs']:>4} {v['passed']:>5} {v['passRate']:>5.2f} "
            f"{_interval(v['passRateInterval']):>11} {v['injected']:>4} {v['cited']:>5} "
            f"{v['remindersPerTask']:>8.2f} {v['addedTokens']:>8} {v['addedLatencyMs']:>9.0f}"
            f"  {v['verdict']}{flag}"
        )
    lines.append("")
    lines.append(
        f"{'variant':<9} {'distractor':>10} {'95% CI':>11} {'verdict':>12} "
        f"{'negReminders':>12} {'keyFact':>7} {'unexplained':>11}"
    )
    for v in report["variants"]:
        lines.append(
            f"{v['variant']:<9} {v['distractorPassed']:>4}/{v['distractorRuns']:<5} "
            f"{_interval(v['distractorPassRateInterval']):>11} {v['distractorVerdict']:>12} "
            f"{v['negativeReminders']:>5}/{v['negativeRuns']:<6} {v['keyFactRuns']:>7} "
            f"{v['unexplainedDifferences']:>11}"
        )
    lines += ["", report["verdict"]]
    return "\n".join(lines)
