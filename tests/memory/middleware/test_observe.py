"""Rules tier of the memory middleware (MEMORY_SPEC §4, §12 items 1–6)."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from clio_acp.memory.middleware import (
    RESTORE_PREFIX,
    AnnotateToolResult,
    DeferredReminder,
    InjectReminder,
    MemoryMiddleware,
    StopTurn,
    ToolCall,
    ToolOutcome,
    observe,
)
from clio_acp.memory.telemetry import MemorySinkList, TelemetrySink, parse_step_line
from clio_acp.settings import MemorySettings, Settings

FAIL = ToolOutcome("Traceback (most recent call last):\n  File x\nValueError: boom\n", True, 1)
OK = ToolOutcome("fine\n", False, 0)


class Live:
    """A settings source whose values a test changes between hook calls."""

    def __init__(self, **kw):
        self.value = MemorySettings(**kw)

    def __call__(self):
        return self.value


def make(**kw):
    sink = MemorySinkList()
    live = Live(**kw)
    mw = MemoryMiddleware(live, telemetry=sink)
    return mw, sink, live


def bash(command: str, call_id: str | None = None) -> ToolCall:
    return ToolCall("bash", {"command": command}, call_id, "execute")


def run(mw, call: ToolCall, outcome: ToolOutcome):
    mw.before_tool(call)
    return mw.after_tool(call, outcome)


def test_second_identical_failure_with_nothing_in_between_is_annotated():
    mw, sink, _ = make()
    mw.turn_start("t1", "fix the bug")
    assert run(mw, bash("python repro.py", "c1"), FAIL) == []
    effects = run(mw, bash("python repro.py", "c2"), FAIL)
    (effect,) = effects
    assert isinstance(effect, AnnotateToolResult)
    assert effect.tool_call_id == "c2"
    entry = mw.bank.get(effect.cited[0])
    assert entry.kind == "procedural"
    assert entry.content == (
        'bash{"command":"python repro.py"} failed 2 times; first observed at step 1: '
        "ValueError: boom."
    )
    # §13.7: the command as the user typed it, the step, the failure line, the id.
    assert effect.text == (
        f"Memory: [{entry.id}] you already ran `python repro.py` at step 1 and it failed "
        "the same way, with nothing changed since: ValueError: boom. "
        "Change the approach rather than repeating it."
    )
    assert len(effect.text) <= 300
    assert entry.injection_count == 1
    row = sink.rows[-1]
    assert (row.trigger_reasons, row.tier, row.decision, row.reason, row.cited_entries) == (
        ["repeated_failure"],
        "rules",
        "injected",
        "intervened",
        1,
    )


def test_edit_between_identical_failures_resets_the_repeat_count():
    # The blind-retry count restarts; what speaks instead is §13.1 (its own tests).
    mw, _, _ = make(unchanged_after_edit=False)
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("sed -i 's/a/b/' lib.py"), OK)
    assert run(mw, bash("python repro.py"), FAIL) == []
    run(mw, ToolCall("write_file", {"path": "x.py", "content": "x"}, kind="edit"), OK)
    assert run(mw, bash("python repro.py"), FAIL) == []


def test_workspace_change_seen_by_the_watcher_resets_the_repeat_count():
    mw, _, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    mw.note_workspace_change()
    assert run(mw, bash("python repro.py"), FAIL) == []


def test_state_change_reset_is_switchable_back_to_the_window_rule():
    mw, _, _ = make(state_change_resets_repeats=False)
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("sed -i 's/a/b/' lib.py"), OK)
    (effect,) = run(mw, bash("python repro.py"), FAIL)
    assert isinstance(effect, AnnotateToolResult)


def test_different_error_output_is_a_different_key():
    mw, _, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    other = ToolOutcome("KeyError: 'x'\n", True, 1)
    assert run(mw, bash("python repro.py"), other) == []


def test_annotation_is_spent_once_per_key_per_turn_and_not_repeated_verbatim():
    mw, sink, _ = make(loop_stop_repeats=10)
    mw.turn_start("t1", "task")
    run(mw, bash("make test"), FAIL)
    assert len(run(mw, bash("make test"), FAIL)) == 1  # make is state-changing but failed alike
    assert run(mw, bash("make test"), FAIL) == []  # spent this turn
    mw.turn_end("t1")
    mw.turn_start("t2")
    # A new turn may speak again, but never the identical text twice in a row.
    assert run(mw, bash("make test"), FAIL) == []
    assert sink.rows[-1].reason == "duplicate_reminder"


def test_fifth_identical_repeat_stops_the_turn_with_a_visible_notice():
    mw, sink, _ = make()
    stops = []
    for i in range(5):
        mw.turn_start(f"t{i}", "task" if i == 0 else "")
        effects = run(mw, bash("python repro.py"), FAIL)
        stops += [e for e in effects if isinstance(e, StopTurn)]
        mw.turn_end(f"t{i}")
    (stop,) = stops
    assert "failed 5 times in a row" in stop.notice
    assert "loop_signal" in mw.pending_triggers
    assert sink.rows[-2].reason == "loop_stop" or sink.rows[-1].reason == "loop_stop"


def test_loop_stop_threshold_follows_the_live_setting():
    mw, _, live = make()
    mw.turn_start("t", "task")
    run(mw, bash("python repro.py"), FAIL)
    live.value = MemorySettings(loop_stop_repeats=3)
    run(mw, bash("python repro.py"), FAIL)
    effects = run(mw, bash("python repro.py"), FAIL)
    assert any(isinstance(e, StopTurn) for e in effects)


def test_informative_exit_codes_are_neither_errors_nor_streaks():
    mw, _, _ = make()
    mw.turn_start("t", "task")
    no_match = ToolOutcome("", True, 1)
    for command in ("grep -r needle src", "diff a b", "test -f x", "cd x && git grep y"):
        assert run(mw, bash(command), no_match) == []
        assert mw.last_observation["informative"]
    assert run(mw, bash("pylint pkg"), ToolOutcome("C0104 …", True, 16)) == []
    assert mw.last_observation["outcome"] == "ok"
    assert "tool_error_streak" not in mw.pending_triggers
    assert mw.bank.procedural == []


def test_exit_code_semantics_can_be_switched_off():
    mw, _, _ = make(exit_code_semantics=False)
    mw.turn_start("t", "task")
    run(mw, bash("grep -r needle src"), ToolOutcome("", True, 1))
    assert mw.last_observation["outcome"] == "error"
    assert len(mw.bank.procedural) == 1


def test_two_errors_in_a_row_add_the_error_streak_trigger_and_ok_resets_it():
    mw, _, _ = make()
    mw.turn_start("t", "task")
    run(mw, bash("python a.py"), FAIL)
    run(mw, bash("python b.py"), ToolOutcome("KeyError: 1", True, 1))
    assert "tool_error_streak" in mw.pending_triggers


def test_interval_trigger_follows_the_cadence_setting():
    mw, _, _ = make(cadence_tool_calls=3)
    mw.turn_start("t", "task")
    for i in range(2):
        run(mw, bash(f"ls {i}"), OK)
    assert "interval" not in mw.pending_triggers
    run(mw, bash("ls 3"), OK)
    assert "interval" in mw.pending_triggers


def test_different_commands_failing_with_the_same_environment_error_record_one_fault():
    mw, _, _ = make()
    mw.turn_start("t", "task")
    missing = ToolOutcome("bash: curl: command not found\n", True, 127)
    # §13.2: the first sighting records knowledge and says nothing.
    assert run(mw, bash("curl http://a"), missing) == []
    (entry,) = [e for e in mw.bank.knowledge if e.content.startswith("Environment:")]
    assert entry.content == (
        "Environment: bash: curl: command not found (first seen at step 1: `curl http://a`)"
    )
    assert entry.origin == "rules"
    # The second call failing alike reminds once, citing that entry.
    (effect,) = run(mw, bash("curl -s http://b | jq ."), missing)
    assert effect.trigger == "environment" and effect.cited == (entry.id,)
    assert "environment, not code: bash: curl: command not found (steps 1, 2" in effect.text
    assert len(effect.text) <= 300
    # A third command failing alike adds no entry and no reminder…
    assert run(mw, bash("curl -v http://c"), missing) == []
    assert len([e for e in mw.bank.knowledge if e.content.startswith("Environment:")]) == 1
    # …but repeat counting goes on (each command has its failure record).
    assert len(mw.bank.procedural) == 3


def test_environment_reminder_does_not_stop_the_blind_retry_count():
    mw, _, _ = make(loop_stop_repeats=3)
    mw.turn_start("t", "task")
    missing = ToolOutcome("bash: sshpass: command not found\n", True, 127)
    run(mw, bash("sshpass -p x ssh h"), missing)
    (env,) = run(mw, bash("sshpass -p x git push"), missing)
    assert env.trigger == "environment"
    (again,) = run(mw, bash("sshpass -p x git push"), missing)
    assert again.trigger == "repeated_failure"  # caught at its second occurrence
    effects = run(mw, bash("sshpass -p x git push"), missing)
    assert any(isinstance(e, StopTurn) for e in effects)  # the loop stop still comes


def test_code_errors_across_commands_are_not_environment_faults():
    mw, _, _ = make()
    mw.turn_start("t", "task")
    regex = ToolOutcome(
        "Traceback (most recent call last):\nre.error: bad escape \\g at position 4\n", True, 1
    )
    for command in ("python a.py", "python b.py", "python -c 'import a'"):
        effects = run(mw, bash(command), regex)
        assert all(e.trigger != "environment" for e in effects)
    linkcheck = ToolOutcome(
        "(line    1) broken    https://nohost - HTTPSConnectionPool(host='nohost', port=443): "
        "Max retries exceeded (Caused by NameResolutionError(\"Failed to resolve 'nohost'\"))\n"
        "build finished with problems, 1 warning.\n",
        True,
        1,
    )
    run(mw, bash("sphinx-build -b linkcheck . _build"), linkcheck)
    run(mw, bash("cd docs && sphinx-build -b linkcheck . out"), linkcheck)
    assert not [e for e in mw.bank.knowledge if e.content.startswith("Environment:")]


def test_environmental_detection_is_switchable():
    mw, _, _ = make(environmental_failures=False)
    mw.turn_start("t", "task")
    missing = ToolOutcome("bash: curl: command not found\n", True, 127)
    run(mw, bash("curl a"), missing)
    assert run(mw, bash("curl b"), missing) == []
    assert mw.bank.knowledge == []


def test_user_prompt_requirements_become_knowledge_entries():
    mw, _, _ = make()
    mw.turn_start("t", "Fix the parser. Never edit the tests. Always run ruff before you finish.")
    contents = [e.content for e in mw.bank.knowledge]
    assert contents == [
        "Requirement from the user: Never edit the tests.",
        "Requirement from the user: Always run ruff before you finish.",
    ]
    mw.turn_start("t2", "Never edit the tests.")  # no duplicate
    assert len(mw.bank.knowledge) == 2


def test_requirement_capture_is_switchable():
    mw, _, _ = make(capture_requirements=False)
    mw.turn_start("t", "Never edit the tests.")
    assert mw.bank.knowledge == []


def test_post_compaction_restore_carries_status_knowledge_and_unresolved_failures():
    mw, sink, _ = make()
    mw.turn_start("t1", "Never touch setup.py.")
    mw.bank.update_status("step 3: fixing the parser")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("python other.py"), ToolOutcome("KeyError: 'k'", True, 1))
    run(mw, bash("python other.py"), OK)  # resolved
    mw.turn_end("t1")
    mw.on_compaction()
    (restore,) = mw.turn_start("t2")
    assert isinstance(restore, InjectReminder) and restore.channel == "restore"
    lines = restore.text.split("\n")
    assert restore.text.startswith(RESTORE_PREFIX)
    assert "] status: step 3: fixing the parser" in lines[1]
    assert "Never touch setup.py" in restore.text
    assert "python repro.py" in restore.text
    assert "other.py" not in restore.text  # resolved failures are not restored
    # Not consumed until the request carrying it is sent.
    (again,) = mw.turn_start("t3")
    assert again.offer_id == restore.offer_id
    mw.confirm_delivery(restore.offer_id)
    assert mw.turn_start("t4") == []
    assert sink.rows[-1].trigger_reasons == ["post_compaction"]
    assert sink.rows[-1].decision == "injected"


def test_working_set_recall_stage_does_not_arm_the_restore():
    mw, _, _ = make()
    mw.turn_start("t1", "Never touch setup.py.")
    mw.on_compaction(stage="working_set_recall")
    assert mw.turn_start("t2") == []


def test_restore_of_an_empty_bank_is_silent_bank_empty():
    mw, sink, _ = make(capture_requirements=False)
    mw.turn_start("t1", "go")
    mw.on_compaction()
    assert mw.turn_start("t2") == []
    assert (sink.rows[-1].decision, sink.rows[-1].reason) == ("silent", "bank_empty")


def test_compaction_drops_buffered_reminders_and_supersedes_the_offer():
    mw, _, _ = make(loop_stop_repeats=10)
    mw.turn_start("t1", "Never touch setup.py.")
    run(mw, bash("a"), FAIL)
    run(mw, bash("b"), ToolOutcome("KeyError", True, 1))
    run(mw, bash("c"), ToolOutcome("OSError", True, 1))
    mw.turn_start("t2")
    run(mw, bash("a"), FAIL)
    run(mw, bash("a"), FAIL)  # annotated mid-turn
    mw.on_compaction()
    effects = mw.turn_start("t3")
    assert [e.channel for e in effects] == ["restore"]


def test_turn_end_reminder_is_deferred_to_the_next_turn_start():
    mw, _, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    mw.turn_end("t1")
    mw.turn_start("t2")
    # An annotation was spent on this key in t2? No: fail once more in a *different*
    # turn from the annotation path by disabling the mid-turn channel via the set.
    mw._s.annotated.add(("dummy", "x"))
    effects = run(mw, bash("python repro.py"), FAIL)
    assert len(effects) == 1  # mid-turn annotation speaks first
    assert mw.turn_end("t2") == []  # already reported: no second reminder
    assert mw.turn_start("t3") == []


def test_no_tool_continuation_turn_end_leaves_no_row_and_keeps_last_decision():
    mw, sink, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("ls"), OK)
    mw.turn_end("t1")
    rows = len(sink.rows)
    decision = mw.last_decision
    mw.turn_start("t2")
    mw.turn_end("t2")
    assert len(sink.rows) == rows
    assert mw.last_decision == decision


def test_aborted_turn_drops_its_reminders():
    mw, _, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    mw.turn_end("t1")
    mw.turn_start("t2")
    mw._s.annotated.add(("x", "y"))
    mw._s.deferred.append(
        DeferredReminder(InjectReminder("Memory: x", (), "interval"), mw._s.turn, 0)
    )
    assert mw.turn_end("t2", aborted=True) == []
    assert mw.turn_start("t3") == []


def test_hooks_are_exception_safe(monkeypatch):
    mw, _, _ = make()

    def boom(*a, **k):
        raise RuntimeError("bank on fire")

    monkeypatch.setattr(mw.bank, "save", boom)
    mw.turn_start("t", "Never edit the tests.")
    assert run(mw, bash("python a.py"), FAIL) == []
    assert mw.turn_end("t") == []


def test_disabled_or_disposed_registration_does_nothing():
    mw, sink, live = make(enabled=False)
    mw.turn_start("t", "Never edit the tests.")
    run(mw, bash("python a.py"), FAIL)
    run(mw, bash("python a.py"), FAIL)
    assert mw.bank.size == 0 and sink.rows == [] and mw.tool_step == 0
    live.value = MemorySettings()
    mw.dispose()
    mw.turn_start("t", "Never edit the tests.")
    assert mw.bank.size == 0


def test_whole_settings_object_is_accepted_as_the_live_source():
    settings = Settings()
    mw = MemoryMiddleware(lambda: settings)
    assert mw.settings() is settings.context.memory


def test_tool_without_name_is_ignored_entirely():
    mw, _, _ = make()
    mw.turn_start("t", "task")
    assert mw.after_tool(ToolCall("  ", {}), FAIL) == []
    assert mw.tool_step == 0


def test_unrepresentable_arguments_still_fingerprint():
    mw, _, _ = make()
    mw.turn_start("t", "task")
    run(mw, ToolCall("tool", {"x": float("nan")}), FAIL)
    assert mw.bank.procedural[0].content.startswith("tool<unrepresentable> failed 1 time;")


def test_session_id_change_on_a_hook_resets_the_registration():
    mw, _, _ = make()
    mw.turn_start("t", "Never edit the tests.", session_id="A")
    assert mw.bank.size == 1
    mw.turn_start("t", "", session_id="B")
    assert mw.bank.size == 0 and mw.generation == 1


def test_counters_survive_export_and_import_for_resume():
    mw, _, _ = make(loop_stop_repeats=3)
    mw.turn_start("t", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("python repro.py"), FAIL)
    state = json.loads(json.dumps(mw.export_state()))
    snapshot = mw.bank.snapshot()
    other, _, _ = make(loop_stop_repeats=3)
    other.bank.restore(snapshot)
    other.import_state(state)
    other.turn_start("t2", "")
    effects = run(other, bash("python repro.py"), FAIL)
    assert any(isinstance(e, StopTurn) for e in effects)


def test_rows_on_disk_parse_strictly(tmp_path):
    path = tmp_path / "steps.jsonl"
    mw = MemoryMiddleware(MemorySettings, telemetry=TelemetrySink(path))
    mw.turn_start("t", "task")
    run(mw, bash("python a.py"), FAIL)
    run(mw, bash("python a.py"), FAIL)
    mw.turn_end("t")
    rows = [parse_step_line(line) for line in path.read_text().splitlines()]
    assert rows[0].decision == "injected"
    assert rows[0].bank_delta.procedural.added == 1


def test_activity_ring_keeps_the_newest_20_events_and_board_shows_them():
    mw, sink, _ = make()
    for i in range(25):
        mw.turn_start(f"t{i}", "task" if i == 0 else "")
        run(mw, bash(f"ls {i}"), OK)
        mw.turn_end(f"t{i}")
    assert len(sink.rows) == 25
    board = mw.board()
    assert len(board["activity"]) == 20
    assert board["activity"][0]["line"] == "turn_end silent no_repeated_failure"
    assert board["tier"] == "rules" and board["stepInFlight"] is False


def test_signals_survive_a_broken_settings_source():
    calls = {"n": 0}

    def settings():
        calls["n"] += 1
        raise RuntimeError("settings file vanished")

    mw = MemoryMiddleware(settings)
    mw.note_workspace_change()  # no raise
    mw.signal_loop()
    assert mw.turn_start("t", "x") == []
    assert calls["n"] >= 2


def test_the_files_and_lines_a_failure_names_go_first_in_the_reminder(tmp_path):
    """Issue 16: the annotation carries the traceback's workspace file and 0-based
    line ahead of the call's own paths, so a face can show it on the user's code."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bäd_😀.py").write_text("a\nb\nc\n", encoding="utf-8")
    mw = MemoryMiddleware(Live(), telemetry=MemorySinkList(), workspace_root=tmp_path)
    mw.turn_start("t1", "fix it")
    failing = ToolOutcome(
        'Traceback (most recent call last):\n  File "src/bäd_😀.py", line 3, in <module>\n'
        "NameError: name 'c' is not defined\n",
        True,
        1,
    )
    assert run(mw, bash("python src/bäd_😀.py", "c1"), failing) == []
    (effect,) = run(mw, bash("python src/bäd_😀.py", "c2"), failing)
    assert effect.paths == (str(tmp_path / "src" / "bäd_😀.py"),)
    assert effect.lines == (2,)


# -- session 4 (hot): the status's last-command line is written when first read ---------


def _outcome_line_by_definition(command: str, step: int, error: bool, digest: str, note: bool):
    if error:
        return f"`{command}` failed at step {step}: {digest}"
    return f"`{command}` succeeded at step {step}" + (f" ({digest})" if note else "")


def test_last_command_written_on_read_equals_the_eager_line():
    mw, _sink, _live = make()
    rules = lambda: mw._s.rules  # noqa: E731
    run(mw, bash("python repro.py"), FAIL)
    digest = mw.last_observation["digest"]
    assert rules().last_command == _outcome_line_by_definition(
        "python repro.py", 1, True, digest, False
    )
    run(mw, bash("grep -rn needle src"), ToolOutcome("", True, 1))
    note = mw.last_observation["digest"]
    assert mw.last_observation["informative"]
    run(mw, bash("ls"), OK)
    # Only the latest call counts, however many calls went by unread.
    assert rules().export()["lastCommand"] == _outcome_line_by_definition("ls", 3, False, "", False)
    run(mw, bash("grep -rn needle src"), ToolOutcome("", True, 1))
    assert rules().last_command == _outcome_line_by_definition(
        "grep -rn needle src", 4, False, note, True
    )
    rules().last_command = "set by hand"
    assert rules().export()["lastCommand"] == "set by hand"


# -- fast paths that must equal their definitions (issue 18) --------------------------

_MISSING_PIECES = st.sampled_from(
    ["No such file or directory", "NO SUCH FILE OR DIRECTORY", "not a git repository",
     "Not A Git Repoſitory", "cannot access", "does not exıst", "does not exİst", "not found",
     "NOT FOUND", "not  found", "notfound", "K", "é", " ", "x", ":", "\n"]
)  # fmt: skip


@given(st.lists(_MISSING_PIECES, max_size=8).map("".join))
@example("cd: x: No such file or directory")
def test_missing_state_check_matches_the_case_insensitive_search(text):
    assert observe._says_missing(text) == bool(observe._MISSING_STATE.search(text))
