"""``clio-acp eval ab`` end to end: real sessions against the built-in scripted model,
in a child process (issue 10 item 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clio_acp.eval.tasks import DEFAULT_TASK_IDS


def test_eval_ab_scripted_json_runs_every_variant_over_the_default_tasks(run_cli, tmp_path):
    keep = tmp_path / "trials"
    proc = run_cli("eval", "ab", "--scripted", "--json", "--keep", str(keep), timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["target"] == {"id": "scripted", "model": "scripted-model"}
    assert report["tasks"] == list(DEFAULT_TASK_IDS)
    order = [(t["variant"], t["taskId"]) for t in report["trials"]]
    assert order == [(v, t) for v in ("baseline", "rules", "llm") for t in DEFAULT_TASK_IDS]
    assert not [t for t in report["trials"] if "error" in t], report["trials"]
    variants = {v["variant"]: v for v in report["variants"]}
    assert list(variants) == ["baseline", "rules", "llm"]
    # The scripted agent only recovers when memory speaks: baseline passes the
    # healthy task alone; the rules tier catches the blind retry and restores the
    # constraint after compaction, and stays silent on the healthy trajectory.
    trials = {(t["variant"], t["taskId"]): t for t in report["trials"]}
    assert [trials["baseline", t]["pass"] for t in DEFAULT_TASK_IDS] == [False, False, True]
    assert [trials["rules", t]["pass"] for t in DEFAULT_TASK_IDS] == [True, True, True]
    assert all(trials["baseline", t]["memoryRows"] == 0 for t in DEFAULT_TASK_IDS)
    assert trials["rules", "healthy-trajectory-silence"]["injected"] == 0
    assert trials["rules", "repeat-failure-recovery"]["injected"] >= 1
    assert trials["rules", "post-compaction-constraint"]["cited"] >= 1
    assert variants["rules"]["passRate"] == 1.0 > variants["baseline"]["passRate"]
    assert variants["rules"]["addedTokens"] > 0  # the reminders cost tokens
    assert report["verdict"] == "measured" and report["alwaysNoisyRegression"] is False
    # Each trial had its own workspace: the recovered one holds the config it wrote,
    # the protected test is unchanged in the rules trial.
    assert (keep / "rules-repeat-failure-recovery" / "workspace" / "config.ini").is_file()
    assert not (keep / "baseline-repeat-failure-recovery" / "workspace" / "config.ini").exists()
    # Trials never touch the user's own ledger.
    assert not (Path(os.environ["CLIO_ACP_STATE_DIR"]) / "memory" / "steps.jsonl").exists()


def test_eval_ab_table_and_user_tasks_folder(run_cli, tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    for tid, check in (("ok-1", "true"), ("ok-2", "test -f out.txt"), ("ko-3", "false")):
        (folder / f"{tid}.yaml").write_text(
            f"id: {tid}\nturns: [{{prompt: go}}]\ncheck: {{command: '{check}'}}\n"
            "scripted:\n  turns:\n    - steps:\n"
            "        - {write: out.txt, content: done}\n        - {say: written}\n",
            encoding="utf-8",
        )
    proc = run_cli(
        "eval", "ab", "--scripted", "--tasks", str(folder), "--variants", "baseline", timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("baseline ") and "ko-3" in line and " no " in line for line in lines)
    assert any(
        line.startswith("baseline ") and "ok-2" in line and " yes " in line for line in lines
    )
    assert lines[-1] == "measured"


def test_eval_ab_refuses_too_few_tasks_and_unknown_targets(run_cli, tmp_path):
    proc = run_cli("eval", "ab", "--scripted", "--task", DEFAULT_TASK_IDS[0])
    assert proc.returncode == 1 and "at least 3 tasks" in proc.stderr
    proc = run_cli("eval", "ab", "--target", "nowhere")
    assert proc.returncode == 1 and "unknown target 'nowhere'" in proc.stderr
