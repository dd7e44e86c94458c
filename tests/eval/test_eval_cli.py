"""``clio-acp eval ab`` end to end: real sessions against the built-in scripted model,
in a child process (issue 10 item 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clio_acp.eval.tasks import DEFAULT_TASK_IDS, load_tasks


def test_eval_ab_scripted_measures_content_not_presence(invoke_cli, tmp_path):
    # Issue 15 "Done when": over every shipped task (one seed), baseline, rules and llm
    # differ only where the memory text carried the task's key fact; every distractor
    # variant scores as the baseline; the report prints the intervals.
    keep = tmp_path / "trials"
    proc = invoke_cli("eval", "ab", "--scripted", "--json", "--seeds", "1", "--keep", str(keep))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    tasks = {t.id: t for t in load_tasks()}
    assert report["target"] == {"id": "scripted", "model": "scripted-model"}
    assert report["tasks"][:3] == list(DEFAULT_TASK_IDS) and set(report["tasks"]) == set(tasks)
    assert not [t for t in report["trials"] if "error" in t], report["trials"]
    trials = {(t["variant"], t["taskId"], t["distractor"]): t for t in report["trials"]}
    assert len(trials) == 3 * 2 * len(tasks)
    for tid, task in tasks.items():
        base = trials["baseline", tid, False]
        assert base["memoryRows"] == 0 and base["memorySeen"] is False
        for variant in ("rules", "llm"):
            main = trials[variant, tid, False]
            side = trials[variant, tid, True]
            # a win exactly where expected, and only with the key fact in memory
            assert main["pass"] == (base["pass"] or variant in task.expected_winners), (
                variant,
                tid,
            )
            if main["pass"] != base["pass"]:
                assert main["keyFactSeen"] is True, (variant, tid)
            assert side["pass"] == trials["baseline", tid, True]["pass"], (variant, tid)
            assert side["keyFactSeen"] is False, (variant, tid)
            if task.negative:
                assert main["injected"] == 0, (variant, tid)  # silence on healthy runs
    # memory did speak in the distractors that are there to make it speak
    assert trials["rules", "post-compaction-constraint", True]["memorySeen"] is True
    assert trials["llm", "silent-edit-sed", True]["memorySeen"] is True
    assert trials["rules", "healthy-trajectory-silence", True]["memorySeen"] is True
    variants = {v["variant"]: v for v in report["variants"]}
    assert variants["llm"]["passed"] > variants["rules"]["passed"] > variants["baseline"]["passed"]
    for v in variants.values():
        assert v["unexplainedDifferences"] == 0
        assert v["distractorPassed"] == variants["baseline"]["distractorPassed"]
        lo, hi = v["passRateInterval"]
        assert 0 <= lo <= v["passRate"] <= hi <= 1
    assert variants["llm"]["verdict"] == "better"
    assert report["verdictCode"] == "measured" and report["alwaysNoisyRegression"] is False
    # each trial had its own workspace
    assert (keep / "rules-repeat-failure-recovery" / "workspace" / "config.ini").is_file()
    assert not (keep / "baseline-repeat-failure-recovery" / "workspace" / "config.ini").exists()
    assert "a + b" in (keep / "llm-silent-edit-sed" / "workspace" / "calc.py").read_text()
    # Trials never touch the user's own ledger.
    assert not (Path(os.environ["CLIO_ACP_STATE_DIR"]) / "memory" / "steps.jsonl").exists()


def test_eval_ab_text_report_prints_intervals_and_the_task_matrix(invoke_cli):
    proc = invoke_cli(
        "eval",
        "ab",
        "--scripted",
        # Three seeds: the rules tier now also speaks once per task at its end (the
        # §13.6 completion check), so with two seeds its 6/6 vs 2/6 gain is not yet
        # outside the intervals and the always-noisy rule would fire.
        "--seeds",
        "3",
        "--variants",
        "baseline,rules",
        *[f"--task={t}" for t in DEFAULT_TASK_IDS],
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("repeat-failure-recovery") and "0/3" in line for line in lines)
    assert any("95% CI" in line for line in lines)
    assert any(line.startswith("rules ") and "[" in line and "]" in line for line in lines)
    assert "seed 1" in proc.stderr
    assert lines[-1] == "measured"


def test_eval_ab_table_and_user_tasks_folder(invoke_cli, tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    for tid, check in (("ok-1", "true"), ("ok-2", "test -f out.txt"), ("ko-3", "false")):
        (folder / f"{tid}.yaml").write_text(
            f"id: {tid}\nturns: [{{prompt: go}}]\ncheck: {{command: '{check}'}}\n"
            "scripted:\n  turns:\n    - steps:\n"
            "        - {write: out.txt, content: done}\n        - {say: written}\n",
            encoding="utf-8",
        )
    proc = invoke_cli("eval", "ab", "--scripted", "--tasks", str(folder), "--variants", "baseline")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("ko-3 ") and "0/3" in line for line in lines)
    assert any(line.startswith("ok-2 ") and "3/3" in line for line in lines)
    assert lines[-1] == "measured"


def test_eval_ab_refuses_too_few_tasks_and_unknown_targets(invoke_cli, tmp_path):
    proc = invoke_cli("eval", "ab", "--scripted", "--task", DEFAULT_TASK_IDS[0])
    assert proc.returncode == 1 and "at least 3 tasks" in proc.stderr
    proc = invoke_cli("eval", "ab", "--target", "nowhere")
    assert proc.returncode == 1 and "unknown target 'nowhere'" in proc.stderr


def test_eval_ab_target_runs_the_same_tasks_on_a_configured_model(model_server, invoke_cli):
    # --target: the tasks run against a model from settings (here a loopback server
    # that answers every request with a short final answer); key facts are judged
    # from the memory text the session delivered, and each seed goes to chat.seed.
    from tests.support.model_server import Reply

    model_server.install_settings()
    model_server.default = Reply(text="Done.")
    proc = invoke_cli(
        "eval",
        "ab",
        "--target",
        "scripted",
        "--json",
        "--seeds",
        "2",
        "--variants",
        "baseline,rules",
        *[f"--task={t}" for t in DEFAULT_TASK_IDS],
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["target"] == {"id": "scripted", "model": "scripted-model"}
    assert len(report["trials"]) == 2 * len(DEFAULT_TASK_IDS) * 2 * 2
    seen = {
        (t["variant"], t["taskId"], t["distractor"]) for t in report["trials"] if t["keyFactSeen"]
    }
    # the rules tier restored "Never modify test_greet.py" after the compaction (the
    # model did not use it: it only ever says "Done.")
    assert seen == {("rules", "post-compaction-constraint", False)}
    seeds = {b.get("seed") for b in model_server.bodies if b.get("tools")}
    assert seeds == {0, 1}
