"""The agent loop's memory port over the real middleware (``clio_acp.agent.memory_bridge``)."""

from __future__ import annotations

from clio_acp.agent import memory_port as port
from clio_acp.agent.memory_bridge import create_hooks
from clio_acp.memory.telemetry import parse_step_line
from clio_acp.paths import resolve_paths
from clio_acp.settings import Settings

FAIL = dict(ok=False, digest="ValueError: boom", exit_code=1, output="ValueError: boom\n")


def hooks(tmp_path, settings=None):
    settings = settings or Settings()
    return create_hooks(
        session_id="S1",
        cwd=tmp_path,
        settings=lambda: settings,
        delivers_reminders=True,
        paths=resolve_paths(),
    )


def observe(h, call_id, command, **outcome):
    h.before_tool("S1", call_id, "run_command", {"command": command})
    return h.after_tool(
        "S1",
        port.ToolObservation(
            tool_call_id=call_id,
            tool_name="run_command",
            arguments={"command": command},
            category="execute",
            **outcome,
        ),
    )


def test_repeated_failure_reaches_the_loop_as_a_port_annotation(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "make the tests pass")
    assert observe(h, "c1", "python repro.py", **FAIL) == []
    (effect,) = observe(h, "c2", "python repro.py", **FAIL)
    assert isinstance(effect, port.AnnotateToolResult)
    assert effect.text.startswith("Memory: [tm-p-1] you already tried")
    assert effect.cited == ("tm-p-1",)
    rows = resolve_paths().steps_file.read_text().splitlines()
    assert parse_step_line(rows[-1]).decision == "injected"


def test_edit_category_counts_as_a_state_change(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    observe(h, "c1", "python repro.py", **FAIL)
    h.before_tool("S1", "e1", "edit_file", {"path": "a.py"})
    h.after_tool(
        "S1",
        port.ToolObservation("e1", "edit_file", {"path": "a.py"}, True, "ok", category="edit"),
    )
    assert observe(h, "c2", "python repro.py", **FAIL) == []


def test_loop_stop_becomes_a_port_stop_turn(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    effects = []
    for i in range(5):
        effects += observe(h, f"c{i}", "python repro.py", **FAIL)
    assert any(isinstance(e, port.StopTurn) for e in effects)


def test_mid_turn_compaction_returns_the_restore_and_take_deferred_confirms_it(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "Never edit files under tests/.")
    (restore,) = h.on_compaction("S1", {})
    assert isinstance(restore, port.InjectReminder) and restore.channel == "restore"
    assert "Never edit files under tests/" in restore.text
    # The request carrying it was never sent (the turn was cancelled): still pending.
    h.discard_deferred()
    h.turn_end("S1", "turn-1")
    (again,) = h.turn_start("S1", "turn-2", "")
    assert again.text == restore.text
    h.take_deferred()  # right before the model request: delivered now
    assert h.turn_start("S1", "turn-3", "") == []


def test_cancelled_turn_drops_its_turn_end_reminder(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    observe(h, "c1", "python repro.py", **FAIL)
    h.turn_end("S1", "turn-1")
    h.turn_start("S1", "turn-2", "")
    h.middleware._s.annotated.add(h.middleware._s.trajectory[-1].key or ("", ""))
    observe(h, "c2", "python repro.py", **FAIL)
    h.discard_deferred()
    h.turn_end("S1", "turn-2")
    assert h.take_deferred() == []


def test_bank_and_counters_round_trip_through_restore(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "Always run the linter first.")
    observe(h, "c1", "python repro.py", **FAIL)
    snapshot, counters = h.snapshot(), h.counters()
    other = hooks(tmp_path)
    (offer,) = other.restore(snapshot, {**counters, "progressGuard": {"x": 1}})
    assert offer.channel == "restore"
    assert offer.text.startswith("Memory: execution state restored from the saved session:")
    assert "python repro.py" in offer.text  # unresolved failure restored (§12.6)
    assert other.counters()["toolStep"] == 1
    assert other.bank_status() is None


def test_board_hides_status_and_carries_spend(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    h.task_bank().update_status("private progress note")
    board = h.board()
    assert "status" not in board["bank"]
    assert board["tier"] == "rules"
    assert board["spendLine"] == ""


def test_reset_and_dispose_clear_the_bank(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "Never push to main without review.")
    assert h.task_bank().size == 1
    h.reset()
    assert h.task_bank().size == 0
    h.dispose()
    h.turn_start("S1", "turn-2", "Never push to main without review.")
    assert h.task_bank().size == 0
