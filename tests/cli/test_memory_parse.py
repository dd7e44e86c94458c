"""``clio-acp memory parse``: the spec's outcome for every §2 vector the CLI can
express, and exit 2 with a clear message for bad input. The command runs in this
process (``invoke_cli``); the output-encoding regression runs it as a real
subprocess, since only a real stdout refuses a lone surrogate."""

from __future__ import annotations

import json

import pytest

from tests.memory.vectors import BANKS, CLI_UNSUPPORTED, VECTORS, C, E

CLI_VECTORS = [v for v in VECTORS if v["id"] not in CLI_UNSUPPORTED]


def _bank_file(tmp_path, name):
    path = tmp_path / f"bank-{name}.json"
    path.write_text(json.dumps(BANKS[name]), encoding="utf-8")
    return path


@pytest.mark.parametrize("vector", CLI_VECTORS, ids=[v["id"] for v in CLI_VECTORS])
def test_memory_parse_gives_the_spec_outcome(vector, invoke_cli, tmp_path):
    args = ["memory", "parse", "--bank", str(_bank_file(tmp_path, vector.get("bank", "B")))]
    args += ["--trigger", vector.get("trigger", "interval")]
    if "task" in vector:
        args += ["--task", vector["task"]]
    if vector.get("suppress"):
        args += ["--suppress"]
    if vector.get("previous_reminder") is not None:
        args += ["--previous-reminder", vector["previous_reminder"]]
    proc = invoke_cli(*args, input=vector["response"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {
        "decision",
        "reason",
        "reminder",
        "bank_operations",
        "dropped_operations",
        "bank",
    }
    assert (out["decision"], out["reason"]) == (vector["decision"], vector["reason"])
    if "bank_operations" in vector:
        assert out["bank_operations"] == vector["bank_operations"]
    if "dropped" in vector:
        assert out["dropped_operations"] == vector["dropped"]
    if "reminder" in vector:
        assert out["reminder"] == vector["reminder"]
    bank = out["bank"]
    if vector.get("bank_unchanged"):
        assert bank == BANKS[vector.get("bank", "B")]
    if "knowledge" in vector:
        assert [e["content"] for e in bank["knowledge"]] == vector["knowledge"]
    if "procedural" in vector:
        assert [e["content"] for e in bank["procedural"]] == vector["procedural"]
    if "status" in vector:
        assert bank["status"]["content"] == vector["status"]
    if "ids" in vector:
        ids = [e["id"] for e in bank["knowledge"] + bank["procedural"]]
        ids += [bank["status"]["id"]] if bank["status"] else []
        assert sorted(ids) == sorted(vector["ids"])
    for entry_id, count in vector.get("injections", {}).items():
        (entry,) = [e for e in bank["knowledge"] + bank["procedural"] if e["id"] == entry_id]
        assert entry["injectionCount"] == count


def test_memory_parse_without_a_bank_starts_fresh_and_explains(invoke_cli, tmp_path):
    proc = invoke_cli("memory", "parse", "--explain", input=C("[]", "[tm-k-1] x"), cwd=tmp_path)
    out = json.loads(proc.stdout)
    assert (out["decision"], out["reason"], out["cited"]) == ("gated", "uncited", [])
    assert out["bank"] == BANKS["fresh"]


def test_memory_parse_max_tokens_sets_the_reminder_cap(invoke_cli, tmp_path):
    body = "[tm-k-1] " + "x" * 60
    args = ("memory", "parse", "--bank", str(_bank_file(tmp_path, "B")))
    small = json.loads(invoke_cli(*args, "--max-tokens", "10", input=C("[]", body)).stdout)
    large = json.loads(invoke_cli(*args, "--max-tokens", "30", input=C("[]", body)).stdout)
    assert small["reason"] == "over_budget" and large["reason"] == "intervened"


def test_memory_parse_trajectory_feeds_the_resolved_failure_gate(invoke_cli, tmp_path):
    snapshot = json.loads(json.dumps(BANKS["B"]))
    snapshot["procedural"] = [
        dict(
            snapshot["knowledge"][0],
            id="tm-p-2",
            kind="procedural",
            content="run_command{} failed 2 time(s).",
        )
    ]
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps(snapshot))
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps([{"step": 3, "callDescription": "run_command{}", "outcome": "ok"}]))
    proc = invoke_cli(
        "memory",
        "parse",
        "--bank",
        str(bank),
        "--trajectory",
        str(steps),
        input=C("[]", "[tm-p-2] stop rerunning it"),
        cwd=tmp_path,
    )
    assert json.loads(proc.stdout)["reason"] == "resolved_failure"


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ["--bank", "missing.json"], "cannot read bank file"),
        ("{not json", ["--bank", "bank.json"], "not valid JSON"),
        ("[1, 2]", ["--bank", "bank.json"], "not a snapshot object"),
        ('{"version": 9}', ["--bank", "bank.json"], "not a valid snapshot"),
        (
            '{"version": 1, "knowledge": [{"id": "tm-k-1"}]}',
            ["--bank", "bank.json"],
            "not a valid snapshot",
        ),
        (None, ["--max-tokens", "0"], "--max-tokens"),
        (None, ["--max-tokens", "lots"], "--max-tokens"),
        (None, ["--trigger", "loop"], "--trigger"),
        ('{"a": 1}', ["--trajectory", "bank.json"], "not a JSON array"),
        (None, ["--workspace", "nowhere"], "not a directory"),
    ],
)
def test_memory_parse_bad_input_exits_2_with_a_message(invoke_cli, tmp_path, setup, args, message):
    if setup is not None:
        (tmp_path / "bank.json").write_text(setup)
    proc = invoke_cli("memory", "parse", *args, input=E("[]"), cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stdout == ""


# -- regressions from adversarial input ----------------------------------------


DEEP_JSON = "[" * 100_000


def test_memory_parse_cli_prints_a_lone_surrogate_escape_without_traceback(run_cli):
    answer = (
        '<operations>[{"op":"save_knowledge","content":"x\\ud800y"}]</operations>\n'
        "<no_intervention/>"
    )
    done = run_cli("memory", "parse", input=answer)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["bank"]["knowledge"][0]["content"] == "x\ufffdy"


@pytest.mark.parametrize("flag", ["--bank", "--trajectory"])
def test_memory_parse_deeply_nested_input_file_is_a_usage_error(invoke_cli, tmp_path, flag):
    path = tmp_path / "deep.json"
    path.write_text(DEEP_JSON, encoding="utf-8")
    done = invoke_cli("memory", "parse", flag, str(path), input="<operations>[]</operations>")
    assert done.returncode == 2
    assert "is not valid JSON" in done.stderr
    assert "Traceback" not in done.stderr
