"""Score what memory said on replayed runs against hand labels (issue 14 item 4).

Owns the labels file shape and :func:`score_reports`. A labels file
(``tests/data/trajectory_labels.json``; how it was made: ``tests/data/README.md``)
is ``{version: 1, vocabulary: […], runs: {"<path>::<instance>": {calls, labels,
notes}}}`` with one label per tool call (1-based call *k* is ``labels[k-1]``). A
label is one of the vocabulary or two joined by ``+`` (``blind_retry+environment``).
A bare ``{"<instance>": [label, …]}`` mapping is read the same way.

Each reminder of a replay report is attached to the call it fired at (an
annotation or stop: its call; a turn-end reminder: the last call before it;
restores and the once-per-task completion check are not call-bound: they are
counted apart and left out of the per-100 figures). Per
trigger:

- ``repeated_failure`` (and the loop stop) is right at ``blind_retry`` calls;
- ``unchanged_after_edit`` at ``unchanged_after_edit`` calls;
- ``environment`` at ``environment`` calls;
- ``recurring_problem`` at any of those three (it has no label of its own, so
  its recall is not defined).

recall = labelled calls the trigger fired at / labelled calls; precision = calls
it fired at that carry a matching label / calls it fired at; per100 = its
reminders per 100 tool calls. Also reported: reminders at ``edit_changed_outcome``
and ``informative`` calls (both should be zero) and all reminders per 100 calls.
Reads nothing but the labels file; prints nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clio_acp.agent.replay import ReplayReport

__all__ = ["LabelError", "Score", "format_score", "load_labels", "score_reports"]

TARGETS: dict[str, frozenset[str]] = {
    "repeated_failure": frozenset({"blind_retry"}),
    "unchanged_after_edit": frozenset({"unchanged_after_edit"}),
    "environment": frozenset({"environment"}),
    "recurring_problem": frozenset({"blind_retry", "unchanged_after_edit", "environment"}),
}
_TRIGGER_ALIASES = {"loop_signal": "repeated_failure"}
_UNBOUND_CHANNELS = {"restore"}
# Once per task, at its end: not about any call (reported apart, not in per100).
_UNBOUND_TRIGGERS = {"completion_check"}
_QUIET_LABELS = ("edit_changed_outcome", "informative")


_SHAPE = '{"runs": {"<file>::<instance>": {"calls": N, "labels": ["clean", …]}}}'
"""The shape a labels file error message names."""


class LabelError(ValueError):
    """The labels file is missing, not JSON, or not in the documented shape."""


def load_labels(path: Path) -> dict[str, list[set[str]]]:
    """Instance name → per-call label sets. Raises ``LabelError``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        runs = data["runs"] if isinstance(data, dict) and "runs" in data else data
        if not isinstance(runs, dict) or not runs:
            raise LabelError(f"{path}: not a labels file: no runs; expected {_SHAPE}")
        result: dict[str, list[set[str]]] = {}
        for key, run in runs.items():
            instance = str(key).split("::", 1)[-1]
            labels = run.get("labels") if isinstance(run, dict) else run
            if not isinstance(labels, list):
                raise LabelError(
                    f"{path}: not a labels file: run {key} has no list of labels; expected {_SHAPE}"
                )
            calls = run.get("calls", len(labels)) if isinstance(run, dict) else len(labels)
            if len(labels) != calls:
                raise LabelError(f"{path}: run {key}: labels do not match calls")
            result[instance] = [set(str(label).split("+")) for label in labels]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, LabelError):
            raise
        raise LabelError(f"{path}: not a labels file: {exc}") from exc
    return result


@dataclass
class TriggerScore:
    labelled: int = 0
    fired: int = 0
    hits: int = 0
    reminders: int = 0

    def to_dict(self, calls: int, recall_defined: bool) -> dict[str, Any]:
        """One trigger's figures: labelled calls (None where recall is undefined), calls it
        fired at, reminders, recall and precision in percent (None when undefined) and
        reminders per 100 tool calls over ``calls``."""
        return {
            "labelled": self.labelled if recall_defined else None,
            "firedAtCalls": self.fired,
            "reminders": self.reminders,
            "recallPct": _pct(self.hits, self.labelled) if recall_defined else None,
            "precisionPct": _pct(self.hits, self.fired) if self.fired else None,
            "per100": round(100.0 * self.reminders / calls, 2) if calls else 0.0,
        }


def _pct(num: int, den: int) -> float | None:
    return round(100.0 * num / den, 1) if den else None


@dataclass
class Score:
    runs: int = 0
    unlabelled: list[str] = field(default_factory=list)
    calls: int = 0
    reminders: int = 0
    unbound: Counter[str] = field(default_factory=Counter)
    triggers: dict[str, TriggerScore] = field(
        default_factory=lambda: {name: TriggerScore() for name in TARGETS}
    )
    other_triggers: Counter[str] = field(default_factory=Counter)
    at_quiet: Counter[str] = field(default_factory=Counter)
    label_counts: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        """The whole score as ``clio-acp replay --score --json`` prints it (camelCase keys;
        percentages rounded)."""
        return {
            "runs": self.runs,
            "unlabelled": self.unlabelled,
            "calls": self.calls,
            "reminders": self.reminders,
            "remindersPer100": round(100.0 * self.reminders / self.calls, 2) if self.calls else 0,
            "triggers": {
                name: t.to_dict(self.calls, name != "recurring_problem")
                for name, t in self.triggers.items()
            },
            "otherTriggers": dict(self.other_triggers),
            "notCallBound": dict(self.unbound),
            "remindersAtQuietCalls": {label: self.at_quiet[label] for label in _QUIET_LABELS},
            "labels": dict(self.label_counts),
        }


def _unbound(reminder: Any) -> bool:
    return (
        reminder.channel in _UNBOUND_CHANNELS
        or reminder.trigger in _UNBOUND_TRIGGERS
        or reminder.step <= 0
    )


def _fired_calls(report: ReplayReport) -> dict[str, set[int]]:
    fired: dict[str, set[int]] = {}
    for reminder in report.reminders:
        if _unbound(reminder):
            continue
        for trigger in reminder.trigger.split("+"):
            trigger = _TRIGGER_ALIASES.get(trigger, trigger)
            fired.setdefault(trigger, set()).add(reminder.step)
    return fired


def score_reports(reports: list[ReplayReport], labels: dict[str, list[set[str]]]) -> Score:
    """Score every report whose instance has labels (the others are listed as
    unlabelled and left out of every figure)."""
    score = Score()
    for report in reports:
        run_labels = labels.get(report.instance)
        if run_labels is None or len(run_labels) != report.tool_calls:
            score.unlabelled.append(report.instance)
            continue
        score.runs += 1
        score.calls += report.tool_calls
        for label_set in run_labels:
            score.label_counts.update(label_set)
        for reminder in report.reminders:
            if _unbound(reminder):
                score.unbound[reminder.trigger] += 1
                continue
            score.reminders += 1
            for trigger in reminder.trigger.split("+"):
                trigger = _TRIGGER_ALIASES.get(trigger, trigger)
                if trigger in score.triggers:
                    score.triggers[trigger].reminders += 1
                else:
                    score.other_triggers[trigger] += 1
        fired = _fired_calls(report)
        for step in set().union(*fired.values()) if fired else set():
            for label in _QUIET_LABELS:
                if label in run_labels[step - 1]:
                    score.at_quiet[label] += 1
        for name, targets in TARGETS.items():
            t = score.triggers[name]
            steps = fired.get(name, set())
            labelled = {k for k, ls in enumerate(run_labels, 1) if ls & targets}
            t.labelled += len(labelled)
            t.fired += len(steps)
            t.hits += len(steps & labelled)
    return score


def format_score(score: Score) -> str:
    """The readable table (``clio-acp replay --score``)."""
    data = score.to_dict()
    lines = [
        f"scored {data['runs']} runs, {data['calls']} tool calls; labels: "
        + ", ".join(f"{k} {v}" for k, v in sorted(data["labels"].items())),
        f"{'trigger':<22} {'labelled':>8} {'fired':>6} {'recall':>8} {'precision':>10} "
        f"{'per100':>7}",
    ]

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}%"

    for name, t in data["triggers"].items():
        labelled = "-" if t["labelled"] is None else str(t["labelled"])
        lines.append(
            f"{name:<22} {labelled:>8} {t['firedAtCalls']:>6} {fmt(t['recallPct']):>8} "
            f"{fmt(t['precisionPct']):>10} {t['per100']:>7.2f}"
        )
    quiet = data["remindersAtQuietCalls"]
    lines.append(
        f"reminders at edit_changed_outcome calls: {quiet['edit_changed_outcome']}; "
        f"at informative exits: {quiet['informative']}"
    )
    if data["otherTriggers"] or data["notCallBound"]:
        lines.append(
            "not scored: "
            + ", ".join(
                f"{k} {v}" for k, v in {**data["otherTriggers"], **data["notCallBound"]}.items()
            )
        )
    lines.append(
        f"TOTAL: {data['reminders']} call-bound reminders, {data['remindersPer100']} per 100 calls"
    )
    if data["unlabelled"]:
        lines.append(f"no labels for: {', '.join(data['unlabelled'])}")
    return "\n".join(lines)
