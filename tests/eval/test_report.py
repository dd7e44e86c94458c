"""The A/B report's intervals and verdicts (MEMORY_SPEC §9, issue 15 item 3)."""

from __future__ import annotations

import math

import pytest

from clio_acp.eval.report import (
    TrialResult,
    build_report,
    compare_intervals,
    format_report,
    variant_reports,
    wilson_interval,
)


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(5, 10)
    assert math.isclose(lo, 0.2366, abs_tol=1e-4) and math.isclose(hi, 0.7634, abs_tol=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert math.isclose(lo, 0.7225, abs_tol=1e-4) and math.isclose(hi, 1.0)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(0, 20)[1] < 0.17
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("mine", "base", "verdict"),
    [
        ((0.8, 1.0), (0.2, 0.7), "better"),
        ((0.1, 0.3), (0.4, 0.9), "worse"),
        ((0.5, 0.9), (0.2, 0.6), "inconclusive"),
    ],
)
def test_intervals_decide_the_comparison(mine, base, verdict):
    assert compare_intervals(mine, base) == verdict


def _matrix(base_pass, variant_pass, *, distractor_pass=None, key=True, variant="llm"):
    trials = []
    for i, (b, v) in enumerate(zip(base_pass, variant_pass, strict=True)):
        trials.append(TrialResult("baseline", f"t{i}", b))
        trials.append(TrialResult(variant, f"t{i}", v, key_fact_seen=key))
    for i, d in enumerate(distractor_pass or []):
        trials.append(TrialResult("baseline", f"t{i}", False, distractor=True))
        trials.append(TrialResult(variant, f"t{i}", d, distractor=True, key_fact_seen=False))
    return trials


def test_a_worse_variant_is_a_pass_rate_regression():
    trials = _matrix([True] * 20, [False] * 20)
    report = build_report(trials, target={"id": "t", "model": "m"}, tasks=[])
    assert report["variants"][1]["verdict"] == "worse"
    assert report["verdictCode"] == "passRateRegression"
    assert report["verdict"].startswith("REGRESSION")


def test_a_distractor_that_helps_invalidates_the_run():
    # memory without the key fact made distractor trials pass: the harness measured
    # presence, not content
    trials = _matrix([False] * 20, [True] * 20, distractor_pass=[True] * 20)
    reports = {r.variant: r for r in variant_reports(trials)}
    assert reports["llm"].distractor_verdict == "better"
    assert reports["llm"].unexplained == 20
    report = build_report(trials, target={"id": "t", "model": "m"}, tasks=[])
    assert report["verdictCode"] == "distractorLeak"


def test_differences_are_explained_only_by_the_key_fact():
    explained = {r.variant: r for r in variant_reports(_matrix([False] * 3, [True] * 3))}
    assert explained["llm"].unexplained == 0 and explained["llm"].key_fact_runs == 3
    unexplained = _matrix([False] * 3, [True] * 3, key=False)
    assert {r.variant: r for r in variant_reports(unexplained)}["llm"].unexplained == 3


def test_pass_rates_count_main_trials_and_distractors_apart():
    trials = _matrix([False, True], [True, True], distractor_pass=[False, False])
    llm = {r.variant: r for r in variant_reports(trials)}["llm"]
    assert (llm.runs, llm.passed, llm.distractor_runs, llm.distractor_passed) == (2, 2, 2, 0)


def test_added_figures_pair_trials_by_task_distractor_and_seed():
    trials = [
        TrialResult("baseline", "a", True, 100, seed=0),
        TrialResult("baseline", "a", True, 300, seed=1),
        TrialResult("rules", "a", True, 150, seed=0),
        TrialResult("rules", "a", True, 310, seed=1),
    ]
    rules = {r.variant: r for r in variant_reports(trials)}["rules"]
    assert rules.added_tokens == 50 + 10


def test_negative_reminders_are_counted():
    trials = [
        TrialResult("baseline", "n", True, negative=True),
        TrialResult("rules", "n", True, negative=True),
    ]
    from tests.eval.test_eval_harness import row

    trials.append(TrialResult("llm", "n", True, negative=True, rows=[row(), row()]))
    llm = {r.variant: r for r in variant_reports(trials)}["llm"]
    assert (llm.negative_runs, llm.negative_injected) == (1, 2)


def test_text_report_prints_intervals_per_variant_and_the_task_matrix():
    trials = _matrix([False] * 4, [True] * 4, distractor_pass=[False] * 4)
    report = build_report(trials, target={"id": "t", "model": "m"}, tasks=["t0", "t1", "t2", "t3"])
    text = format_report(report)
    assert "95% CI" in text
    lo, hi = report["variants"][1]["passRateInterval"]
    assert f"[{lo:.2f}-{hi:.2f}]" in text
    assert any(
        line.startswith("t0 ") and "0/1" in line and "1/1" in line for line in text.split("\n")
    )
    assert text.rstrip().endswith(report["verdict"])
