"""Scoring reminders against hand labels (issue 14 item 4), and the figures the
rules tier reaches on the shared real runs (pinned so a regression fails)."""

from __future__ import annotations

import json
import re

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


@pytest.mark.parametrize(
    "text", ['{"a": 1}', "[1, 2]", "{}", '{"runs": []}', '{"runs": {"x": {}}}']
)
def test_a_labels_file_of_another_shape_names_the_expected_one(tmp_path, text):
    # These used to read as "object of type 'int' has no len()" or, for {}, as an empty
    # labels set that scored nothing without a word.
    bad = tmp_path / "labels.json"
    bad.write_text(text)
    with pytest.raises(LabelError, match=re.escape('expected {"runs": {"<file>::<instance>"')):
        load_labels(bad)


async def test_figures_reached_on_the_shared_runs_are_pinned():
    """Issue 14 done-when, by these labels (regressions fail here; bench/memory_labels.py
    prints the same table)."""
    from clio_acp.agent.replay import replay_file
    from tests.conftest import SHARED

    traj = SHARED / "trajectories"
    files = [
        *sorted(traj.glob("mini-swe-agent-gemini3-swebv/*.traj.json")),
        traj / "openhands-swebl-gpt5" / "output.jsonl",
        *sorted(traj.glob("pma-tb2/*/*/trajectory_agent.steps.jsonl")),
    ]
    reports = []
    for path in files:
        reports += await replay_file(path)
    score = score_reports(reports, load_labels(LABELS)).to_dict()
    assert score["unlabelled"] == [] and score["calls"] == 1420
    t = score["triggers"]
    # Every blind retry caught at its second occurrence.
    assert t["repeated_failure"]["recallPct"] == 100.0
    assert t["repeated_failure"]["precisionPct"] == 100.0
    assert t["unchanged_after_edit"]["recallPct"] >= 82.6
    assert t["unchanged_after_edit"]["precisionPct"] >= 100.0
    assert t["environment"]["precisionPct"] >= 100.0
    assert t["recurring_problem"]["firedAtCalls"] == 0
    assert score["remindersAtQuietCalls"] == {"edit_changed_outcome": 0, "informative": 0}
    assert score["remindersPer100"] <= 1.98


def test_a_bare_instance_to_labels_mapping_is_accepted(tmp_path):
    path = tmp_path / "labels.json"
    path.write_text('{"run-a": ["clean", "blind_retry+environment"]}')
    assert load_labels(path) == {"run-a": [{"clean"}, {"blind_retry", "environment"}]}


def test_replay_score_cli_prints_the_table_and_refuses_bad_labels(invoke_cli, tmp_path):
    from tests.conftest import SHARED

    mini = SHARED / "trajectories" / "mini-swe-agent-gemini3-swebv"
    files = [
        str(mini / "django__django-16263.traj.json"),
        str(mini / "astropy__astropy-12907.traj.json"),
    ]
    proc = invoke_cli("replay", "--score", str(LABELS), *files)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("scored 2 runs, 97 tool calls")
    row = next(line for line in lines if line.startswith("repeated_failure"))
    assert row.split()[1:5] == ["1", "1", "100.0%", "100.0%"]
    assert lines[-1].startswith("TOTAL: ")
    as_json = invoke_cli("replay", "--json", "--score", str(LABELS), *files)
    data = json.loads(as_json.stdout)
    assert data["triggers"]["repeated_failure"]["recallPct"] == 100.0
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    refused = invoke_cli("replay", "--score", str(bad), *files)
    assert refused.returncode == 2 and "not a labels file" in refused.stderr
