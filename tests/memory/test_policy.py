"""The policy step (MEMORY_SPEC §3): every §2 vector against a real bank, each gate
in order, the deadline/cancellation race, error classification, usage and the trace
observer. The model is a scripted client object; the bank and parser are real."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.policy import (
    TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS,
    CompletionAnswer,
    CompletionUsage,
    EndpointBusy,
    PolicyInput,
    ScriptedAnswerClient,
    classify_client_error,
    extract_path_references,
    run_task_memory_policy,
)
from clio_acp.memory.prompts import POLICY_SYSTEM_PROMPT
from clio_acp.settings import MemorySettings
from tests.memory.vectors import BANKS, VECTORS, C, E
from tests.support.waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=5)
        return self.now


def make_bank(name: str = "B") -> TaskMemoryBank:
    bank = TaskMemoryBank(clock=Clock())
    bank.restore(json.loads(json.dumps(BANKS[name])))
    return bank


def inputs(tmp_path, **kwargs) -> PolicyInput:
    kwargs.setdefault("task", "Keep reminders visible.")
    kwargs.setdefault("max_tokens", 100)
    kwargs.setdefault("workspace_root", tmp_path)
    return PolicyInput(**kwargs)


async def run(bank, text, tmp_path, **kwargs):
    return await run_task_memory_policy(
        bank, inputs(tmp_path, **kwargs), ScriptedAnswerClient(text)
    )


def contents(entries):
    return [e.content for e in entries]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
async def test_spec_vector_through_the_policy_step(vector, tmp_path):
    bank = make_bank(vector.get("bank", "B"))
    before = bank.snapshot()
    result = await run(
        bank,
        vector["response"],
        tmp_path,
        task=vector.get("task", "Keep reminders visible."),
        deterministic_trigger=vector.get("trigger") == "deterministic",
        suppress_intervention=vector.get("suppress", False),
        previous_reminder=vector.get("previous_reminder"),
    )
    assert (result.decision, result.reason) == (vector["decision"], vector["reason"]), result.error
    if "bank_operations" in vector:
        assert result.bank_operations == vector["bank_operations"]
    if "dropped" in vector:
        assert result.dropped_operations == vector["dropped"]
    if "reminder" in vector:
        assert result.reminder == vector["reminder"]
    if vector.get("bank_unchanged"):
        assert bank.snapshot() == before
    if "knowledge" in vector:
        assert contents(bank.knowledge) == vector["knowledge"]
    if "procedural" in vector:
        assert contents(bank.procedural) == vector["procedural"]
    if "status" in vector:
        assert bank.status is not None and bank.status.content == vector["status"]
    if "ids" in vector:
        assert sorted(bank.ids()) == sorted(vector["ids"])
    for entry_id, count in vector.get("injections", {}).items():
        assert bank.get(entry_id).injection_count == count
    if result.decision != "injected":
        assert result.reminder is None


def test_policy_default_timeout_equals_the_settings_default():
    assert TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS == MemorySettings().timeout_ms == 60_000


# --- prompts reaching the model --------------------------------------------------------


async def test_model_sees_the_system_prompt_and_a_user_prompt_without_status(tmp_path):
    bank = make_bank()
    bank.update_status("SECRET-STATUS progress note")
    client = ScriptedAnswerClient(E("[]"))
    await run_task_memory_policy(bank, inputs(tmp_path, max_tokens=123), client)
    system, user, budget = client.calls[0]
    assert system == POLICY_SYSTEM_PROMPT
    assert "SECRET-STATUS" not in user
    assert "- [tm-k-1] knowledge: The operator requires visible reminders." in user
    assert budget == 123


async def test_model_max_tokens_overrides_the_completion_budget_only(tmp_path):
    client = ScriptedAnswerClient(C("[]", "x" * 450))
    result = await run_task_memory_policy(
        make_bank(), inputs(tmp_path, model_max_tokens=4000, deterministic_trigger=True), client
    )
    assert client.calls[0][2] == 4000
    assert result.reason == "over_budget"  # the reminder cap still follows max_tokens


# --- gates in order ------------------------------------------------------------------------


async def test_reminder_exactly_at_the_cap_is_delivered(tmp_path):
    body = "[tm-k-1] " + "x" * (400 - len("Memory: [tm-k-1] "))
    result = await run(make_bank(), C("[]", body), tmp_path)
    assert result.decision == "injected" and len(result.reminder) == 400


async def test_invalid_reminder_sets_the_error_text(tmp_path):
    result = await run(make_bank(), C("[]", "Let me think [tm-k-1]"), tmp_path)
    assert result.reason == "invalid_reminder" and "deliberates" in result.error


async def test_over_budget_comes_before_suppressed(tmp_path):
    result = await run(
        make_bank(), C("[]", "[tm-k-1] " + "x" * 420), tmp_path, suppress_intervention=True
    )
    assert result.reason == "over_budget"


async def test_suppressed_comes_before_duplicate(tmp_path):
    result = await run(
        make_bank(),
        C("[]", "[tm-k-1] Keep it visible."),
        tmp_path,
        suppress_intervention=True,
        previous_reminder="Memory: [tm-k-1] Keep it visible.",
    )
    assert result.reason == "suppressed"


async def test_duplicate_comes_before_uncited(tmp_path):
    result = await run(
        make_bank(), C("[]", "No ids here."), tmp_path, previous_reminder="Memory: No ids here."
    )
    assert result.reason == "duplicate_reminder"


async def test_citing_the_status_id_is_not_a_citation(tmp_path):
    bank = make_bank()
    status = bank.update_status("doing things")
    result = await run(bank, C("[]", f"[{status.id}] keep going with the plan"), tmp_path)
    assert (result.decision, result.reason) == ("gated", "uncited")
    assert bank.status.injection_count == 0


async def test_only_verbatim_bracketed_ids_are_cited(tmp_path):
    bank = make_bank()
    result = await run(bank, C("[]", "tm-k-1 and [ tm-k-1 ] are not citations"), tmp_path)
    assert result.reason == "uncited"


FAILED_CALL = 'run_command{"command":"pytest -q"}'


def _failure_bank() -> TaskMemoryBank:
    bank = make_bank()
    bank.save("procedural", f"{FAILED_CALL} failed 2 time(s); first observed at step 4: exit 2.")
    return bank


def _step(n, outcome, call=FAILED_CALL):
    return {
        "step": n,
        "toolName": "run_command",
        "operationFingerprint": "0123456789abcdef",
        "callDescription": call,
        "outcome": outcome,
        "resultDigest": "exit 2" if outcome == "error" else "ok",
        "resultDigestProvenance": "legacy",
    }


async def test_resolved_failure_gates_a_reminder_about_a_call_that_now_succeeds(tmp_path):
    bank = _failure_bank()
    trajectory = [_step(4, "error"), _step(5, "error"), _step(6, "ok")]
    result = await run(bank, C("[]", "[tm-p-2] do not rerun it"), tmp_path, trajectory=trajectory)
    assert (result.decision, result.reason) == ("gated", "resolved_failure")
    assert bank.get("tm-p-2").injection_count == 0


async def test_failure_still_failing_at_its_latest_step_is_delivered(tmp_path):
    bank = _failure_bank()
    trajectory = [_step(4, "ok"), _step(5, "error"), _step(6, "ok", call="read_file{}")]
    result = await run(bank, C("[]", "[tm-p-2] do not rerun it"), tmp_path, trajectory=trajectory)
    assert result.decision == "injected" and result.cited == ("tm-p-2",)
    assert bank.get("tm-p-2").injection_count == 1


async def test_resolved_failure_comes_before_invalid_path(tmp_path):
    bank = _failure_bank()
    result = await run(
        bank, C("[]", "[tm-p-2] see src/missing.py"), tmp_path, trajectory=[_step(6, "ok")]
    )
    assert result.reason == "resolved_failure"


@pytest.mark.parametrize(
    ("reminder", "reason"),
    [
        ("[tm-k-1] edit src/missing.py first", "invalid_path"),
        ("[tm-k-1] edit (src/missing.py) first", "invalid_path"),
        ("[tm-k-1] edit `./src/missing.py`", "invalid_path"),
        ("[tm-k-1] path=src/missing.py, then test", "invalid_path"),
        ("[tm-k-1] edit src/present.py first", "intervened"),
        ("[tm-k-1] edit src/missing.py.", "intervened"),  # kept quirk: trailing '.'
        ("[tm-k-1] check /nonexistent-root-dir/a/b.conf", "intervened"),  # outside
        ("[tm-k-1] check ../elsewhere/b.py", "intervened"),  # outside the workspace
        ("[tm-k-1] edit missing.py alone", "intervened"),  # no dir/ segment
        (
            "[tm-k-1] " + " ".join(["src/present.py"] * 17),
            "invalid_path",
        ),
        ("[tm-k-1] see src/" + "d/" * 160 + "x.py", "invalid_path"),
    ],
)
async def test_workspace_path_gate(tmp_path, reminder, reason):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "present.py").write_text("x")
    result = await run(make_bank(), C("[]", reminder), tmp_path, max_tokens=200)
    assert result.reason == reason, result.error


def test_path_references_need_a_directory_and_a_letter_extension():
    text = "a/b.c1 x/y.1z ./p/q.md ../r/s.tar.gz /abs/t.py u/v.abcdefghijklm w/x.py:3 src/x.ts."
    assert extract_path_references(text) == [
        "a/b.c1",
        "./p/q.md",
        "../r/s.tar.gz",
        "/abs/t.py",
        "w/x.py",
    ]


async def test_path_gate_resolves_against_the_cwd_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.py").write_text("")
    bank = make_bank()
    ok = await run_task_memory_policy(
        bank,
        PolicyInput(task="t", max_tokens=100),
        ScriptedAnswerClient(C("[]", "[tm-k-1] lib/a.py")),
    )
    assert ok.decision == "injected"


# --- run order: currency, deadline, cancellation, errors ---------------------------------


class SlowClient:
    """Answers ``text`` after ``delay`` seconds; with ``delay=None`` it never answers
    (only a deadline or a cancellation ends the call)."""

    def __init__(
        self, delay: float | None, text: str = E("[]"), usage_first: CompletionUsage | None = None
    ):
        self.delay = delay
        self.text = text
        self.usage_first = usage_first
        self.calls = 0
        self.aborted: asyncio.Event | None = None
        self.cancelled = False

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        self.calls += 1
        self.aborted = abort
        if self.usage_first is not None:
            on_usage(self.usage_first)
        try:
            if self.delay is None:
                await asyncio.Event().wait()
            else:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return CompletionAnswer(self.text, CompletionUsage(7, 3))


async def test_stale_step_makes_no_call(tmp_path):
    client = SlowClient(0)
    result = await run_task_memory_policy(
        make_bank(), inputs(tmp_path, is_current=lambda: False), client
    )
    assert (result.decision, result.reason) == ("silent", "scope_changed") and client.calls == 0
    cancel = asyncio.Event()
    cancel.set()
    result = await run_task_memory_policy(make_bank(), inputs(tmp_path, cancel=cancel), client)
    assert result.reason == "scope_changed" and client.calls == 0


async def test_no_client_is_silent_no_client(tmp_path):
    result = await run_task_memory_policy(make_bank(), inputs(tmp_path), None)
    assert (result.decision, result.reason) == ("silent", "no_client")


async def test_deadline_aborts_the_call_and_leaves_the_bank_untouched(tmp_path):
    bank = make_bank()
    before = bank.snapshot()
    client = SlowClient(None, text=E('[{"op":"save_knowledge","content":"late"}]'))
    result = await run_task_memory_policy(bank, inputs(tmp_path, timeout_ms=30), client)
    assert (result.decision, result.reason, result.reminder) == ("timeout", "deadline", None)
    assert client.aborted.is_set()
    await asyncio.sleep(0)
    assert client.cancelled
    assert bank.snapshot() == before


async def test_cancellation_during_the_call_wins(tmp_path):
    cancel = asyncio.Event()
    client = SlowClient(None)
    asyncio.get_running_loop().call_later(0.02, cancel.set)
    result = await run_task_memory_policy(make_bank(), inputs(tmp_path, cancel=cancel), client)
    assert (result.decision, result.reason) == ("silent", "scope_changed")
    assert client.aborted.is_set()


async def test_scope_change_during_the_call_writes_nothing_but_reports_usage(tmp_path):
    bank = make_bank()
    before = bank.snapshot()
    state = {"current": True}
    reported, traced = [], []
    client = SlowClient(0.01, text=C('[{"op":"save_knowledge","content":"X"}]', "[tm-k-1] hi"))
    asyncio.get_running_loop().call_later(0.001, lambda: state.update(current=False))
    result = await run_task_memory_policy(
        bank,
        inputs(
            tmp_path,
            is_current=lambda: state["current"],
            on_step_usage=reported.append,
            on_envelope=traced.append,
        ),
        client,
    )
    assert (result.decision, result.reason) == ("silent", "scope_changed")
    assert (result.input_tokens, result.output_tokens) == (7, 3)
    assert reported == [CompletionUsage(7, 3)]
    assert traced == []
    assert bank.snapshot() == before


async def test_usage_is_reported_once_and_first_report_wins(tmp_path):
    reported = []
    client = SlowClient(0, usage_first=CompletionUsage(100, 20))
    result = await run_task_memory_policy(
        make_bank(), inputs(tmp_path, on_step_usage=reported.append), client
    )
    assert reported == [CompletionUsage(100, 20)]
    assert result.usage == CompletionUsage(100, 20) and result.input_tokens == 100


async def test_usage_reported_before_a_deadline_is_kept(tmp_path):
    reported = []
    client = SlowClient(None, usage_first=CompletionUsage(50, 0))
    result = await run_task_memory_policy(
        make_bank(), inputs(tmp_path, timeout_ms=20, on_step_usage=reported.append), client
    )
    assert result.reason == "deadline" and reported == [CompletionUsage(50, 0)]


async def test_throwing_usage_sink_and_observer_are_ignored(tmp_path):
    def boom(_):
        raise RuntimeError("sink broke")

    result = await run_task_memory_policy(
        make_bank(),
        inputs(tmp_path, on_step_usage=boom, on_envelope=boom),
        ScriptedAnswerClient(C("[]", "[tm-k-1] Keep it visible."), CompletionUsage(1, 1)),
    )
    assert result.decision == "injected"


async def test_observer_receives_the_raw_response_and_prompt(tmp_path):
    traced = []
    answer = C("[]", "[tm-k-1] Keep it visible.")
    await run_task_memory_policy(
        make_bank(), inputs(tmp_path, on_envelope=traced.append), ScriptedAnswerClient(answer)
    )
    (trace,) = traced
    assert trace.response == answer and trace.decision == "injected"
    assert trace.user_prompt.startswith("Task:\n") and trace.system_prompt_chars == len(
        POLICY_SYSTEM_PROMPT
    )


class RaisingClient:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        raise self.exc


class AbortError(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "decision", "reason"),
    [
        (EndpointBusy("slot taken"), "silent", "endpoint_busy"),
        (TimeoutError(), "timeout", "timed_out"),
        (AbortError("x"), "timeout", "timed_out"),
        (RuntimeError("The operation was aborted"), "timeout", "timed_out"),
        (OSError("read timed out"), "timeout", "timed_out"),
        (RuntimeError("Timeout waiting for slot"), "timeout", "timed_out"),
        (ValueError("HTTP 500 from server"), "silent", "client_error"),
        (RuntimeError("aborting is not a word match: abortive"), "silent", "client_error"),
    ],
)
async def test_client_errors_are_classified(tmp_path, exc, decision, reason):
    bank = make_bank()
    before = bank.snapshot()
    traced = []
    result = await run_task_memory_policy(
        bank, inputs(tmp_path, on_envelope=traced.append), RaisingClient(exc)
    )
    assert (result.decision, result.reason) == (decision, reason)
    assert result.reminder is None and bank.snapshot() == before
    assert traced and traced[0].error  # the message goes to the envelope only


def test_classify_client_error_matches_whole_words_only():
    assert classify_client_error(RuntimeError("request aborted")) == ("timeout", "timed_out")
    assert classify_client_error(RuntimeError("timeouts")) == ("silent", "client_error")


async def test_outer_cancellation_aborts_the_completion(tmp_path):
    client = SlowClient(None)
    task = asyncio.ensure_future(run_task_memory_policy(make_bank(), inputs(tmp_path), client))
    await wait_until(lambda: client.calls)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.aborted.is_set()


# --- writes and caps ---------------------------------------------------------------------


async def test_update_of_an_entry_evicted_earlier_in_the_batch_saves_a_new_entry(tmp_path):
    bank = TaskMemoryBank(knowledge_cap=2, clock=Clock())
    bank.save("knowledge", "one")  # tm-k-1, oldest
    bank.save("knowledge", "two")
    ops = '[{"op":"save_knowledge","content":"three"},{"op":"save_knowledge","content":"one again","id":"tm-k-1"}]'
    result = await run(bank, E(ops), tmp_path)
    assert result.bank_operations == 2
    assert contents(bank.knowledge) == ["three", "one again"]


_OPS = st.one_of(
    st.builds(lambda c: {"op": "update_status", "content": c}, st.text(min_size=1, max_size=20)),
    st.builds(
        lambda k, c, i: {"op": k, "content": c, **({"id": i} if i else {})},
        st.sampled_from(["save_knowledge", "save_procedural"]),
        st.text(min_size=1, max_size=20),
        st.sampled_from([None, "tm-k-1", "tm-p-2", "tm-k-3", "tm-s-9"]),
    ),
    st.builds(
        lambda i: {"op": "delete", "id": i}, st.sampled_from(["tm-k-1", "tm-p-2", "tm-k-5", "x"])
    ),
    st.just({"op": "read", "path": "a"}),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_OPS, max_size=8), min_size=1, max_size=6))
def test_applied_batches_never_leave_the_bank_over_its_caps(batches):
    bank = TaskMemoryBank(knowledge_cap=3, procedural_cap=2, clock=Clock())

    async def go():
        for batch in batches:
            await run_task_memory_policy(
                bank,
                PolicyInput(task="t", max_tokens=100),
                ScriptedAnswerClient(E(json.dumps(batch))),
            )
            assert len(bank.knowledge) <= 3 and len(bank.procedural) <= 2

    asyncio.run(go())


async def test_real_small_model_answers_never_write_a_malformed_batch(shared_dir, tmp_path):
    for path in sorted((shared_dir / "model-responses").glob("*-[0-9][0-9].txt")):
        bank = make_bank()
        before = bank.snapshot()
        text = path.read_bytes().decode("utf-8", errors="replace")
        result = await run(bank, text, tmp_path, deterministic_trigger=True)
        if result.decision == "malformed":
            assert bank.snapshot() == before, path.name
        if result.reminder is not None:
            assert len(result.reminder) <= 400
            body = result.reminder.lower()
            assert '{"' not in body and '"}' not in body and "let me" not in body
            assert "we need" not in body and "json" not in body


class ShieldedClient:
    """A client that finishes its answer even when cancelled (e.g. a shielded read)."""

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        try:
            await asyncio.Event().wait()  # until the step's deadline cancels it
        except asyncio.CancelledError:
            pass
        return CompletionAnswer(
            E('[{"op":"save_knowledge","content":"late"}]'), CompletionUsage(9, 4)
        )


async def test_a_late_answer_after_the_deadline_reports_usage_but_writes_nothing(tmp_path):
    bank = make_bank()
    before = bank.snapshot()
    reported = []
    result = await run_task_memory_policy(
        bank, inputs(tmp_path, timeout_ms=10, on_step_usage=reported.append), ShieldedClient()
    )
    assert result.reason == "deadline"
    for _ in range(5):
        await asyncio.sleep(0)
    assert reported == [CompletionUsage(9, 4)]
    assert bank.snapshot() == before


async def test_the_step_leaves_no_timer_or_waiter_tasks_behind(tmp_path):
    cancel = asyncio.Event()
    for client in (SlowClient(0), SlowClient(None)):
        await run_task_memory_policy(
            make_bank(), inputs(tmp_path, timeout_ms=20, cancel=cancel), client
        )
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == {asyncio.current_task()}


class WrongSignatureClient:
    async def complete(self, system, user, max_tokens, *, abort):  # no on_usage keyword
        return CompletionAnswer(E("[]"))


class SyncRaisingClient:
    def complete(self, *args, **kwargs):
        raise RuntimeError("route not configured")


@pytest.mark.parametrize("client", [WrongSignatureClient(), SyncRaisingClient()])
async def test_a_client_failing_before_its_first_await_is_a_client_error(tmp_path, client):
    result = await run_task_memory_policy(make_bank(), inputs(tmp_path), client)
    assert (result.decision, result.reason) == ("silent", "client_error")


async def test_a_non_text_answer_is_unparseable(tmp_path):
    class NoneClient:
        async def complete(self, system, user, max_tokens, *, abort, on_usage):
            return CompletionAnswer(None)  # type: ignore[arg-type]

    result = await run_task_memory_policy(make_bank(), inputs(tmp_path), NoneClient())
    assert (result.decision, result.reason) == ("malformed", "unparseable")


async def test_usage_given_as_an_openai_mapping_is_read(tmp_path):
    client = ScriptedAnswerClient(E("[]"), {"prompt_tokens": 11, "completion_tokens": 2})  # type: ignore[arg-type]
    result = await run_task_memory_policy(make_bank(), inputs(tmp_path), client)
    assert (result.input_tokens, result.output_tokens) == (11, 2)


def test_the_memory_domain_loads_no_model_client_or_http_stack():
    # Issue 13: memory/policy.py used to import models.errors (and with it httpx).
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import clio_acp.memory.policy, clio_acp.memory.middleware\n"
        "bad = [m for m in sys.modules if m == 'httpx' or m.startswith('clio_acp.models')]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- regressions from adversarial input ----------------------------------------


def test_path_gate_reference_too_long_for_the_os_is_invalid_path_not_an_exception(tmp_path):
    (tmp_path / "src").mkdir()
    bank = TaskMemoryBank()
    bank.save("knowledge", "The operator requires visible reminders.")
    name = "a" * 260  # one component over NAME_MAX (255): stat raises ENAMETOOLONG
    answer = (
        "<operations>[]</operations>\n"
        f"<context_for_action>[tm-k-1] see src/{name}.py now</context_for_action>"
    )
    result = asyncio.run(
        run_task_memory_policy(
            bank,
            PolicyInput(
                task="t",
                trajectory=[],
                deterministic_trigger=False,
                max_tokens=100,
                workspace_root=tmp_path,
            ),
            ScriptedAnswerClient(answer),
        )
    )
    assert (result.decision, result.reason) == ("gated", "invalid_path")
    assert bank.get("tm-k-1").injection_count == 0
