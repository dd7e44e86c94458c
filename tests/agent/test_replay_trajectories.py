"""Replay of the real recorded trajectories (issue 3 item 7) and the replay command.

The trajectories are read from ``../shared/trajectories`` (never copied)."""

from __future__ import annotations

import json

import pytest

from clio_acp.agent.recordings import RecordingFormatError, detect_format, load_recordings
from clio_acp.agent.replay import replay_file
from tests.conftest import SHARED

TRAJ = SHARED / "trajectories"
MINI = TRAJ / "mini-swe-agent-gemini3-swebv"


def mini(name: str):
    return MINI / f"{name}.traj.json"


async def replay_one(path):
    (report,) = await replay_file(path)
    return report


def call_bound(report):
    """What memory said about calls (the once-per-task completion check aside)."""
    return [r for r in report.reminders if r.trigger != "completion_check"]


async def test_edit_then_rerun_loop_in_matplotlib_is_silent_when_the_outcome_changed():
    report = await replay_one(mini("matplotlib__matplotlib-23299"))
    # The trajectory really has many failing reruns of the same script…
    assert report.failures >= 10
    # …each after an edit. Only where the rerun failed exactly as before (call 17
    # after editing pyplot.py at 16) does memory speak (§13.1); every rerun whose
    # outcome changed stays silent.
    (note,) = call_bound(report)
    assert (note.step, note.trigger) == (17, "unchanged_after_edit")
    assert "`python reproduce_issue.py` failed exactly as at step 3" in note.text
    assert "lib/matplotlib/pyplot.py (step 16)" in note.text
    assert len(note.text) <= 300


async def test_blind_retry_in_django_16263_is_caught_at_call_12():
    report = await replay_one(mini("django__django-16263"))
    assert 11 in report.failure_steps and 12 in report.failure_steps
    first = report.reminders[0]
    assert first.step == 12
    assert first.channel == "annotation"
    assert first.trigger == "repeated_failure"
    assert "python reproduce_issue.py" in first.text
    assert "at step 11" in first.text
    assert "no such table: annotations_publisher" in first.text
    (cited,) = first.cited
    entry = next(e for e in report.bank["procedural"] if e["id"] == cited)
    assert entry["content"].startswith('bash{"command":"python reproduce_issue.py"} failed')
    # Nothing fires at call 11 (first occurrence) or earlier.
    assert all(r.step >= 12 for r in report.reminders)


async def test_identical_grep_no_match_in_sphinx_9711_is_informative_not_failure():
    report = await replay_one(mini("sphinx-doc__sphinx-9711"))
    assert {22, 23} <= set(report.informative_steps)
    assert 22 not in report.failure_steps and 23 not in report.failure_steps
    assert not [r for r in report.reminders if r.step in (22, 23)]
    assert not [
        e for e in report.bank["procedural"] if e["content"].startswith('bash{"command":"grep')
    ]


async def test_pylint_exit_16_builds_no_error_streak_and_no_failure_entries():
    report = await replay_one(mini("pylint-dev__pylint-8898"))
    recording = load_recordings(mini("pylint-dev__pylint-8898"))[0]
    exit16 = [c.index for c in recording.calls if c.exit_code == 16]
    assert len(exit16) >= 8
    assert set(exit16) <= set(report.informative_steps)
    assert not set(exit16) & set(report.failure_steps)
    assert not [e for e in report.bank["procedural"] if "pylint --bad-names" in e["content"]]
    assert not [r for r in report.reminders if r.step in exit16]


async def test_control_run_astropy_12907_yields_no_reminder():
    report = await replay_one(mini("astropy__astropy-12907"))
    assert report.failures == 0
    assert call_bound(report) == []


async def test_sphinx_7985_linkcheck_output_is_not_an_environment_fault():
    # Issue 14: linkcheck reporting the test document's broken links, and a quoting
    # slip ("index: command not found" from backticks in a heredoc), were blamed on
    # the environment and came back after compaction.
    report = await replay_one(mini("sphinx-doc__sphinx-7985"))
    assert report.environmental == []
    assert not [r for r in report.reminders if r.trigger == "environment"]


async def test_task_prompt_requirements_are_captured_without_a_model():
    report = await replay_one(mini("django__django-16263"))
    texts = [e["content"] for e in report.requirements]
    assert any("DO NOT MODIFY" in t for t in texts)


async def test_compaction_during_replay_offers_restore_with_status_free_rules_state():
    (report,) = await replay_file(mini("django__django-16560"), compact_every=50)
    restores = [r for r in report.reminders if r.channel == "restore"]
    assert restores
    assert restores[0].text.startswith("Memory: execution state restored after compaction:\n")
    assert "Requirement from the user" in restores[0].text


async def test_restore_of_django_16560_carries_goal_files_failure_constraints_not_boilerplate():
    # Issue 14 done-when: `clio-acp replay --compact-every 40` on django__django-16560.
    (report,) = await replay_file(mini("django__django-16560"), compact_every=40)
    restores = [r.text for r in report.reminders if r.channel == "restore"]
    assert len(restores) == 3
    goal = "Goal: Allow to customize the code attribute of ValidationError raised by"
    assert all(goal in text for text in restores)
    assert all("django/db/models/constraints.py" in text for text in restores)
    assert all("DO NOT MODIFY: Tests, configuration files" in text for text in restores)
    live = restores[1]  # after call 80: the rerun of reproduce_issue_v2.py still fails
    assert "Unresolved failures: `python reproduce_issue_v2.py` since step 47" in live
    assert "SyntaxError: '(' was never closed" in live
    for text in restores:
        for boilerplate in ("EXACTLY ONE", "THOUGHT", "COMPLETE_TASK_AND_SUBMIT", "subshell"):
            assert boilerplate not in text
        assert text.splitlines()[1].startswith("- [tm-s-")  # the status comes first


def test_openhands_adapter_reads_native_exit_codes():
    (recording,) = load_recordings(TRAJ / "openhands-swebl-gpt5" / "output.jsonl")
    assert recording.format == "openhands"
    calls = recording.calls
    assert calls[0].tool_name == "execute_bash" and calls[0].exit_code == 0
    assert any(c.kind == "edit" for c in calls)
    assert any(c.kind == "read" and c.is_error for c in calls)  # "ERROR: Invalid path"


def test_pma_adapter_splits_terminal_screen_per_keystroke():
    path = (
        TRAJ / "pma-tb2" / "sqlite-with-gcov" / "baseline-sonnet" / "trajectory_agent.steps.jsonl"
    )
    assert detect_format(path) == "pma"
    (recording,) = load_recordings(path)
    calls = recording.calls
    assert calls[0].args["keystrokes"] == "ls -la /app\n"
    assert "vendor" in calls[0].output and "sqlite-fossil" not in calls[0].output
    configure = next(c for c in calls if "./configure" in c.args.get("keystrokes", ""))
    assert configure.is_error and "No working C compiler" in configure.output


def test_pma_memory_log_is_refused_with_a_pointer_to_the_agent_log():
    path = TRAJ / "pma-tb2" / "regex-log" / "memory-v3-opus" / "trajectory_memory.steps.jsonl"
    with pytest.raises(RecordingFormatError, match="trajectory_agent"):
        detect_format(path)


def test_unknown_format_gives_a_clear_error(tmp_path):
    bogus = tmp_path / "x.jsonl"
    bogus.write_text('{"hello": 1}\n')
    with pytest.raises(RecordingFormatError, match="unknown trajectory format"):
        load_recordings(bogus)
    with pytest.raises(RecordingFormatError, match="unknown format 'swe'"):
        load_recordings(mini("astropy__astropy-12907"), "swe")


def test_a_bad_line_in_a_jsonl_recording_is_named_by_its_line(tmp_path):
    # The error used to quote the decoder's "line 1 column 1" whatever the file line was.
    agent_log = TRAJ / "pma-tb2" / "regex-log" / "baseline-sonnet" / "trajectory_agent.steps.jsonl"
    pma = tmp_path / "run" / "trajectory_agent.steps.jsonl"
    pma.parent.mkdir()
    pma.write_text("".join(agent_log.read_text().splitlines(True)[:3]) + "garbage{\n")
    with pytest.raises(RecordingFormatError, match=r"trajectory_agent\.steps\.jsonl:4: not a JSON"):
        load_recordings(pma, "pma")
    openhands = tmp_path / "output.jsonl"
    first = (TRAJ / "openhands-swebl-gpt5" / "output.jsonl").read_text().splitlines()[0]
    openhands.write_text(first + "\n\n{oops\n")
    with pytest.raises(RecordingFormatError, match=r"output\.jsonl:3: not a JSON"):
        load_recordings(openhands, "openhands")


def test_replay_cli_json_shape_per_file(invoke_cli):
    result = invoke_cli(
        "replay",
        "--json",
        str(mini("django__django-16263")),
        str(mini("astropy__astropy-12907")),
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2
    first = lines[0]
    assert set(first["reminders"][0]) == {"step", "channel", "cited", "text", "trigger"}
    assert first["reminders"][0]["step"] == 12
    assert first["summary"]["toolCalls"] == 78
    assert [r["trigger"] for r in lines[1]["reminders"]] == ["completion_check"]
    assert lines[1]["summary"]["failures"] == 0


def test_replay_cli_reports_bad_file_and_still_replays_the_others(invoke_cli, tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello\n")
    result = invoke_cli("replay", str(bogus), str(mini("astropy__astropy-12907")))
    assert result.returncode == 1
    assert "unknown trajectory format" in result.stderr
    assert "astropy__astropy-12907 (mini-swe-agent): 19 tool calls" in result.stdout
    assert "TOTAL: 1 files" in result.stdout


def test_replay_runs_the_llm_tier_when_a_memory_route_is_configured(model_server, invoke_cli):
    from tests.support.model_server import Reply, usage

    model_server.install_settings()
    model_server.push(
        Reply(
            text="<operations>[]</operations>\n"
            "<context_for_action>[tm-k-1] Keep the tests untouched.</context_for_action>",
            usage=usage(300, 20),
        )
    )
    model_server.default = Reply(
        text="<operations>[]</operations>\n<no_intervention/>", usage=usage(300, 5)
    )
    result = invoke_cli("replay", "--json", str(mini("django__django-16263")))
    assert result.returncode == 0, result.stderr
    (report,) = [json.loads(line) for line in result.stdout.splitlines()]
    llm = [r for r in report["reminders"] if r["channel"] == "reminder"]
    assert llm and llm[0]["text"] == "Memory: [tm-k-1] Keep the tests untouched."
    assert llm[0]["cited"] == ["tm-k-1"]
    assert report["telemetry"]["injected/intervened"] >= 2  # the rules annotation + the llm one
    assert len(model_server.bodies) >= 2
    # The rules-tier catch is still there.
    assert any(r["step"] == 12 and r["channel"] == "annotation" for r in report["reminders"])
    # Long work says how far it got (issue 20 item 7): one line per memory step.
    steps = [ln for ln in result.stderr.splitlines() if "] memory step " in ln]
    assert len(steps) == len(model_server.bodies)
    assert "[1/1]" in result.stderr and "LLM tier" in result.stderr
    assert "[1/1] done:" in result.stderr


def test_replay_of_several_files_prints_progress_per_file(invoke_cli):
    files = [str(mini("django__django-16263")), str(mini("astropy__astropy-12907"))]
    result = invoke_cli("replay", *files)
    assert result.returncode == 0, result.stderr
    assert "clio-acp replay: [1/2] " in result.stderr and "[2/2] done:" in result.stderr
    assert "memory step" not in result.stderr  # rules tier: no model calls


def test_replay_writes_the_memory_trace_when_asked(model_server, invoke_cli, tmp_path):
    # Issue 15 item 2: CLIO_ACP_MEMORY_TRACE works for replay, so an operator can see
    # what a memory route writes on recorded runs.
    from tests.support.model_server import Reply, usage

    model_server.install_settings()
    answer = '<operations>[{"op":"save_knowledge","content":"Edits go to django/db."}]'
    model_server.default = Reply(
        text=answer + "</operations>\n<no_intervention/>", usage=usage(300, 5)
    )
    trace = tmp_path / "trace.jsonl"
    result = invoke_cli(
        "replay",
        "--json",
        str(mini("django__django-16263")),
        env={"CLIO_ACP_MEMORY_TRACE": str(trace)},
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert rows and len(rows) == len(model_server.bodies)
    assert {r["sessionId"] for r in rows} == {"django__django-16263"}
    assert rows[0]["response"].startswith(answer) and rows[0]["bankOperations"] == 1
    assert rows[0]["userPrompt"].startswith("Task:\n")
    without = invoke_cli("replay", "--json", str(mini("django__django-16263")))
    assert without.returncode == 0 and len(trace.read_text(encoding="utf-8").splitlines()) == len(
        rows
    )
