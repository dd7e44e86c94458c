"""The agent's one memory seam over the real middleware (``clio_acp.agent.memory_hooks``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clio_acp.agent import memory_hooks as port
from clio_acp.agent.memory_hooks import create_hooks
from clio_acp.memory.store import MemoryStore
from clio_acp.memory.telemetry import parse_step_line
from clio_acp.paths import resolve_paths
from clio_acp.settings import Settings, load_settings
from tests.support.model_server import Reply, usage
from tests.support.waiting import wait_until

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
    assert effect.text.startswith("Memory: [tm-p-1] you already ran `python repro.py`")
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
    # Not a blind retry any more: what speaks is §13.1, naming the edit.
    (effect,) = observe(h, "c2", "python repro.py", **FAIL)
    assert effect.trigger == "unchanged_after_edit"
    assert "a.py (step 2)" in effect.text


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
    # The saved bank carried the rules status (§13.5), restored first.
    assert "Goal: Always run the linter first." in offer.text.splitlines()[1]
    assert other.bank_status().startswith("Goal: Always run the linter first.")


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


def test_annotation_keeps_the_tool_call_id_and_the_paths_it_names(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    args = {"command": "python repro.py", "path": "src/a.py"}
    for call_id in ("c1", "c2"):
        h.before_tool("S1", call_id, "run_command", args)
        effects = h.after_tool(
            "S1",
            port.ToolObservation(call_id, "run_command", args, category="execute", **FAIL),
        )
    (effect,) = effects
    assert effect.tool_call_id == "c2"
    assert effect.paths == (str(tmp_path / "src/a.py"),)


def test_turn_end_reminder_carries_the_paths_of_the_failing_call(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    args = {"command": "python repro.py", "path": str(tmp_path / "b.py")}
    for call_id in ("c1", "c2"):
        h.before_tool("S1", call_id, "run_command", args)
        h.after_tool(
            "S1",
            port.ToolObservation(call_id, "run_command", args, category="execute", **FAIL),
        )
    h.middleware._s.annotated.clear()  # the mid-turn note was spent: turn end reports it
    h.middleware._s.last_injected_key = None
    h.middleware._s.last_injected_message = None
    h.turn_end("S1", "turn-1")
    (reminder,) = h.take_deferred()
    assert reminder.trigger == "repeated_failure"
    assert reminder.paths == (str(tmp_path / "b.py"),)


def test_restore_offer_keeps_its_offer_id_until_delivery(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "Never edit files under tests/.")
    (restore,) = h.on_compaction("S1", {})
    assert restore.offer_id  # the seam no longer drops it
    board_before = h.board()["lastDecision"]
    h.take_deferred()
    assert board_before != h.board()["lastDecision"]  # confirmed: its row was written


def test_unresolved_failures_list_only_calls_whose_latest_outcome_is_an_error(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    observe(h, "c1", "python repro.py", **FAIL)
    observe(h, "c2", "pytest -x", **FAIL)
    observe(h, "c3", "pytest -x", ok=True, digest="ok", exit_code=0, output="1 passed\n")
    (line,) = h.unresolved_failures()
    assert line.startswith("python repro.py — failed once since step 1; last: ")
    assert "ValueError: boom" in line
    h.reset()
    assert h.unresolved_failures() == []


def test_workspace_change_restarts_the_repeat_count(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    observe(h, "c1", "python repro.py", **FAIL)
    h.note_workspace_change()
    assert observe(h, "c2", "python repro.py", **FAIL) == []  # not a blind retry


def test_activity_is_a_protocol_method_newest_first(tmp_path):
    h = hooks(tmp_path)
    h.turn_start("S1", "turn-1", "task")
    observe(h, "c1", "python repro.py", **FAIL)
    observe(h, "c2", "python repro.py", **FAIL)
    h.turn_end("S1", "turn-1")
    activity = h.activity()
    assert [a["decision"] for a in activity][-1] == "injected"
    assert all(set(a) >= {"at", "triggerReasons", "tier", "reason"} for a in activity)


def test_null_memory_answers_every_protocol_method():
    null = port.NullMemory()
    names = [n for n in vars(port.MemoryHooks) if not n.startswith("_")]
    assert names and all(callable(getattr(null, n)) for n in names)
    assert null.unresolved_failures() == [] and null.activity() == []
    assert null.board()["enabled"] is False


async def test_router_client_maps_a_busy_endpoint_to_memorys_own_error(model_server):
    from clio_acp.memory.policy import EndpointBusy, classify_client_error
    from clio_acp.models.routing import Router
    from tests.support.model_server import busy

    settings = Settings.model_validate(
        {
            "targets": [{"id": "box", "runtime": "llamacpp", "url": model_server.base_url}],
            "chat": {"target": "box", "model": "big"},
            "context": {"memory": {"target": "box", "model": "small"}},
        }
    )
    model_server.push(busy(429), busy(429))
    router = Router(settings)
    try:
        with pytest.raises(EndpointBusy) as info:
            await port.RouterMemoryClient(router).complete(
                "sys", "user", 100, abort=None, on_usage=lambda _u: None
            )
    finally:
        await router.aclose()
    assert classify_client_error(info.value) == ("silent", "endpoint_busy")


REMIND = (
    '<operations>[{"op":"save_knowledge","content":"Run the parser tests with pytest -x."}]'
    "</operations>\n"
    "<context_for_action>[tm-k-1] Run the parser tests with pytest -x.</context_for_action>"
)


def hooks_for(cwd: Path, settings):
    return create_hooks(
        session_id="S1",
        cwd=cwd,
        settings=lambda: settings,
        delivers_reminders=True,
        paths=resolve_paths(),
    )


def observe_command(h, call_id: str, command: str, ok: bool = True):
    h.before_tool("S1", call_id, "run_command", {"command": command})
    return h.after_tool(
        "S1",
        port.ToolObservation(
            tool_call_id=call_id,
            tool_name="run_command",
            arguments={"command": command},
            ok=ok,
            digest="" if ok else "ValueError: boom",
            exit_code=0 if ok else 1,
            output="ok\n" if ok else "ValueError: boom\n",
            category="execute",
        ),
    )


async def test_llm_tier_injection_proposes_cited_entries(model_server, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    model_server.install_settings()
    settings = load_settings(resolve_paths().settings_file)
    settings.context.memory.cadence_tool_calls = 2
    settings.context.memory.capture_requirements = False
    model_server.push(Reply(text=REMIND, usage=usage(100, 20)))
    h = hooks_for(repo, settings)
    h.turn_start("S1", "t1", "fix the parser")
    observe_command(h, "c1", "ls src")
    observe_command(h, "c2", "ls tests")
    h.turn_end("S1", "t1")
    h.evaluate_turn_end("S1", "t1")
    store = MemoryStore(resolve_paths().records_file)
    await wait_until(store.path.exists)
    await h.middleware.wait_idle()
    rows = [parse_step_line(line) for line in resolve_paths().steps_file.read_text().splitlines()]
    assert (rows[-1].tier, rows[-1].decision) == ("llm", "injected")
    (record,) = store.load()
    assert record.status == "proposed" and record.scope == "repo"
    assert record.repository.key == str(repo.resolve())
    assert record.lesson == "Run the parser tests with pytest -x."
    assert record.evidence_refs == ["session:S1"]
    assert record.provenance.source_entry_id == "tm-k-1"
    h.dispose()


async def test_rules_tier_injection_proposes_nothing(tmp_path: Path) -> None:
    settings = load_settings(resolve_paths().settings_file)  # no memory target: rules only
    h = hooks_for(tmp_path, settings)
    h.turn_start("S1", "t1", "make the tests pass")
    observe_command(h, "c1", "python repro.py", ok=False)
    (effect,) = observe_command(h, "c2", "python repro.py", ok=False)
    assert isinstance(effect, port.AnnotateToolResult) and effect.cited
    await h.middleware.wait_idle()
    assert not resolve_paths().records_file.exists()
    h.dispose()


def test_the_middleware_adapter_implements_every_protocol_method_itself():
    # NullMemory inherits the memory-off bodies; the adapter must never fall back to them.
    names = {n for n in vars(port.MemoryHooks) if not n.startswith("_")}
    assert names <= set(vars(port.MiddlewareHooks))
