"""The rules-written status, the restore built on it, and the completion check
(MEMORY_SPEC §13.5, §13.6, §12.6)."""

from __future__ import annotations

from clio_acp.memory.middleware import MemoryMiddleware, ToolCall, ToolOutcome
from clio_acp.memory.telemetry import MemorySinkList
from clio_acp.settings import MemorySettings

FAIL = ToolOutcome("Traceback (most recent call last):\nValueError: boom\n", True, 1)
OK = ToolOutcome("fine\n", False, 0)
TASK = "Fix the ISO date parser.\nIt must keep the public API. Never edit tests/."


def make(client_factory=None, **kw):
    sink = MemorySinkList()
    mw = MemoryMiddleware(
        lambda: MemorySettings(**kw), telemetry=sink, client_factory=client_factory
    )
    return mw, sink


def run(mw, command: str, outcome: ToolOutcome):
    call = ToolCall("bash", {"command": command}, None, "execute")
    mw.before_tool(call)
    return mw.after_tool(call, outcome)


def test_status_carries_goal_files_last_command_failures_and_steps():
    mw, _ = make()
    mw.turn_start("t1", TASK)
    run(mw, "sed -i 's/a/b/' src/dates.py", OK)
    run(mw, "python repro.py", FAIL)
    mw.turn_end("t1")
    assert mw.bank.status is None  # written when read or saved, not per tool call
    mw.sync_status()  # the session's journal snapshot does this at every turn end
    status = mw.bank.status
    assert status is not None and status.origin == "rules"
    assert status.content.startswith("Goal: Fix the ISO date parser. Files changed:")
    assert "Files changed: src/dates.py." in status.content
    assert "Last command: `python repro.py` failed at step 2" in status.content
    assert "Unresolved failures: `python repro.py` since step 2" in status.content
    assert status.content.endswith("Tool steps so far: 2.")
    # Brought up to date when read (sync_status, e.g. the journal snapshot at each
    # turn end): the failure resolved.
    mw.turn_start("t2")
    run(mw, "python repro.py", OK)
    mw.turn_end("t2")
    mw.sync_status()
    assert "Unresolved failures" not in mw.bank.status.content
    assert "`python repro.py` succeeded at step 3" in mw.bank.status.content


def test_restore_after_compaction_is_status_then_requirements_then_failures():
    mw, _ = make()
    mw.turn_start("t1", TASK)
    run(mw, "python repro.py", FAIL)
    mw.turn_end("t1")
    mw.on_compaction()
    (restore,) = mw.turn_start("t2")
    lines = restore.text.splitlines()
    assert lines[0] == "Memory: execution state restored after compaction:"
    assert " status: Goal: Fix the ISO date parser." in lines[1]
    assert lines[2].endswith("Requirement from the user: It must keep the public API.")
    assert lines[3].endswith("Requirement from the user: Never edit tests/.")
    assert " procedural: " in lines[4] and "python repro.py" in lines[4]
    assert mw.bank.status.id not in restore.cited  # status is never a citation


def test_no_rules_status_when_an_llm_tier_is_configured_or_switched_off():
    mw, _ = make(client_factory=lambda settings: None, target="local", model="m")
    mw.turn_start("t1", TASK)
    run(mw, "python repro.py", FAIL)
    mw.turn_end("t1")
    mw.sync_status()
    assert mw.bank.status is None
    off, _ = make(rules_status=False)
    off.turn_start("t1", TASK)
    run(off, "ls", OK)
    off.turn_end("t1")
    off.sync_status()
    assert off.bank.status is None


def test_a_status_written_by_the_model_is_never_overwritten():
    mw, _ = make()
    mw.turn_start("t1", TASK)
    mw.bank.update_status("model's own status", origin="model")
    run(mw, "ls", OK)
    mw.turn_end("t1")
    mw.sync_status()
    assert mw.bank.status.content == "model's own status"


def test_completion_check_lists_requirements_once_per_task():
    mw, sink = make()
    mw.turn_start("t1", TASK)
    assert mw.completion_check("t1") == []  # no work done yet: not a finish
    run(mw, "ls", OK)
    (check,) = mw.completion_check("t1")
    ids = [e.id for e in mw.bank.knowledge]
    assert check.trigger == "completion_check" and list(check.cited) == ids
    assert check.text == (
        f"Memory: before you finish, check: [{ids[0]}] It must keep the public API; "
        f"[{ids[1]}] Never edit tests/."
    )
    assert len(check.text) <= 300
    assert (sink.rows[-1].trigger_reasons, sink.rows[-1].decision) == (
        ["completion_check"],
        "injected",
    )
    assert mw.completion_check("t2") == []  # never twice per task
    # The flag survives export/import (resume).
    other, _ = make()
    other.bank.restore(mw.bank.snapshot())
    other.import_state(mw.export_state())
    assert other.completion_check("t3") == []


def test_completion_check_needs_requirements_and_is_switchable():
    mw, _ = make()
    mw.turn_start("t1", "Fix the bug in dates.py.")
    run(mw, "ls", OK)
    assert mw.completion_check("t1") == []
    off, _ = make(completion_check=False)
    off.turn_start("t1", TASK)
    run(off, "ls", OK)
    assert off.completion_check("t1") == []


def test_completion_check_fits_300_chars_with_many_requirements():
    mw, _ = make()
    task = "Requirements:\n" + "\n".join(
        f"- The exporter must write field number {i} as " + "x" * 60 for i in range(8)
    )
    mw.turn_start("t1", task)
    run(mw, "ls", OK)
    (check,) = mw.completion_check("t1")
    assert len(check.cited) == 8 and len(check.text) <= 300
    assert all(f"[{i}]" in check.text for i in check.cited)


def test_v2_switches_are_camel_case_keys_under_context_memory():
    from clio_acp.settings import Settings

    settings = Settings.model_validate(
        {
            "context": {
                "memory": {
                    "unchangedAfterEdit": False,
                    "recurringProblem": False,
                    "rulesStatus": False,
                    "completionCheck": False,
                    "environmentalFailures": False,
                    "captureRequirements": False,
                }
            }
        }
    )
    memory = settings.context.memory
    assert not any(
        (
            memory.unchanged_after_edit,
            memory.recurring_problem,
            memory.rules_status,
            memory.completion_check,
            memory.environmental_failures,
            memory.capture_requirements,
        )
    )
    defaults = MemorySettings()
    assert defaults.unchanged_after_edit and defaults.completion_check and defaults.rules_status
