"""The A/B harness itself (MEMORY_SPEC §9): report arithmetic, the alwaysNoisyRegression
verdict, runner failures, the baseline invariant and task files."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from clio_acp.eval.harness import EvalError, RunnerOutput, check_target, run_matrix
from clio_acp.eval.report import (
    REGRESSION_TEXT,
    TrialResult,
    build_report,
    format_report,
    variant_reports,
)
from clio_acp.eval.tasks import DEFAULT_TASK_IDS, TaskError, load_tasks
from clio_acp.memory.telemetry import StepRecord


def row(decision: str = "injected", cited: int = 1, inp: int = 10, out: int = 5, ms: float = 7.0):
    return StepRecord.model_validate(
        {
            "version": 2,
            "at": "2026-01-01T00:00:00.000Z",
            "triggerReasons": ["repeated_failure"],
            "tier": "llm",
            "bankDelta": {
                k: {"added": 0, "updated": 0, "deleted": 0}
                for k in ("status", "knowledge", "procedural")
            },
            "decision": decision,
            "reason": "intervened" if decision == "injected" else "model_silent",
            "bankOperations": 0,
            "droppedOperations": 0,
            "citedEntries": cited,
            "tokenCost": {"input": inp, "output": out, "total": inp + out},
            "latencyMs": ms,
            "targetId": "t",
            "modelId": "m",
        }
    )


def by_variant(trials):
    return {r.variant: r for r in variant_reports(trials)}


def test_trial_metrics_sum_memory_rows_into_totals():
    t = TrialResult(
        "llm", "a", True, 100, 20, 50.0, [row(), row(cited=0), row("silent", 0, 3, 2, 1.0)]
    )
    assert t.memory_tokens == 15 + 15 + 5
    assert t.memory_latency_ms == 15.0
    assert (t.injected, t.cited) == (2, 1)
    assert t.total_tokens == 120 + 35
    assert t.total_latency_ms == 65.0


def test_added_figures_are_per_task_relative_to_that_tasks_baseline():
    trials = [
        TrialResult("baseline", "a", True, 100, 0, 10.0),
        TrialResult("baseline", "b", False, 200, 0, 20.0),
        TrialResult("rules", "a", True, 110, 0, 12.0),
        TrialResult("rules", "b", True, 190, 0, 25.0),
        TrialResult("rules", "c", True, 40, 0, 4.0),  # no baseline trial: full totals
    ]
    rules = by_variant(trials)["rules"]
    assert rules.total_tokens == 340
    assert rules.added_tokens == (110 - 100) + (190 - 200) + 40
    assert math.isclose(rules.added_latency_ms, 2.0 + 5.0 + 4.0)
    assert by_variant(trials)["baseline"].added_tokens == 0


def test_rates_and_uncited_count():
    trials = [
        TrialResult("baseline", "a", False),
        TrialResult("baseline", "b", True),
        TrialResult("llm", "a", True, rows=[row(), row(cited=0), row(cited=0)]),
        TrialResult("llm", "b", False, rows=[row("silent", 0)]),
    ]
    llm = by_variant(trials)["llm"]
    assert (llm.runs, llm.passed, llm.pass_rate) == (2, 1, 0.5)
    assert (llm.injected, llm.cited, llm.uncited) == (3, 1, 2)
    assert llm.reminders_per_task == 1.5
    assert math.isclose(llm.cited_reminder_rate, 1 / 3)
    base = by_variant(trials)["baseline"]
    assert base.cited_reminder_rate == 0.0  # no reminders: 0, not a division error


def test_injecting_every_task_without_a_gain_is_a_regression_even_when_cited():
    # The gain is read from the 95 % intervals: 20/20 against 10/20 is one, 10/20 is not.
    ids = [f"t{i}" for i in range(20)]
    trials = [TrialResult("baseline", t, i % 2 == 0) for i, t in enumerate(ids)]
    trials += [TrialResult("rules", t, i % 2 == 0, rows=[row()]) for i, t in enumerate(ids)]
    trials += [TrialResult("llm", t, True, rows=[row()], key_fact_seen=True) for t in ids]
    reports = by_variant(trials)
    assert reports["llm"].verdict == "better" and reports["rules"].verdict == "inconclusive"
    assert reports["rules"].cited_reminder_rate == 1.0
    assert reports["rules"].always_noisy_regression is True
    assert reports["llm"].always_noisy_regression is False  # pass-rate gain
    assert reports["baseline"].always_noisy_regression is False
    report = build_report(trials, target={"id": "t", "model": "m"}, tasks=ids)
    assert report["alwaysNoisyRegression"] is True
    assert report["verdict"] == REGRESSION_TEXT and report["verdictCode"] == "alwaysNoisyRegression"
    assert format_report(report).rstrip().endswith(REGRESSION_TEXT)


def test_fewer_injections_than_runs_is_measured_not_noisy():
    trials = [
        TrialResult("baseline", "a", True),
        TrialResult("baseline", "b", True),
        TrialResult("rules", "a", True, rows=[row()]),
        TrialResult("rules", "b", True),
    ]
    assert by_variant(trials)["rules"].always_noisy_regression is False
    report = build_report(trials, target={"id": "t", "model": "m"}, tasks=["a", "b"])
    assert report["verdict"] == "measured"
    keys = set(report["variants"][0])
    assert {
        "runs",
        "passed",
        "passRate",
        "injected",
        "cited",
        "uncited",
        "remindersPerTask",
        "citedReminderRate",
        "totalTokens",
        "addedTokens",
        "totalLatencyMs",
        "addedLatencyMs",
        "alwaysNoisyRegression",
    } <= keys


def _tasks():
    return load_tasks(None, list(DEFAULT_TASK_IDS))


def _plan(variants=("baseline", "rules", "llm")):
    """(variant, task id, distractor) in run order for the default tasks, one seed."""
    return [(v, t, d) for v in variants for t in DEFAULT_TASK_IDS for d in (False, True)]


async def test_a_raising_runner_gives_a_failed_trial_and_the_matrix_continues():
    calls = []

    async def runner(task, variant, seed):
        calls.append((variant, task.id, task.is_distractor))
        if variant == "rules" and task.id == DEFAULT_TASK_IDS[0]:
            raise RuntimeError("workspace exploded")
        rows = [row()] if variant != "baseline" else []
        return RunnerOutput(
            passed=True,
            action_input_tokens=5,
            action_output_tokens=1,
            action_latency_ms=2.0,
            rows=rows,
        )

    trials = await run_matrix(_tasks(), runner)
    assert calls == _plan()
    failed = [t for t in trials if t.error]
    assert len(failed) == 2  # the task and its distractor variant
    bad = failed[0]
    assert (bad.variant, bad.task_id, bad.passed) == ("rules", DEFAULT_TASK_IDS[0], False)
    assert "workspace exploded" in bad.error
    assert bad.total_tokens == 0 and bad.total_latency_ms == 0 and bad.rows == []
    assert "error" in bad.to_dict()


async def test_invalid_runner_output_is_a_failed_trial():
    async def runner(task, variant, seed):
        return {
            "passed": True,
            "action_input_tokens": -1,
            "action_output_tokens": 0,
            "action_latency_ms": 1.0,
        }

    trials = await run_matrix(_tasks(), runner, variants=["rules"])
    assert len(trials) == 6 and all(t.error and not t.passed for t in trials)


async def test_non_finite_latency_is_rejected():
    async def runner(task, variant, seed):
        return RunnerOutput(
            passed=True,
            action_input_tokens=0,
            action_output_tokens=0,
            action_latency_ms=float("inf"),
        )

    trials = await run_matrix(_tasks(), runner, variants=["baseline"])
    assert all(t.error for t in trials)


async def test_a_baseline_trial_with_memory_rows_is_an_error():
    async def runner(task, variant, seed):
        return RunnerOutput(
            passed=True,
            action_input_tokens=0,
            action_output_tokens=0,
            action_latency_ms=0,
            rows=[row("silent", 0)],
        )

    with pytest.raises(EvalError, match="baseline"):
        await run_matrix(_tasks(), runner)


async def test_variants_always_run_in_the_fixed_order():
    seen = []

    async def runner(task, variant, seed):
        seen.append(variant)
        return RunnerOutput(
            passed=True, action_input_tokens=0, action_output_tokens=0, action_latency_ms=0
        )

    await run_matrix(_tasks(), runner, variants=["llm", "baseline"])
    assert seen == ["baseline"] * 6 + ["llm"] * 6


async def test_fewer_than_three_tasks_is_refused():
    async def runner(task, variant, seed):  # pragma: no cover - never called
        raise AssertionError

    with pytest.raises(TaskError, match="at least 3"):
        await run_matrix(_tasks()[:2], runner)


def test_target_needs_nonblank_id_and_model():
    assert check_target({"id": " t ", "model": "m"}) == {"id": "t", "model": "m"}
    with pytest.raises(EvalError):
        check_target({"id": "t", "model": "  "})
    with pytest.raises(EvalError):
        check_target({"id": "", "model": "m"})


def test_default_tasks_ship_in_the_spec_order():
    tasks = load_tasks()
    assert [t.id for t in tasks][:3] == list(DEFAULT_TASK_IDS)
    assert all(t.scripted is not None for t in tasks)


def _write_task(folder: Path, tid: str, extra: str = "") -> None:
    (folder / f"{tid}.yaml").write_text(
        f"id: {tid}\nturns:\n  - prompt: hi\nfiles: {{a.txt: x}}\ncheck: {{command: 'true'}}\n"
        + extra,
        encoding="utf-8",
    )


def test_user_task_folder_loads_and_duplicates_are_refused(tmp_path):
    for tid in ("one", "two", "three"):
        _write_task(tmp_path, tid)
    assert [t.id for t in load_tasks(tmp_path)] == ["one", "three", "two"]
    assert [t.id for t in load_tasks(tmp_path, ["two", "one", "three"])] == ["two", "one", "three"]
    (tmp_path / "dup.yaml").write_text(
        (tmp_path / "one.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    with pytest.raises(TaskError, match="duplicate"):
        load_tasks(tmp_path)


def test_bad_task_file_names_the_file_and_field(tmp_path):
    (tmp_path / "bad.yaml").write_text("id: x\nturns: []\ncheck: {command: ok}\n")
    with pytest.raises(TaskError, match=r"bad\.yaml: turns"):
        load_tasks(tmp_path)


def test_task_file_paths_must_stay_inside_the_workspace(tmp_path):
    _write_task(tmp_path, "one", "")
    (tmp_path / "evil.yaml").write_text(
        "id: evil\nturns: [{prompt: hi}]\nfiles: {'../x': y}\ncheck: {command: 'true'}\n"
    )
    with pytest.raises(TaskError, match="relative inside the workspace"):
        load_tasks(tmp_path)


async def test_a_trial_over_its_time_budget_is_a_failed_trial_and_the_matrix_continues(tmp_path):
    from clio_acp.eval.harness import ScriptedTarget, SessionRunner
    from clio_acp.models.scripted import Reply

    class SlowTarget(ScriptedTarget):
        async def prepare(self, task, seed=0):
            await super().prepare(task, seed)
            inner = self.agent
            # The first trial's model never answers in time; the others (its own
            # distractor variant included) answer normally.
            self.server.responder = (
                (lambda body: Reply(text="late", delay=30.0))
                if task.id == "repeat-failure-recovery" and not task.is_distractor
                else inner
            )

    target = SlowTarget()
    try:
        runner = SessionRunner(target, trial_timeout_s=4.0)
        trials = await run_matrix(_tasks(), runner, variants=["baseline"])
    finally:
        await target.aclose()
    assert [(t.task_id, t.distractor) for t in trials] == [(t, d) for _, t, d in _plan(["x"])]
    assert trials[0].error and "timed out" in trials[0].error and not trials[0].passed
    assert [t.error for t in trials[1:]] == [None] * (len(trials) - 1)  # only that trial
    assert trials[4].passed and trials[4].error is None  # healthy task still ran


async def test_an_edit_and_rerun_in_the_same_second_runs_the_new_code(tmp_path, monkeypatch):
    # silent-edit-wrong-copy edits calc.py ("a - b" -> "a + b", same size) and reruns
    # test_calc.py within a second; with bytecode caches on (a usual machine) the rerun
    # imported the stale calc.pyc and the llm variant failed 2 of 3 seeds.
    from clio_acp.eval.harness import ScriptedTarget, SessionRunner

    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    [task] = [t for t in load_tasks() if t.id == "silent-edit-wrong-copy"]
    target = ScriptedTarget()
    try:
        runner = SessionRunner(target, keep=tmp_path)
        outcomes = [(await runner(task, "llm", seed)).passed for seed in range(3)]
    finally:
        await target.aclose()
    assert outcomes == [True, True, True]
    assert not list(tmp_path.rglob("__pycache__"))
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ  # restored after each trial
