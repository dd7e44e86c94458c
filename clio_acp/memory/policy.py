"""One LLM-tier memory step: prompt, model call, envelope, writes, gates (MEMORY_SPEC §3).

Owns ``run_task_memory_policy``: it builds the prompts, races the completion
against a deadline (one default, ``MEMORY_TIMEOUT_MS_DEFAULT``, shared with
settings — bug class §11.3) and against cancellation, checks ``is_current`` before
every side effect, parses the answer (``clio_acp.memory.envelope``), applies the
repaired ops to the bank, then runs the reminder gates in §3's exact order and
records the injection of cited entries. It reports token usage at most once and
hands a content-bearing trace to an optional observer. It must not deliver a
reminder, write telemetry, propose durable records or know which model or face is
in use: the middleware (issue 3) does that with the returned ``PolicyResult``. It
must never raise for a model's answer or a client failure.

The model is reached through ``MemoryCompletionClient``, a one-method protocol
(``complete(system, user, max_tokens, *, abort, on_usage)``); the route adapter
lives in the agent layer (``clio_acp.agent.memory_hooks.RouterMemoryClient``). A
client raises memory's own ``EndpointBusy`` when the endpoint has no free slot (the
adapter maps the models layer's error to it: the memory domain loads no HTTP stack).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import Operation, parse_envelope, resolve_operations
from clio_acp.memory.gates import (
    MEMORY_PREFIX,
    EndpointBusy,
    GateInput,
    PolicyDecision,
    PolicyReason,
    classify_client_error,
    gate_reminder,
    prefixed,
)
from clio_acp.memory.op_filters import (
    filter_operations,
    protected_entry_ids,
    reminder_rejection,
    unresolved_calls,
)
from clio_acp.memory.prompts import (
    POLICY_SYSTEM_PROMPT,
    StepLike,
    build_user_prompt,
    step_to_dict,
)
from clio_acp.settings import MEMORY_MAX_OUTPUT_TOKENS_DEFAULT, MEMORY_TIMEOUT_MS_DEFAULT

__all__ = [
    "MEMORY_PREFIX",
    "TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS",
    "CompletionAnswer",
    "CompletionUsage",
    "EndpointBusy",
    "MemoryCompletionClient",
    "PolicyDecision",
    "PolicyInput",
    "PolicyReason",
    "PolicyResult",
    "PolicyTrace",
    "apply_operations",
    "classify_client_error",
    "extract_path_references",
    "invalid_workspace_path",
    "run_task_memory_policy",
]

log = logging.getLogger(__name__)

# MEMORY_SPEC §3 run order step 2: the policy's own default deadline is the settings
# default (one constant; a test pins the two together).
TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS = MEMORY_TIMEOUT_MS_DEFAULT
# MEMORY_SPEC §3 gate 8: limits on file-like references in a reminder.
MAX_PATH_REFERENCES = 16
MAX_PATH_REFERENCE_CHARS = 320


@dataclass(frozen=True)
class CompletionUsage:
    """Token usage of one completion (tokens). ``raw`` keeps the provider's object;
    ``target_id``/``model_id`` name the route that call ran on, when the client knows
    (a fallback's calls run on different targets; MEMORY_SPEC §5 usage rows)."""

    input_tokens: int = 0
    output_tokens: int = 0
    raw: Mapping[str, Any] | None = None
    target_id: str | None = None
    model_id: str | None = None

    @property
    def total_tokens(self) -> int:
        """input + output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class CompletionAnswer:
    """The model's answer text and, when the route reported it, its usage.
    ``target_id``/``model_id``: the route that answered; ``decoding``: how it was
    decoded (``grammar``, ``json_schema`` or ``free``; §12.9). None when unknown."""

    text: str
    usage: CompletionUsage | None = None
    target_id: str | None = None
    model_id: str | None = None
    decoding: str | None = None
    content_limit: int | None = None
    """With constrained decoding: the longest content string the grammar admitted."""
    reminder_limit: int | None = None
    """With constrained decoding: the longest reminder the grammar admitted."""


class MemoryCompletionClient(Protocol):
    """The memory route as the policy sees it.

    ``complete`` returns the answer text (thinking off, non-streamed or joined) within
    ``max_tokens`` completion tokens. ``abort`` is set when the step no longer wants
    the answer (deadline or cancellation); the task running ``complete`` is also
    cancelled. ``on_usage`` may be called once usage is known (even before the
    answer). Raise ``EndpointBusy`` for a busy endpoint; any other exception is
    classified by ``classify_client_error``.
    """

    async def complete(
        self,
        system: str,
        user: str,
        max_tokens: int,
        *,
        abort: asyncio.Event,
        on_usage: Callable[[CompletionUsage], None],
    ) -> CompletionAnswer:
        """The answer to ``system`` + ``user`` in at most ``max_tokens`` completion
        tokens; see the class for ``abort`` and ``on_usage``. Raises ``EndpointBusy``
        for a busy endpoint."""
        ...


@dataclass(frozen=True)
class PolicyTrace:
    """The content-bearing record of one step for the opt-in trace (§5, §11.7).

    Handed to ``PolicyInput.on_envelope`` only while the step is current; it holds
    the raw response, the user prompt and the reminder, so it must never reach the
    content-free telemetry rows.
    """

    decision: PolicyDecision
    reason: PolicyReason
    bank_operations: int
    dropped_operations: int
    cited: tuple[str, ...]
    reminder: str | None
    error: str | None
    response: str | None
    user_prompt: str
    system_prompt_chars: int


@dataclass
class PolicyInput:
    """Inputs of one policy step (MEMORY_SPEC §3 "Inputs").

    - ``max_tokens``: reminder budget in tokens (reminder cap = ×4 chars) and the
      bank render budget; ``model_max_tokens`` overrides the completion budget.
    - ``timeout_ms``: deadline; ``None`` means ``TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS``.
    - ``is_current``: ``False`` (or raising) means the step's session/generation is
      gone: no bank writes, no observer. ``cancel``: set to abandon the step.
    - ``workspace_root``: where reminder paths are resolved (default: the cwd).
    - ``on_step_usage``: receives the usage at most once; ``on_envelope``: the trace.
    """

    task: str | None
    trajectory: Sequence[StepLike] = ()
    deterministic_trigger: bool = False
    max_tokens: int = MEMORY_MAX_OUTPUT_TOKENS_DEFAULT
    model_max_tokens: int | None = None
    timeout_ms: float | None = None
    suppress_intervention: bool = False
    previous_reminder: str | None = None
    workspace_root: Path | None = None
    is_current: Callable[[], bool] | None = None
    cancel: asyncio.Event | None = None
    on_step_usage: Callable[[CompletionUsage], None] | None = None
    on_envelope: Callable[[PolicyTrace], None] | None = None
    unresolved_failures: Sequence[str] = ()
    """Ids of failure entries the rules tier still holds unresolved (§14.3: with any
    of these, or a failed call in the trajectory, a "done" status is dropped)."""


@dataclass(frozen=True)
class PolicyResult:
    """The outcome of one step (MEMORY_SPEC §3 "Result fields").

    ``reminder`` is the prefixed text to deliver (only for ``injected``); ``cited``
    the knowledge/procedural ids it cites; ``error`` the envelope-only detail of a
    rejection or client failure (never shown to the agent).
    """

    decision: PolicyDecision
    reason: PolicyReason
    reminder: str | None = None
    bank_operations: int = 0
    dropped_operations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usage: CompletionUsage | None = None
    cited: tuple[str, ...] = ()
    error: str | None = None
    target_id: str | None = None
    """The route that answered (from the client's answer), None without an answer."""
    model_id: str | None = None
    decoding: str | None = None
    """``grammar`` | ``json_schema`` | ``free`` when the answer said (§12.9)."""


# ---------------------------------------------------------------------------------
# Helpers


def _limits(answer: Any) -> tuple[int | None, int | None]:
    """(content limit, reminder limit) a constrained answer reported (§14)."""

    def bound(name: str) -> int | None:
        value = getattr(answer, name, None)
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        return value if ok else None

    return bound("content_limit"), bound("reminder_limit")


def _coerce_usage(value: Any) -> CompletionUsage | None:
    """Usage from our dataclass, an object with token attributes, or an
    OpenAI-style mapping (``prompt_tokens``/``completion_tokens``)."""
    if value is None:
        return None
    if isinstance(value, CompletionUsage):
        return value

    def pick(*names: str) -> int:
        for name in names:
            raw = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
            if isinstance(raw, int | float) and not isinstance(raw, bool):
                return max(0, int(raw))
        return 0

    raw = dict(value) if isinstance(value, Mapping) else None
    return CompletionUsage(
        input_tokens=pick("input_tokens", "prompt_tokens", "input"),
        output_tokens=pick("output_tokens", "completion_tokens", "output"),
        raw=raw,
    )


class _UsageOnce:
    """Forward usage to the sink at most once; first report wins (§3 step 3)."""

    def __init__(self, sink: Callable[[CompletionUsage], None] | None) -> None:
        self._sink = sink
        self.usage: CompletionUsage | None = None

    def __call__(self, value: Any) -> None:
        if self.usage is not None:
            return
        try:
            usage = _coerce_usage(value)
            if usage is None:
                return
            self.usage = usage
            if self._sink is not None:
                self._sink(usage)
        except Exception:  # accounting errors are swallowed (§3 step 3)
            log.debug("memory usage sink failed", exc_info=True)


def apply_operations(bank: TaskMemoryBank, operations: Iterable[Operation]) -> int:
    """Apply repaired ops in source order; returns how many were applied.

    A save whose id was evicted earlier in the same batch (cap pressure) becomes a new
    entry rather than failing. Ops the bank refuses (``KeyError``/``ValueError``)
    are skipped and not counted.
    """
    applied = 0
    for op in operations:
        try:
            if op.op == "update_status":
                bank.update_status(op.content or "", origin="model")
            elif op.op in ("save_knowledge", "save_procedural"):
                kind = "knowledge" if op.op == "save_knowledge" else "procedural"
                entry_id = op.id if op.id is not None and bank.kind_of(op.id) == kind else None
                bank.save(kind, op.content or "", entry_id, origin="model")
            elif op.op == "delete":
                bank.delete_entry(op.id or "")
            else:  # pragma: no cover - the parser admits no other op
                continue
        except (KeyError, ValueError) as exc:
            log.debug("memory op %s refused by the bank: %s", op.op, exc)
            continue
        applied += 1
    return applied


# MEMORY_SPEC §3 gate 8: a file-like reference — at least one ``dir/`` segment and a
# filename with a 1–12 char extension starting with a letter, optionally prefixed by
# ``/``, ``./`` or ``../``; bounded on the left by start/whitespace/``([`"'=`` and on
# the right by end/whitespace/``)]`"',;:!?``. A path followed by ``.`` is not
# extracted (the reference's quirk, kept: "edit src/x.ts." passes).
_PATH_REFERENCE = re.compile(
    r"(?:^|(?<=[\s(\[`\"'=]))"
    r"((?:\.\.?/|/)?(?:[\w.@+-]+/)+[\w@+-][\w.@+-]*?\.[A-Za-z][A-Za-z0-9]{0,11})"
    r"(?=$|[\s)\]`\"',;:!?])"
)


def extract_path_references(text: str) -> list[str]:
    """File-like references in ``text`` per §3 gate 8, in order of appearance."""
    return [m.group(1) for m in _PATH_REFERENCE.finditer(text)]


def invalid_workspace_path(text: str, workspace_root: Path) -> str | None:
    """Why ``text`` fails §3 gate 8 (``invalid_path``), or ``None``.

    More than 16 references, one over 320 chars, or an in-workspace reference that
    does not exist fails; references outside the workspace are not checked. Does
    file-system ``stat`` calls: run it off the event loop.
    """
    refs = extract_path_references(text)
    if len(refs) > MAX_PATH_REFERENCES:
        return f"{len(refs)} path references (max {MAX_PATH_REFERENCES})"
    root = Path(os.path.realpath(workspace_root))
    for ref in refs:
        if len(ref) > MAX_PATH_REFERENCE_CHARS:
            return f"path reference over {MAX_PATH_REFERENCE_CHARS} chars"
        resolved = Path(os.path.normpath(root / ref))
        if not resolved.is_relative_to(root):
            continue
        try:
            exists = resolved.exists()
        except OSError:  # e.g. a name over NAME_MAX (ENAMETOOLONG): it cannot exist
            exists = False
        if not exists:
            return f"path {ref} does not exist in the workspace"
    return None


def _resolved_failure(
    bank: TaskMemoryBank, cited: Sequence[str], trajectory: Sequence[StepLike]
) -> str | None:
    """§3 gate 7: a cited procedural entry says ``<call> failed`` and the latest step
    with that call description succeeded. Returns the call, or ``None``."""
    steps = [step_to_dict(step) for step in trajectory]
    latest: dict[str, str] = {}
    for step in steps:  # later steps overwrite earlier ones
        call = step.get("callDescription")
        if isinstance(call, str) and call:
            latest[call] = str(step.get("outcome"))
    for entry_id in cited:
        entry = bank.get(entry_id)
        if entry is None or entry.kind != "procedural":
            continue
        for call, outcome in latest.items():
            if entry.content.startswith(f"{call} failed") and outcome == "ok":
                return call
    return None


def _cited_ids(bank: TaskMemoryBank, reminder: str) -> tuple[str, ...]:
    """Knowledge/procedural ids of the post-write bank whose ``[id]`` is in the text
    (status never counts: §1 "Status privacy")."""
    return tuple(e.id for e in bank.entries() if f"[{e.id}]" in reminder)


# ---------------------------------------------------------------------------------
# The step


async def run_task_memory_policy(
    bank: TaskMemoryBank,
    inputs: PolicyInput,
    client: MemoryCompletionClient | None,
) -> PolicyResult:
    """Run one memory policy step (MEMORY_SPEC §3 "Run order"). Never raises for the
    model's answer or a client failure; propagates only the caller's own
    cancellation of this coroutine (after aborting the completion).

    Returns the decision and reason, the delivered (prefixed) reminder, op counts,
    usage and cited ids. The bank is written only while the step is current.

    On a deadline or cancellation the completion task is cancelled and ``abort`` is
    set. Usage the client reported through ``on_usage`` before that, or carried by an
    answer that still completes (a client that shields its read), is forwarded to
    ``on_step_usage`` — once, first report wins.
    """
    step = _PolicyStep(bank, inputs)
    if not step.current():
        return PolicyResult("silent", "scope_changed")
    if client is None:
        return PolicyResult("silent", "no_client")
    step.user_prompt = build_user_prompt(inputs.task, bank, inputs.max_tokens, inputs.trajectory)
    early = await step.ask(client)
    if early is not None:
        return early
    # -- after the answer: still ours? (§3 step 4) ----------------------------------
    if not step.current():
        return step.finish("silent", "scope_changed", observe=False)
    return await step.write_and_gate()


class _PolicyStep:
    """The state of one ``run_task_memory_policy`` call: its inputs, the usage seen
    once, the answer and its route, and the trace handed to the observer."""

    def __init__(self, bank: TaskMemoryBank, inputs: PolicyInput) -> None:
        self.bank = bank
        self.inputs = inputs
        self.usage = _UsageOnce(inputs.on_step_usage)
        self.user_prompt = ""
        self.response: str | None = None
        self.limits: tuple[int | None, int | None] = (None, None)
        self.answered: dict[str, str | None] = {}

    def current(self) -> bool:
        """False once the step was cancelled or ``is_current`` says (or raises) so."""
        cancel, is_current = self.inputs.cancel, self.inputs.is_current
        if cancel is not None and cancel.is_set():
            return False
        if is_current is None:
            return True
        try:
            return bool(is_current())
        except Exception:
            log.debug("is_current raised; treating the step as stale", exc_info=True)
            return False

    def finish(
        self,
        decision: PolicyDecision,
        reason: PolicyReason,
        *,
        reminder: str | None = None,
        bank_operations: int = 0,
        dropped_operations: int = 0,
        cited: tuple[str, ...] = (),
        error: str | None = None,
        observe: bool = True,
    ) -> PolicyResult:
        """The step's result; the trace goes to ``on_envelope`` while still current."""
        got = self.usage.usage
        result = PolicyResult(
            decision=decision,
            reason=reason,
            reminder=reminder,
            bank_operations=bank_operations,
            dropped_operations=dropped_operations,
            input_tokens=got.input_tokens if got else 0,
            output_tokens=got.output_tokens if got else 0,
            usage=got,
            cited=cited,
            error=error,
            target_id=self.answered.get("target_id"),
            model_id=self.answered.get("model_id"),
            decoding=self.answered.get("decoding"),
        )
        if observe and self.inputs.on_envelope is not None and self.current():
            self._observe(result)
        return result

    def _observe(self, result: PolicyResult) -> None:
        try:
            self.inputs.on_envelope(  # type: ignore[misc]
                PolicyTrace(
                    decision=result.decision,
                    reason=result.reason,
                    bank_operations=result.bank_operations,
                    dropped_operations=result.dropped_operations,
                    cited=result.cited,
                    reminder=result.reminder,
                    error=result.error,
                    response=self.response,
                    user_prompt=self.user_prompt,
                    system_prompt_chars=len(POLICY_SYSTEM_PROMPT),
                )
            )
        except Exception:  # a throwing observer is ignored (§3 step 8)
            log.debug("memory envelope observer failed", exc_info=True)

    def _client_failure(self, exc: BaseException) -> PolicyResult:
        decision, reason = classify_client_error(exc)
        return self.finish(decision, reason, error=f"{type(exc).__name__}: {exc}")

    async def ask(self, client: MemoryCompletionClient) -> PolicyResult | None:
        """The model call, raced against the deadline and cancellation (§3 step 2).
        Returns the result when the step ends here, else None (``response`` set)."""
        inputs = self.inputs
        timeout_ms = (
            inputs.timeout_ms
            if inputs.timeout_ms is not None
            else TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS
        )
        abort = asyncio.Event()
        try:
            completion = asyncio.ensure_future(
                client.complete(
                    POLICY_SYSTEM_PROMPT,
                    self.user_prompt,
                    inputs.model_max_tokens or inputs.max_tokens,
                    abort=abort,
                    on_usage=self.usage,
                )
            )
        except Exception as exc:  # a client that fails before awaiting (bad signature, …)
            return self._client_failure(exc)
        completion.add_done_callback(self._late_usage)
        await _race(completion, timeout_ms, inputs.cancel, abort)
        return self._settle(completion, abort, timeout_ms)

    def _late_usage(self, task: asyncio.Future[CompletionAnswer]) -> None:
        # A late answer's usage is still reported (§3 step 3); its failure is swallowed.
        if task.cancelled():
            return
        if task.exception() is None:
            self.usage(getattr(task.result(), "usage", None))

    def _settle(
        self, completion: asyncio.Future[Any], abort: asyncio.Event, timeout_ms: float
    ) -> PolicyResult | None:
        cancel = self.inputs.cancel
        if cancel is not None and cancel.is_set():
            abort.set()
            if completion.done() and not completion.cancelled() and completion.exception() is None:
                self.usage(getattr(completion.result(), "usage", None))
            completion.cancel()
            return self.finish("silent", "scope_changed", observe=False)
        if not completion.done():
            abort.set()
            completion.cancel()
            return self.finish("timeout", "deadline", error=f"no answer within {timeout_ms:g} ms")
        exc = completion.exception() if not completion.cancelled() else asyncio.CancelledError()
        if exc is not None:
            if not self.current():
                return self.finish("silent", "scope_changed", observe=False)
            return self._client_failure(exc)
        answer = completion.result()
        self.usage(getattr(answer, "usage", None))
        for key in ("target_id", "model_id", "decoding"):
            value = getattr(answer, key, None)
            self.answered[key] = value if isinstance(value, str) and value else None
        text = getattr(answer, "text", answer)
        self.response = text if isinstance(text, str) else None
        self.limits = _limits(answer)
        return None

    async def write_and_gate(self) -> PolicyResult:
        """Parse and write (§3 step 5), then the gates in §3's exact order; the
        phase-one writes stay applied whatever the gates say."""
        bank, inputs = self.bank, self.inputs
        parsed = parse_envelope(self.response, reference_text=self.user_prompt)
        if parsed.failure is not None:
            return self.finish(
                "malformed", parsed.failure, dropped_operations=parsed.dropped, error=parsed.error
            )
        unresolved = bool(inputs.unresolved_failures) or bool(unresolved_calls(inputs.trajectory))
        content_limit, reminder_limit = self.limits
        filtered = filter_operations(
            parsed.operations, unresolved_failures=unresolved, content_limit=content_limit
        )
        if parsed.reminder is not None:
            rejected = reminder_rejection(
                parsed.reminder, parsed.reminder_chars, reminder_limit=reminder_limit
            )
            if rejected is not None:
                parsed = replace(parsed, reminder=None, reminder_error=rejected)
        status = bank.status
        resolved = resolve_operations(
            filtered.operations,
            status.id if status else None,
            [e.id for e in bank.knowledge],
            [e.id for e in bank.procedural],
            protected_ids=protected_entry_ids(bank),
        )
        applied = apply_operations(bank, resolved.operations)
        dropped = (
            parsed.dropped
            + filtered.dropped
            + resolved.unresolved
            + (len(resolved.operations) - applied)
        )
        counts = {"bank_operations": applied, "dropped_operations": dropped}
        reminder = prefixed(parsed.reminder) if parsed.reminder is not None else None
        cited = _cited_ids(bank, reminder) if reminder is not None else ()
        verdict = gate_reminder(
            GateInput(
                reminder=parsed.reminder,
                reminder_error=parsed.reminder_error,
                max_tokens=inputs.max_tokens,
                suppress_intervention=inputs.suppress_intervention,
                previous_reminder=inputs.previous_reminder,
                cited=cited,
                deterministic_trigger=inputs.deterministic_trigger,
                resolved_call=_resolved_failure(bank, cited, inputs.trajectory),
            )
        )
        if verdict.decision != "injected":
            shown = cited if verdict.reason == "resolved_failure" else ()
            return self.finish(
                verdict.decision, verdict.reason, cited=shown, error=verdict.detail, **counts
            )
        assert reminder is not None
        return await self._path_gate_then_inject(reminder, cited, counts)

    async def _path_gate_then_inject(
        self, reminder: str, cited: tuple[str, ...], counts: dict[str, int]
    ) -> PolicyResult:
        """§3 gate 8 (file-system checks, off the loop), then the injection write."""
        root = self.inputs.workspace_root
        root = root if root is not None else Path.cwd()
        path_error = await asyncio.to_thread(invalid_workspace_path, reminder, root)
        if path_error is not None:
            return self.finish("gated", "invalid_path", cited=cited, error=path_error, **counts)
        if not self.current():  # the path check awaited: re-check before the injection write
            return self.finish("silent", "scope_changed", observe=False, **counts)
        self.bank.record_injection(cited)
        return self.finish("injected", "intervened", reminder=reminder, cited=cited, **counts)


async def _race(
    completion: asyncio.Future[Any],
    timeout_ms: float,
    cancel: asyncio.Event | None,
    abort: asyncio.Event,
) -> None:
    """Wait for the completion, the deadline or the step's cancellation, whichever
    comes first. The caller's own cancellation aborts the completion and propagates."""
    timer = asyncio.ensure_future(asyncio.sleep(max(0.0, timeout_ms) / 1000))
    cancelled = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    waiters: set[asyncio.Future[Any]] = {completion, timer}
    if cancelled is not None:
        waiters.add(cancelled)
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        abort.set()
        completion.cancel()
        raise
    finally:
        timer.cancel()
        if cancelled is not None:
            cancelled.cancel()


@dataclass
class ScriptedAnswerClient:
    """A client that answers every call with one fixed text (for ``clio-acp memory
    parse`` and offline replays). Records the prompts it was given."""

    text: str
    usage: CompletionUsage | None = None
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    async def complete(
        self,
        system: str,
        user: str,
        max_tokens: int,
        *,
        abort: asyncio.Event,
        on_usage: Callable[[CompletionUsage], None],
    ) -> CompletionAnswer:
        """Record the call and answer with ``text`` (and ``usage``)."""
        self.calls.append((system, user, max_tokens))
        return CompletionAnswer(self.text, self.usage)
