"""Scoring reminders against hand labels (issue 14 item 4), and the figures the
rules tier reaches on the shared real runs (pinned so a regression fails)."""

from __future__ import annotations

import json

import pytest

from clio_acp.agent.replay import ReplayReminder, ReplayReport
from clio_acp.eval.labels import LabelError, load_labels, score_reports
from tests.conftest import REPO_ROOT

LABELS = REPO_ROOT / "tests" / "data" / "trajectory_labels.json"


def _report(instance: str, calls: int, reminders: list[tuple[int, str, str]]) -> ReplayReport:
    report = ReplayReport("f", "mini-swe-agent", instance, tool_calls=calls)
    report.reminders = [ReplayReminder(s, ch, [], "x", trig) for s, ch, trig in reminders]
    return report


def test_recall_precision_and_rate_per_trigger():
    labels = {
        "run": [
            {"clean"},
            {"failure"},
            {"blind_retry"},
            {"unchanged_after_edit"},
            {"edit_changed_outcome"},
            {"informative"},
            {"environment", "blind_retry"},
            {"unchanged_after_edit"},
        ]
    }
    report = _report(
        "run",
        8,
        [
            (3, "annotation", "repeated_failure"),
            (4, "annotation", "unchanged_after_edit"),
            (5, "annotation", "unchanged_after_edit"),  # wrong: the outcome changed
            (7, "stop", "loop_signal"),
            (0, "restore", "post_compaction"),  # not call-bound
        ],
    )
    score = score_reports([report], labels).to_dict()
    rf = score["triggers"]["repeated_failure"]
    assert (rf["labelled"], rf["firedAtCalls"], rf["recallPct"], rf["precisionPct"]) == (
        2,
        2,
        100.0,
        100.0,
    )
    ua = score["triggers"]["unchanged_after_edit"]
    assert (ua["recallPct"], ua["precisionPct"]) == (50.0, 50.0)
    assert score["triggers"]["environment"]["recallPct"] == 0.0
    assert score["remindersAtQuietCalls"] == {"edit_changed_outcome": 1, "informative": 0}
    assert score["reminders"] == 4 and score["remindersPer100"] == 50.0
    assert score["notCallBound"] == {"post_compaction": 1}


def test_runs_without_labels_are_listed_and_left_out():
    score = score_reports([_report("other", 3, [(1, "annotation", "environment")])], {})
    assert score.unlabelled == ["other"] and score.calls == 0


def test_labels_file_covers_every_call_with_the_vocabulary():
    data = json.loads(LABELS.read_text())
    vocabulary = set(data["vocabulary"])
    total = 0
    for run in data["runs"].values():
        assert len(run["labels"]) == run["calls"]
        total += run["calls"]
        for label in run["labels"]:
            assert set(label.split("+")) <= vocabulary
    assert total == 1420 and len(data["runs"]) == 24


def test_a_malformed_labels_file_is_refused(tmp_path):
    bad = tmp_path / "labels.json"
    bad.write_text('{"runs": {"x": {"calls": 2, "labels": ["clean"]}}}')
    with pytest.raises(LabelError, match="labels do not match"):
        load_labels(bad)
    bad.write_text("nope")
    with pytest.raises(LabelError, match="not a labels file"):
        load_labels(bad)
