"""Rules tier v2 triggers (MEMORY_SPEC §13.1–§13.3, §13.7): unchanged_after_edit,
environment, recurring_problem."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from clio_acp.memory.middleware import MemoryMiddleware, StopTurn, ToolCall, ToolOutcome, triggers
from clio_acp.memory.telemetry import MemorySinkList
from clio_acp.settings import MemorySettings

FAIL = ToolOutcome("Traceback (most recent call last):\n  File x\nValueError: boom\n", True, 1)
OTHER = ToolOutcome("Traceback (most recent call last):\n  File x\nKeyError: 'k'\n", True, 1)
OK = ToolOutcome("fine\n", False, 0)


def make(**kw):
    sink = MemorySinkList()
    mw = MemoryMiddleware(lambda: MemorySettings(**kw), telemetry=sink)
    return mw, sink


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command}, None, "execute")


def run(mw, call: ToolCall, outcome: ToolOutcome, turn: str | None = None):
    if turn is not None:
        mw.turn_start(turn)
    mw.before_tool(call)
    return mw.after_tool(call, outcome)


def test_same_failure_after_an_edit_names_command_steps_and_edit():
    mw, sink = make()
    mw.turn_start("t1", "make the parser accept ISO dates")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("sed -i 's/a/b/' src/parser.py"), OK, "t2")
    (note,) = run(mw, bash("python repro.py"), FAIL, "t3")
    assert note.trigger == "unchanged_after_edit"
    assert note.text == (
        f"Memory: [{note.cited[0]}] `python repro.py` failed exactly as at step 1 "
        "(steps 1, 3): ValueError: boom, although src/parser.py (step 2) changed in "
        "between. Check that the edit landed and is on the failing path."
    )
    assert "change the approach" not in note.text.lower()
    assert (sink.rows[-1].trigger_reasons, sink.rows[-1].decision) == (
        ["unchanged_after_edit"],
        "injected",
    )


def test_a_changed_outcome_after_an_edit_stays_silent():
    mw, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("sed -i 's/a/b/' x.py"), OK, "t2")
    assert run(mw, bash("python repro.py"), OTHER, "t3") == []
    run(mw, bash("sed -i 's/b/c/' x.py"), OK, "t4")
    assert run(mw, bash("python repro.py"), OK, "t5") == []


def test_a_pure_revert_is_not_an_edit():
    mw, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("git checkout src/parser.py"), OK, "t2")
    # Not a blind retry either (the revert changed the workspace), and not §13.1.
    assert run(mw, bash("python repro.py"), FAIL, "t3") == []


def test_third_identical_outcome_escalates_once_and_wakes_the_llm_tier():
    mw, _ = make()
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("sed -i 's/a/b/' x.py"), OK, "t2")
    (first,) = run(mw, bash("python repro.py"), FAIL, "t3")
    run(mw, bash("sed -i 's/b/c/' x.py"), OK, "t4")
    (third,) = run(mw, bash("python repro.py"), FAIL, "t5")
    assert first.trigger == third.trigger == "unchanged_after_edit"
    assert third.text.startswith(f"Memory: [{third.cited[0]}] third identical failure of")
    assert "(steps 1, 3, 5)" in third.text and len(third.text) <= 300
    assert "unchanged_after_edit" in mw.pending_triggers
    # Escalation is spent: a fourth identical outcome in this user turn is silent.
    run(mw, bash("sed -i 's/c/d/' x.py"), OK, "t6")
    assert run(mw, bash("python repro.py"), FAIL, "t7") == []


def test_knock_on_failure_in_the_same_batch_is_not_reminded():
    mw, _ = make()
    mw.turn_start("t1", "task")
    clone_fail = ToolOutcome("fatal: Could not read from remote repository.\n", True, 128)
    missing = ToolOutcome("bash: cd: repo: No such file or directory\n", True, 1)
    run(mw, bash("git clone host:repo"), clone_fail)
    run(mw, bash("cd repo"), missing)
    mw.turn_start("t2")
    run(mw, bash("rm -rf repo"), OK)
    run(mw, bash("git clone host:repo"), clone_fail)
    # `cd repo` fails exactly as before, after an edit, but only because the clone
    # just before it in this batch failed.
    assert run(mw, bash("cd repo"), missing) == []


def test_unchanged_after_edit_is_switchable():
    mw, _ = make(unchanged_after_edit=False)
    mw.turn_start("t1", "task")
    run(mw, bash("python repro.py"), FAIL)
    run(mw, bash("sed -i 's/a/b/' x.py"), OK, "t2")
    assert run(mw, bash("python repro.py"), FAIL, "t3") == []


def test_dead_tool_channel_is_three_commands_with_empty_output():
    mw, _ = make()
    mw.turn_start("t1", "task")
    empty = ToolOutcome("", True, 1)
    assert run(mw, bash("ls a"), empty) == []
    assert run(mw, bash("cat b"), empty) == []
    assert run(mw, bash("echo c"), empty) == []  # third command: knowledge, no note
    (entry,) = [e for e in mw.bank.knowledge if e.content.startswith("Environment:")]
    assert entry.content.startswith("Environment: empty output, exit 1 (first seen at step 3")
    (note,) = run(mw, bash("pwd"), empty)
    assert note.trigger == "environment" and note.cited == (entry.id,)


def test_environment_shapes_only():
    mw, _ = make()
    mw.turn_start("t1", "task")
    for command, output in (
        ("python a.py", "Traceback (most recent call last):\nAttributeError: 'X' has no 'y'\n"),
        ("cd build", "bash: cd: build: No such file or directory\n"),
        ("pytest x", "ModuleNotFoundError: No module named '_distutils_hack'\nERROR: 1\n"),
    ):
        run(mw, bash(command), ToolOutcome(output, True, 1))
    assert not [e for e in mw.bank.knowledge if e.content.startswith("Environment:")]
    run(
        mw,
        bash("python3 -m pytest t.py"),
        ToolOutcome("/usr/bin/python3: No module named pytest", True, 1),
    )
    (entry,) = [e for e in mw.bank.knowledge if e.content.startswith("Environment:")]
    assert "No module named pytest" in entry.content


def test_loop_stop_still_comes_after_an_environment_note():
    mw, _ = make(loop_stop_repeats=4)
    mw.turn_start("t1", "task")
    denied = ToolOutcome("git@localhost: Permission denied (publickey).\n", True, 255)
    run(mw, bash("ssh git@localhost true"), denied)
    effects = []
    for i in range(4):
        effects += run(mw, bash("git clone git@localhost:/repo"), denied, f"t{i + 2}")
    assert [e.trigger for e in effects][:2] == ["environment", "repeated_failure"]
    assert isinstance(effects[-1], StopTurn)


def test_recurring_problem_across_commands_once_per_user_turn():
    mw, sink = make()
    mw.turn_start("t1", "task")
    err = ToolOutcome(
        "Traceback (most recent call last):\nre.error: bad escape \\g at 4\n", True, 1
    )
    assert run(mw, bash("python a.py"), err) == []
    assert run(mw, bash("python b.py"), err, "t2") == []
    (note,) = run(mw, bash("python c.py"), err, "t3")
    assert note.trigger == "recurring_problem"
    assert "the same problem in 3 recent failures of 3 different commands (steps 1, 2, 3)" in (
        note.text
    )
    assert run(mw, bash("python d.py"), err, "t4") == []  # once per line per user turn
    assert sink.rows[-1].trigger_reasons == ["recurring_problem"]


def test_recurring_problem_ignores_tool_reports_and_is_switchable():
    mw, _ = make()
    mw.turn_start("t1", "task")
    report = ToolOutcome("(line 1) broken doesntexist - path not found\n", True, 1)
    for i, command in enumerate(("build a", "build b", "build c")):
        assert run(mw, bash(command), report, f"t{i}") == []
    off, _ = make(recurring_problem=False)
    off.turn_start("t1", "task")
    err = ToolOutcome("Traceback (most recent call last):\nValueError: x\n", True, 1)
    for i, command in enumerate(("python a.py", "python b.py", "python c.py")):
        assert run(off, bash(command), err, f"t{i}") == []


def test_every_rules_reminder_fits_300_chars_with_long_commands():
    mw, _ = make()
    mw.turn_start("t1", "task")
    long_command = "python " + "x" * 400 + ".py --flag " + "y" * 300
    long_error = ToolOutcome(
        "Traceback (most recent call last):\nValueError: " + "z" * 500, True, 1
    )
    run(mw, bash(long_command), long_error)
    (note,) = run(mw, bash(long_command), long_error, "t2")
    assert len(note.text) <= 300 and note.text.startswith(f"Memory: [{note.cited[0]}]")


# -- fast paths that must equal their definitions (issue 18) --------------------------

_ERRORISH_PIECES = st.sampled_from(
    ["error", "Error", "ERROR", "fatal", "Fatal", "exception", "Exception", "EXCEPTION",
     "exceptıon", "exceptİon", "ſ", "K", "a", "Z", "9", "_", "é", "٣", " ", ".", ":", "-", "\n"]
)  # fmt: skip


@given(st.lists(_ERRORISH_PIECES, max_size=12).map("".join))
@example("ValueError: x")
@example("1error 9fatal _exception")
def test_error_statement_check_matches_the_case_insensitive_search(line):
    assert triggers._states_an_error(line) == bool(triggers._ERRORISH.search(line))
