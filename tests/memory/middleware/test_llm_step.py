"""LLM tier wiring and session isolation of the memory middleware
(MEMORY_SPEC §4 evaluateAsync/runPromptedStep, §10 session changes, §11 item 14).

The memory *model* is a test double (``FakeModel``); the middleware, bank, policy,
envelope parser and telemetry are the real ones."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.agent.memory_hooks import RouterMemoryClient
from clio_acp.memory.middleware import MemoryMiddleware, ToolCall, ToolOutcome
from clio_acp.memory.policy import CompletionAnswer, CompletionUsage
from clio_acp.memory.telemetry import MemorySinkList, parse_step_line
from clio_acp.models.routing import Router
from clio_acp.settings import Settings
from tests.support.model_server import Reply, usage
from tests.support.waiting import wait_until

REMIND = (
    '<operations>[{"op":"save_knowledge","content":"Run tests with pytest -x"}]</operations>\n'
    "<context_for_action>[tm-k-1] Run tests with pytest -x.</context_for_action>"
)
SILENT = "<operations>[]</operations>\n<no_intervention/>"
FAIL = ToolOutcome("ValueError: boom", True, 1)
OK = ToolOutcome("ok", False, 0)


class FakeModel:
    """Answers from a script. ``gate`` holds an answer until set; usage known at
    abort time is still reported (as a real streaming route does)."""

    def __init__(self, *answers: str, gate: asyncio.Event | None = None):
        self.answers = list(answers)
        self.gate = gate
        self.calls = 0

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else SILENT
        try:
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            on_usage(CompletionUsage(7, 3))
            raise
        return CompletionAnswer(answer, CompletionUsage(100, 20))


async def until(predicate):
    await wait_until(predicate, timeout_s=5)


def make(fake, *, tmp_path=None, delivers=True, **settings):
    from clio_acp.settings import MemorySettings

    values = {"target": "local", "model": "small", "capture_requirements": False}
    values.update(settings)
    live = MemorySettings(**values)
    sink = MemorySinkList()
    mw = MemoryMiddleware(
        lambda: live,
        telemetry=sink,
        client_factory=(lambda s: fake) if fake is not None else None,
        delivers_reminders=delivers,
        usage_path=(tmp_path / "usage.jsonl") if tmp_path else None,
        session_id="A",
    )
    return mw, sink


def tools(mw, n, outcome=OK, session_id=None):
    for i in range(n):
        call = ToolCall("bash", {"command": f"ls {i} {id(outcome)}"}, f"c{mw.tool_step}-{i}")
        mw.before_tool(call, session_id=session_id)
        mw.after_tool(call, outcome, session_id=session_id)


async def test_interval_trigger_runs_a_detached_step_and_defers_its_reminder():
    model = FakeModel(REMIND)
    mw, sink = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "fix the parser")
    tools(mw, 2)
    mw.turn_end("t1")
    assert await mw.evaluate("t1") == []  # returns at once
    assert mw.step_in_flight
    await mw.wait_idle()
    assert not mw.step_in_flight
    assert model.calls == 1
    (reminder,) = mw.take_deferred()
    assert reminder.text == "Memory: [tm-k-1] Run tests with pytest -x."
    assert reminder.cited == ("tm-k-1",)
    row = sink.rows[-1]
    assert (row.tier, row.decision, row.reason) == ("llm", "injected", "intervened")
    assert (row.target_id, row.model_id) == ("local", "small")
    assert row.token_cost.total == 120
    assert row.bank_delta.knowledge.added == 1
    assert mw.last_decision["decision"] == "injected"
    assert mw.take_deferred() == []


async def test_no_pending_trigger_means_no_step():
    model = FakeModel(REMIND)
    mw, _ = make(model)
    mw.turn_start("t1", "task")
    tools(mw, 1)
    mw.turn_end("t1")
    await mw.evaluate("t1")
    assert not mw.step_in_flight and model.calls == 0


async def test_same_boundary_is_prompted_once():
    model = FakeModel(SILENT, SILENT)
    mw, _ = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    await mw.wait_idle()
    mw.signal_loop()
    await mw.evaluate("t1")
    assert model.calls == 1


async def test_without_a_route_the_step_is_silent_no_client_on_the_rules_tier():
    mw, sink = make(None, cadence_tool_calls=2, target=None, model=None)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    await mw.wait_idle()
    row = sink.rows[-1]
    assert (row.tier, row.decision, row.reason) == ("rules", "silent", "no_client")
    assert "targetId" not in json.loads(row.to_json())


async def test_headless_host_records_no_consumer_and_starts_no_call():
    model = FakeModel(REMIND)
    mw, sink = make(model, delivers=False, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    before = mw.last_decision
    await mw.evaluate("t1")
    assert model.calls == 0 and not mw.step_in_flight
    assert (sink.rows[-1].decision, sink.rows[-1].reason) == ("silent", "no_consumer")
    assert mw.last_decision == before
    assert mw.pending_triggers == ()


async def test_second_boundary_while_a_step_is_in_flight_is_dropped_and_keeps_triggers():
    gate = asyncio.Event()
    model = FakeModel(SILENT, gate=gate)
    mw, sink = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    decision = mw.last_decision
    mw.turn_start("t2", "")
    tools(mw, 2)
    await mw.evaluate("t2")
    row = sink.rows[-1]
    assert (row.tier, row.decision, row.reason) == ("llm", "dropped", "step_in_flight")
    assert "interval" in mw.pending_triggers
    assert mw.last_decision == decision
    gate.set()
    await mw.wait_idle()
    await mw.evaluate("t2")  # the kept trigger runs at the next chance
    await mw.wait_idle()
    assert model.calls == 2


async def test_rules_tier_spoke_so_the_step_is_suppressed_and_last_decision_stays_injected():
    model = FakeModel(REMIND)
    mw, sink = make(model, cadence_tool_calls=50)
    mw.turn_start("t1", "task")
    for _ in range(2):
        call = ToolCall("bash", {"command": "python repro.py"})
        mw.after_tool(call, FAIL)  # second one annotates (rules tier spoke)
    mw.turn_end("t1")
    await mw.evaluate("t1")
    await mw.wait_idle()
    assert (sink.rows[-1].decision, sink.rows[-1].reason) == ("silent", "suppressed")
    assert mw.last_decision["decision"] == "injected"
    assert mw.take_deferred() == []


async def test_two_timeouts_back_the_llm_tier_off():
    model = FakeModel(SILENT, SILENT, SILENT, gate=asyncio.Event())  # never answers
    mw, sink = make(model, cadence_tool_calls=2, timeout_ms=20)
    for turn in range(3):
        mw.turn_start(f"t{turn}", "task")
        tools(mw, 2)
        await mw.evaluate(f"t{turn}")
        await mw.wait_idle()
    assert [
        (r.tier, r.decision, r.reason)
        for r in sink.rows
        if r.tier == "llm" or r.reason == "llm_timeout_backoff"
    ] == [
        ("llm", "timeout", "deadline"),
        ("llm", "timeout", "deadline"),
        ("rules", "silent", "llm_timeout_backoff"),
    ]
    assert model.calls == 2


async def test_endpoint_busy_drops_the_step_and_keeps_the_triggers():
    model = FakeModel(SILENT)
    mw, sink = make(model, cadence_tool_calls=2)
    mw._endpoint_busy = lambda: True
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    await mw.wait_idle()
    row = sink.rows[-1]
    assert (row.tier, row.decision, row.reason) == ("llm", "dropped", "endpoint_busy")
    assert "interval" in mw.pending_triggers and model.calls == 0


# -- session isolation (§10, §11 item 14) ---------------------------------------------------

SESSION_CHANGES = {
    # name → what the session core calls on the registration (MEMORY_SPEC §10)
    "new": lambda mw: mw.reset(),
    "load": lambda mw: (
        mw.reset(),
        mw.bank.restore({"version": 1, "status": None, "knowledge": [], "procedural": []}),
    ),
    "resume_other_session": lambda mw: mw.turn_start("x", "", session_id="B"),
    "fork": lambda mw: mw.reset(),
    "branch_switch": lambda mw: mw.reset(),
}


@pytest.mark.parametrize("change", sorted(SESSION_CHANGES))
async def test_late_completion_of_an_old_generation_leaves_no_trace(change, tmp_path):
    gate = asyncio.Event()
    model = FakeModel(REMIND, gate=gate)
    proposals = []
    mw, sink = make(model, tmp_path=tmp_path, cadence_tool_calls=2)
    mw._on_injected_entries = proposals.append
    mw.turn_start("t1", "task of session A")
    tools(mw, 2)
    await mw.evaluate("t1")
    await until(lambda: model.calls == 1)  # the old step is waiting on the model
    old_task = mw._in_flight.task
    SESSION_CHANGES[change](mw)
    rows_after_change = len(sink.rows)
    # The new generation starts its own step before the old one settles.
    model.answers = [SILENT]
    new_gate = asyncio.Event()
    model.gate = new_gate
    mw.turn_start("t2", "task of the new session", session_id=mw.session_id)
    tools(mw, 2, session_id=mw.session_id)
    await mw.evaluate("t2")
    assert mw.step_in_flight
    # The old step now sees its generation aborted and settles after the new one began.
    await asyncio.gather(old_task, return_exceptions=True)
    gate.set()
    for _ in range(20):  # loop turns for anything the released call would still do
        await asyncio.sleep(0)
    # Nothing written, delivered, proposed or logged by the old step…
    assert mw.bank.knowledge == []
    assert mw.take_deferred() == []
    assert proposals == []
    assert len(sink.rows) == rows_after_change
    # …and it did not free the new generation's slot.
    assert mw.step_in_flight
    # Its usage is still recorded under the origin session.
    origin = [u for u in mw.usage_log if u["input"] == 7]
    assert origin and origin[0]["sessionId"] == "A"
    await wait_until((tmp_path / "usage.jsonl").exists)
    row = json.loads((tmp_path / "usage.jsonl").read_text().splitlines()[0])
    assert row["sessionId"] == "A" and row["label"] == "background-memory"
    assert row["usage"]["input"] == 7
    new_gate.set()
    await mw.wait_idle()
    assert not mw.step_in_flight


async def test_close_disposes_the_registration_mid_step():
    gate = asyncio.Event()
    model = FakeModel(REMIND, gate=gate)
    mw, sink = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    await until(lambda: model.calls == 1)
    task = mw._in_flight.task
    rows = len(sink.rows)
    mw.dispose()
    gate.set()
    await asyncio.gather(task, return_exceptions=True)
    assert len(sink.rows) == rows and mw.bank.size == 0
    mw.turn_start("t2", "Never edit tests in this repo.")
    tools(mw, 3)
    await mw.evaluate("t2")
    assert mw.bank.size == 0 and not mw.step_in_flight
    assert [u["sessionId"] for u in mw.usage_log] == ["A"]


async def test_cancellation_of_the_step_task_mid_step_writes_nothing():
    gate = asyncio.Event()
    model = FakeModel(REMIND, gate=gate)
    mw, sink = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    rows = len(sink.rows)
    mw._in_flight.task.cancel()
    await mw.wait_idle()
    assert len(sink.rows) == rows and mw.bank.knowledge == []
    assert not mw.step_in_flight  # its own generation frees the slot


async def test_compaction_while_a_step_is_in_flight_takes_its_authority():
    gate = asyncio.Event()
    model = FakeModel(REMIND, gate=gate)
    mw, sink = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    await until(lambda: model.calls == 1)
    mw.on_compaction()
    gate.set()
    await mw.wait_idle()
    assert mw.take_deferred() == []
    assert mw.bank.knowledge == []
    assert (sink.rows[-1].decision, sink.rows[-1].reason) == ("dropped", "scope_changed")
    assert [u["sessionId"] for u in mw.usage_log] == ["A"]  # usage still attributed


async def test_reminder_buffered_before_a_compaction_is_never_delivered():
    model = FakeModel(REMIND)
    mw, _ = make(model, cadence_tool_calls=2)
    mw.turn_start("t1", "task")
    tools(mw, 2)
    await mw.evaluate("t1")
    await mw.wait_idle()
    mw.on_compaction()
    effects = mw.turn_start("t2")
    assert [e.channel for e in effects] == ["restore"]
    assert all("pytest -x." not in e.text or e.channel == "restore" for e in effects)


def _usage_rows(tmp_path):
    return [json.loads(line) for line in (tmp_path / "usage.jsonl").read_text().splitlines()]


class TwoAttempts:
    """A memory client whose first attempt (on ``mem``) reported usage before it
    failed over to the chat route (``chat-box``), which answered unconstrained."""

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        on_usage(CompletionUsage(30, 0, target_id="mem", model_id="small"))
        on_usage(CompletionUsage(100, 20, target_id="chat-box", model_id="big"))
        return CompletionAnswer(
            REMIND,
            CompletionUsage(100, 20, target_id="chat-box", model_id="big"),
            target_id="chat-box",
            model_id="big",
            decoding="free",
        )


async def test_each_attempt_gets_its_own_usage_row_and_the_step_names_the_answering_route(
    tmp_path,
):
    mw, sink = make(
        TwoAttempts(), tmp_path=tmp_path, target="mem", model="small", cadence_tool_calls=2
    )
    mw.turn_start("t1", "fix the parser")
    tools(mw, 2)
    mw.turn_end("t1")
    await mw.evaluate("t1")
    await mw.wait_idle()
    row = sink.rows[-1]
    assert row.tier == "llm" and row.decision == "injected"
    assert (row.target_id, row.model_id, row.decoding) == ("chat-box", "big", "free")
    # The row round-trips through the strict parser with the new key.
    assert parse_step_line(row.to_json()).decoding == "free"
    await wait_until(  # usage rows are written off the loop
        lambda: (tmp_path / "usage.jsonl").exists() and len(_usage_rows(tmp_path)) == 2
    )
    rows = _usage_rows(tmp_path)
    # Rows are appended off the loop, so their order is not the attempts' order.
    assert sorted((r["target"], r["attributedModelId"], r["usage"]["input"]) for r in rows) == [
        ("chat-box", "big", 100),
        ("mem", "small", 30),
    ]


KINDS = ("status", "knowledge", "procedural")


def test_strict_parser_accepts_decoding_on_llm_rows_only():
    base = {
        "version": 2,
        "at": "2026-11-30T00:00:00.000Z",
        "triggerReasons": ["interval"],
        "tier": "llm",
        "bankDelta": {k: {"added": 0, "updated": 0, "deleted": 0} for k in KINDS},
        "decision": "silent",
        "reason": "model_silent",
        "bankOperations": 0,
        "droppedOperations": 0,
        "citedEntries": 0,
        "tokenCost": {"input": 1, "output": 1, "total": 2},
        "latencyMs": 5,
        "targetId": "t",
        "modelId": "m",
    }
    for mode in ("grammar", "json_schema", "free"):
        assert parse_step_line(json.dumps({**base, "decoding": mode})).decoding == mode
    with pytest.raises(ValueError):
        parse_step_line(json.dumps({**base, "decoding": "beam"}))
    with pytest.raises(ValueError):
        parse_step_line(json.dumps({**base, "tier": "rules", "decoding": "grammar"}))


async def test_router_client_carries_target_model_and_grammar_mode(model_server):
    settings = Settings.model_validate(
        {
            "targets": [{"id": "box", "runtime": "llamacpp", "url": model_server.base_url}],
            "chat": {"target": "box", "model": "big"},
            "context": {"memory": {"target": "box", "model": "small"}},
        }
    )
    model_server.push(Reply(text=REMIND, usage=usage(40, 9)))
    router = Router(settings)
    reports = []
    try:
        answer = await RouterMemoryClient(router).complete(
            "sys", "user", 100, abort=None, on_usage=reports.append
        )
    finally:
        await router.aclose()
    assert (answer.target_id, answer.model_id, answer.decoding) == ("box", "small", "grammar")
    assert [(u.target_id, u.model_id, u.input_tokens) for u in reports] == [("box", "small", 40)]
    # the grammar's bounds travel with a constrained answer (a string that long was cut)
    from clio_acp.models.grammar import envelope_bounds_for_budget

    _ops, content, reminder = envelope_bounds_for_budget(100)
    assert (answer.content_limit, answer.reminder_limit) == (content, reminder)


async def test_a_done_status_is_dropped_while_the_rules_tier_holds_an_unresolved_failure():
    # MEMORY_SPEC §14.3: the failure left the one-step trajectory window, but the rules
    # tier still holds it unresolved; the step's "done" status must not land.
    done = (
        '<operations>[{"op":"update_status","content":"The task is completed."}]</operations>\n'
        "<no_intervention/>"
    )
    fake = FakeModel(done, done)
    mw, sink = make(fake, trajectory_steps=1, rules_status=False, cadence_tool_calls=2)
    mw.turn_start("t1", "Fix it.")
    for call, outcome in (("python3 app.py", FAIL), ("ls", OK)):
        tool = ToolCall("run_command", {"command": call}, call)
        mw.before_tool(tool)
        mw.after_tool(tool, outcome)
    mw.turn_end("t1")
    await mw.evaluate("t1")
    await mw.wait_idle()
    assert fake.calls == 1 and mw.bank.status is None
    assert sink.rows[-1].dropped_operations == 1
    # once the same call succeeds, nothing is unresolved and the status lands
    mw.turn_start("t2", "")
    for call in ("python3 app.py", "ls -a"):
        tool = ToolCall("run_command", {"command": call}, call)
        mw.before_tool(tool)
        mw.after_tool(tool, OK)
    mw.turn_end("t2")
    await mw.evaluate("t2")
    await mw.wait_idle()
    assert fake.calls == 2 and mw.bank.status.content == "The task is completed."


async def test_wait_idle_returns_only_after_the_usage_rows_are_written(tmp_path):
    # `clio-acp eval ab` removes each trial's state folder right after wait_idle; the
    # usage row was still being written then (FileNotFoundError, a traceback on stderr).
    from filelock import FileLock

    mw, _sink = make(FakeModel(REMIND), tmp_path=tmp_path, cadence_tool_calls=2)
    lock = FileLock(str(tmp_path / "usage.jsonl") + ".lock")
    lock.acquire()  # the row's writer waits for this lock
    try:
        mw.turn_start("t1", "fix the parser")
        tools(mw, 2)
        mw.turn_end("t1")
        await mw.evaluate("t1")
        idle = asyncio.ensure_future(mw.wait_idle())
        await wait_until(lambda: not mw.step_in_flight)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not idle.done()
    finally:
        lock.release()
    await idle
    assert len(_usage_rows(tmp_path)) == 1


# -- evaluate_inline: the rules-only step without a task (replay) -------------------

_OPS = st.lists(
    st.sampled_from(
        ["prompt", "turn", "ok", "fail", "fail2", "end", "abort", "loop", "compact", "eval"]
    ),
    max_size=40,
)


def _rules_only_pair():
    from clio_acp.agent.replay import ReplayClock
    from clio_acp.memory.bank import TaskMemoryBank
    from clio_acp.settings import MemorySettings

    live = MemorySettings(target=None, model=None, cadence_tool_calls=2)
    made = []
    for _ in range(2):
        sink = MemorySinkList()
        mw = MemoryMiddleware(
            lambda: live, bank=TaskMemoryBank(clock=ReplayClock()), telemetry=sink, session_id="A"
        )
        made.append((mw, sink))
    return made


def _drive(mw, op, step):
    if op == "prompt":
        return mw.turn_start(f"t{step}", "Fix the parser. Never edit the tests.")
    if op == "turn":
        return mw.turn_start(f"t{step}")
    if op in {"ok", "fail", "fail2"}:
        command = {"ok": "ls", "fail": "python repro.py", "fail2": "pytest -x"}[op]
        call = ToolCall("bash", {"command": command}, f"c{step}")
        mw.before_tool(call)
        return mw.after_tool(call, OK if op == "ok" else FAIL)
    if op in {"end", "abort"}:
        return mw.turn_end(f"t{step}", aborted=op == "abort")
    if op == "loop":
        return mw.signal_loop()
    if op == "compact":
        return mw.on_compaction()
    return None


def _same_ids(effects):
    """Effects with a random offer id replaced by True (the id is per offer)."""
    return [
        dataclasses.replace(e, offer_id=True) if getattr(e, "offer_id", None) else e
        for e in effects or []
    ]


def _observable(mw, sink):
    return (
        [r.model_dump(exclude={"at"}) for r in sink.rows],
        [{k: v for k, v in e.items() if k != "at"} for e in mw.activity],
        {k: v for k, v in (mw.last_decision or {}).items() if k != "at"},
        mw.pending_triggers,
        mw.step_in_flight,
        [(r.text, r.cited) for r in mw.take_deferred()],
        mw.bank.snapshot(),
    )


@settings(max_examples=60)
@given(_OPS)
def test_evaluate_inline_leaves_what_the_detached_rules_only_step_leaves(ops):
    """Without an LLM tier, ``evaluate_inline`` writes the same rows, activity,
    decision, triggers, deferred reminders and bank as ``evaluate`` + ``wait_idle``."""
    (inline, inline_sink), (detached, detached_sink) = _rules_only_pair()

    async def run():
        for step, op in enumerate(ops):
            if op == "eval":
                inline.evaluate_inline(f"t{step}")
                assert inline.idle  # no task was started
                await detached.evaluate(f"t{step}")
                await detached.wait_idle()
                continue
            assert _same_ids(_drive(inline, op, step)) == _same_ids(_drive(detached, op, step))

    asyncio.run(run())
    assert _observable(inline, inline_sink) == _observable(detached, detached_sink)


async def test_evaluate_inline_backs_off_like_the_detached_step_and_starts_llm_steps():
    """After two llm timeouts the inline step writes ``llm_timeout_backoff`` like the
    task does; with a target configured it starts the detached step instead."""
    from clio_acp.settings import MemorySettings

    results = []
    for inline in (True, False):
        model = FakeModel(SILENT, SILENT, SILENT, gate=asyncio.Event())  # never answers
        mw, sink = make(model, cadence_tool_calls=2, timeout_ms=20)
        live = {
            "v": MemorySettings(
                target="local",
                model="small",
                cadence_tool_calls=2,
                timeout_ms=20,
                capture_requirements=False,
            )
        }
        mw._settings_source = lambda live=live: live["v"]
        for turn in range(3):
            if turn == 2:  # the route goes away: the third step cannot ask a model
                live["v"] = live["v"].model_copy(update={"target": None, "model": None})
            mw.turn_start(f"t{turn}", "task")
            tools(mw, 2)
            if inline:
                mw.evaluate_inline(f"t{turn}")
                assert mw.idle == (turn == 2)
                if not mw.idle:
                    await mw.wait_idle()
            else:
                await mw.evaluate(f"t{turn}")
                await mw.wait_idle()
        results.append([(r.tier, r.decision, r.reason, r.trigger_reasons) for r in sink.rows])
    assert results[0] == results[1]
    assert results[0][-1][:3] == ("rules", "silent", "llm_timeout_backoff")
