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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import Operation, parse_envelope, resolve_operations
from clio_acp.memory.op_filters import protected_entry_ids
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
# MEMORY_SPEC §3 gate 3: every delivered reminder starts with this prefix.
MEMORY_PREFIX = "Memory: "
# MEMORY_SPEC §3 gate 3: the reminder cap is 4 chars per token of maxTokens.
CHARS_PER_TOKEN = 4
# MEMORY_SPEC §3 gate 8: limits on file-like references in a reminder.
MAX_PATH_REFERENCES = 16
MAX_PATH_REFERENCE_CHARS = 320

PolicyDecision = Literal["silent", "injected", "gated", "timeout", "malformed"]
PolicyReason = Literal[
    "intervened",
    "model_silent",
    "duplicate_reminder",
    "suppressed",
    "uncited",
    "invalid_path",
    "resolved_failure",
    "over_budget",
    "invalid_reminder",
    "unparseable",
    "all_operations_invalid",
    "deadline",
    "timed_out",
    "endpoint_busy",
    "client_error",
    "no_client",
    "scope_changed",
]


class EndpointBusy(Exception):
    """The memory route's endpoint has no free request slot (HTTP 429/503 or local
    capacity): the step is skipped and its triggers stay pending (§3 step 7, §4)."""


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
    ) -> CompletionAnswer: ...


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


_TIMEOUT_WORDS = re.compile(r"\b(?:abort(?:ed)?|timed out|timeout)\b", re.IGNORECASE)


def classify_client_error(exc: BaseException) -> tuple[PolicyDecision, PolicyReason]:
    """Map a client exception to (decision, reason) per MEMORY_SPEC §3 step 7.

    ``EndpointBusy`` → silent/endpoint_busy; an ``AbortError``/``TimeoutError``
    (by class name anywhere in its MRO, or ``TimeoutError``/``CancelledError``
    instances) or a message matching ``abort(ed)?|timed out|timeout`` →
    timeout/timed_out; anything else → silent/client_error.
    """
    if isinstance(exc, EndpointBusy):
        return "silent", "endpoint_busy"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if (
        isinstance(exc, TimeoutError | asyncio.CancelledError)
        or names & {"AbortError", "TimeoutError"}
        or _TIMEOUT_WORDS.search(str(exc))
    ):
        return "timeout", "timed_out"
    return "silent", "client_error"


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
    cancel = inputs.cancel

    def current() -> bool:
        if cancel is not None and cancel.is_set():
            return False
        if inputs.is_current is None:
            return True
        try:
            return bool(inputs.is_current())
        except Exception:
            log.debug("is_current raised; treating the step as stale", exc_info=True)
            return False

    if not current():
        return PolicyResult("silent", "scope_changed")
    if client is None:
        return PolicyResult("silent", "no_client")

    user_prompt = build_user_prompt(inputs.task, bank, inputs.max_tokens, inputs.trajectory)
    usage = _UsageOnce(inputs.on_step_usage)
    response: str | None = None
    answered: dict[str, str | None] = {}

    def finish(
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
        got = usage.usage
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
            target_id=answered.get("target_id"),
            model_id=answered.get("model_id"),
            decoding=answered.get("decoding"),
        )
        if observe and inputs.on_envelope is not None and current():
            try:
                inputs.on_envelope(
                    PolicyTrace(
                        decision=decision,
                        reason=reason,
                        bank_operations=bank_operations,
                        dropped_operations=dropped_operations,
                        cited=cited,
                        reminder=reminder,
                        error=error,
                        response=response,
                        user_prompt=user_prompt,
                        system_prompt_chars=len(POLICY_SYSTEM_PROMPT),
                    )
                )
            except Exception:  # a throwing observer is ignored (§3 step 8)
                log.debug("memory envelope observer failed", exc_info=True)
        return result

    # -- the model call, raced against the deadline and cancellation (§3 step 2) ----
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
                user_prompt,
                inputs.model_max_tokens or inputs.max_tokens,
                abort=abort,
                on_usage=usage,
            )
        )
    except Exception as exc:  # a client that fails before awaiting (bad signature, …)
        decision, reason = classify_client_error(exc)
        return finish(decision, reason, error=f"{type(exc).__name__}: {exc}")

    def late_usage(task: asyncio.Future[CompletionAnswer]) -> None:
        # A late answer's usage is still reported (§3 step 3); its failure is swallowed.
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            answer = task.result()
            usage(getattr(answer, "usage", None))

    completion.add_done_callback(late_usage)
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

    if cancel is not None and cancel.is_set():
        abort.set()
        if completion.done() and not completion.cancelled() and completion.exception() is None:
            usage(getattr(completion.result(), "usage", None))
        completion.cancel()
        return finish("silent", "scope_changed", observe=False)
    if not completion.done():
        abort.set()
        completion.cancel()
        return finish("timeout", "deadline", error=f"no answer within {timeout_ms:g} ms")

    exc = completion.exception() if not completion.cancelled() else asyncio.CancelledError()
    if exc is not None:
        if not current():
            return finish("silent", "scope_changed", observe=False)
        decision, reason = classify_client_error(exc)
        return finish(decision, reason, error=f"{type(exc).__name__}: {exc}")
    answer = completion.result()
    usage(getattr(answer, "usage", None))
    for key in ("target_id", "model_id", "decoding"):
        value = getattr(answer, key, None)
        answered[key] = value if isinstance(value, str) and value else None
    text = getattr(answer, "text", answer)
    response = text if isinstance(text, str) else None

    # -- after the answer: still ours? (§3 step 4) ----------------------------------
    if not current():
        return finish("silent", "scope_changed", observe=False)

    # -- parse and write (§3 step 5) -------------------------------------------------
    parsed = parse_envelope(response, reference_text=user_prompt)
    if parsed.failure is not None:
        return finish(
            "malformed", parsed.failure, dropped_operations=parsed.dropped, error=parsed.error
        )
    status = bank.status
    resolved = resolve_operations(
        parsed.operations,
        status.id if status else None,
        [e.id for e in bank.knowledge],
        [e.id for e in bank.procedural],
        protected_ids=protected_entry_ids(bank),
    )
    applied = apply_operations(bank, resolved.operations)
    bank_operations = applied
    dropped = parsed.dropped + resolved.unresolved + (len(resolved.operations) - applied)
    counts = {"bank_operations": bank_operations, "dropped_operations": dropped}

    # -- gates, in §3's exact order; phase-one writes stay applied -------------------
    if parsed.reminder_error is not None:
        return finish("gated", "invalid_reminder", error=parsed.reminder_error, **counts)
    if parsed.reminder is None:
        return finish("silent", "model_silent", **counts)
    reminder = parsed.reminder
    if not reminder.startswith("Memory:"):
        reminder = MEMORY_PREFIX + reminder
    cap = inputs.max_tokens * CHARS_PER_TOKEN
    if len(reminder) > cap:
        return finish(
            "gated", "over_budget", error=f"reminder is {len(reminder)} chars (max {cap})", **counts
        )
    if inputs.suppress_intervention:
        return finish("silent", "suppressed", **counts)
    if inputs.previous_reminder is not None and reminder == inputs.previous_reminder:
        return finish("silent", "duplicate_reminder", **counts)
    cited = _cited_ids(bank, reminder)
    if not cited and not inputs.deterministic_trigger:
        return finish("gated", "uncited", **counts)
    call = _resolved_failure(bank, cited, inputs.trajectory)
    if call is not None:
        return finish(
            "gated",
            "resolved_failure",
            cited=cited,
            error=f"cited failure of {call} has since succeeded",
            **counts,
        )
    root = inputs.workspace_root if inputs.workspace_root is not None else Path.cwd()
    path_error = await asyncio.to_thread(invalid_workspace_path, reminder, root)
    if path_error is not None:
        return finish("gated", "invalid_path", cited=cited, error=path_error, **counts)
    if not current():  # the path check awaited: re-check before the injection write
        return finish("silent", "scope_changed", observe=False, **counts)
    bank.record_injection(cited)
    return finish("injected", "intervened", reminder=reminder, cited=cited, **counts)


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
        self.calls.append((system, user, max_tokens))
        return CompletionAnswer(self.text, self.usage)
