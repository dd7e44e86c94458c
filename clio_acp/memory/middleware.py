"""The memory middleware: one registration per session beside the agent loop.

Owns the hooks the agent loop and the session call (MEMORY_SPEC §4, §10, §12 items
1–6): ``turn_start``, ``before_tool``, ``after_tool``, ``turn_end``, the detached
``evaluate`` at turn end, ``on_compaction``, ``signal_loop``,
``note_workspace_change``, ``confirm_delivery``, ``reset`` and ``dispose``. Hooks
return typed effects (``AnnotateToolResult``, ``InjectReminder``, ``StopTurn``) and
never raise: an exception inside a hook is logged and yields no effects. Settings
are read live on every call. The rules tier runs inline and makes no model call;
the LLM tier runs ``run_task_memory_policy`` detached (at most one step in flight,
tied to a generation token checked before every side effect; a late completion of
an old generation never writes, delivers, proposes, emits telemetry or frees the
new generation's slot, but its usage is still recorded under its origin session).

The middleware must not import a face, the session layer or a model client: the
session passes a ``client_factory`` (settings → memory completion client or None),
an ``endpoint_busy`` probe and where telemetry and usage go.

Turns: a *turn* here is one agent-loop iteration (one model request and the tool
batch it asked for); ``turn_start`` with non-blank ``text`` marks a user prompt.
Deferred reminders (turn-end reminders and LLM-tier reminders) wait in a buffer and
are returned by the next ``turn_start``, the next boundary that can carry them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from clio_acp.memory.bank import TaskMemoryBank, estimate_tokens, utc_now_iso
from clio_acp.memory.calls import (
    call_description,
    canonical_call,
    cap_digest,
    classify_exit,
    error_digest,
    error_signature,
    is_state_changing,
    looks_environmental,
    meaningful_signature,
    ok_digest,
    operation_fingerprint,
    problem_signature,
    shell_command_of,
)
from clio_acp.memory.rules import (
    RulesMemory,
    annotation_text,
    environment_text,
    extract_requirements,
    loop_stop_text,
    turn_end_text,
)
from clio_acp.memory.spend import UsageFigures, UsageRow, UsageTiming, append_usage_row
from clio_acp.memory.telemetry import (
    MemoryTrace,
    StepRecord,
    TelemetrySink,
    bank_delta,
)
from clio_acp.settings import MemorySettings

__all__ = [
    "ACTIVITY_RING",
    "RESTORE_PREFIX",
    "AnnotateToolResult",
    "Effect",
    "InjectReminder",
    "MemoryMiddleware",
    "StopTurn",
    "ToolCall",
    "ToolOutcome",
    "render_activity",
]

log = logging.getLogger(__name__)

_NO_DELTA = bank_delta(None, None)
# MEMORY_SPEC §4 "lastDecision rules": the activity ring holds 20 events.
ACTIVITY_RING = 20
# MEMORY_SPEC §4 "Post-compaction restore".
RESTORE_PREFIX = "Memory: execution state restored after compaction:\n"
RESUME_PREFIX = "Memory: execution state restored from the saved session:\n"
# MEMORY_SPEC §4: currentTask keeps the first 2000 chars of the turn text.
TASK_MAX_CHARS = 2000
# MEMORY_SPEC §4 "Post-compaction restore": this stage does not arm the restore.
WORKING_SET_RECALL = "working_set_recall"
# §12.3: different commands failing with one environment-shaped problem signature
# (missing command/module, permissions, network, …) needed to call it an
# environment fault; a generic signature needs more evidence, since on the real
# trajectories two commands exercising the same broken code also fail alike.
ENV_COMMANDS = 2
ENV_COMMANDS_GENERIC = 3
# MEMORY_SPEC §4 runPromptedStep: two consecutive llm timeouts back the tier off.
TIMEOUT_BACKOFF = 2


# -- hook inputs and effects ------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the loop is about to run it. ``kind`` is the session event's
    tool kind (edit, delete, move, execute, read, …) when known."""

    tool_name: str
    args: Any = None
    tool_call_id: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class ToolOutcome:
    """A finished tool call. ``is_error`` is the tool's own verdict (§4: outcome is
    error iff the result kind is error); ``exit_code`` lets §12.2 reclassify
    informative exits; ``digest`` is the canonical disposition digest if the tool
    supplies one (otherwise the middleware builds the legacy digest)."""

    output: str = ""
    is_error: bool = False
    exit_code: int | None = None
    digest: str | None = None


@dataclass(frozen=True)
class AnnotateToolResult:
    """Append ``text`` to the result of ``tool_call_id`` before the model sees it."""

    tool_call_id: str | None
    text: str
    cited: tuple[str, ...]
    trigger: str
    severity: Literal["warn", "info"] = "warn"


@dataclass(frozen=True)
class InjectReminder:
    """Carry ``text`` into the next model request. A ``restore`` offer (§12.6) stays
    pending until ``confirm_delivery(offer_id)`` says the request carrying it was sent."""

    text: str
    cited: tuple[str, ...]
    trigger: str
    channel: Literal["reminder", "restore"] = "reminder"
    offer_id: str | None = None


@dataclass(frozen=True)
class StopTurn:
    """§12.4 loop guard: end the current user turn and show ``notice`` to the user."""

    notice: str
    cited: tuple[str, ...] = ()
    trigger: str = "loop_signal"


Effect = AnnotateToolResult | InjectReminder | StopTurn


class MemoryCompletionClient(Protocol):
    """The memory route (see ``clio_acp.memory.policy.MemoryCompletionClient``)."""

    async def complete(self, system: str, user: str, max_tokens: int, **kwargs: Any) -> Any: ...


@dataclass
class _Step:
    """One observed tool call (§4 trajectory step)."""

    step: int
    tool_name: str
    fingerprint: str
    call: str
    outcome: Literal["ok", "error"] = "ok"
    digest: str = ""
    provenance: str = "legacy"
    key: tuple[str, str] | None = None
    informative: bool = False
    state_changing: bool = False
    tool_call_id: str | None = None

    def to_policy(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "toolName": self.tool_name,
            "operationFingerprint": self.fingerprint,
            "callDescription": self.call,
            "outcome": self.outcome,
            "resultDigest": self.digest,
            "resultDigestProvenance": self.provenance,
        }


@dataclass
class _Deferred:
    reminder: InjectReminder
    turn: int
    epoch: int


@dataclass
class _InFlight:
    """The step in flight, with everything captured when it was *launched* (the
    task body starts later, after a reset or compaction may already have happened)."""

    generation: int
    tier: str
    epoch: int
    cancel: asyncio.Event
    origin_session: str | None
    task: asyncio.Task[None] | None = None


@dataclass
class _Offer:
    offer_id: str
    text: str
    cited: tuple[str, ...]
    trigger: str


def render_activity(event: dict[str, Any]) -> str:
    """§4: ``<trig+trig> <decision> [reason unless intervened] [Nw] [N cited]``."""
    parts = ["+".join(event["triggerReasons"]), event["decision"]]
    if event["reason"] != "intervened":
        parts.append(event["reason"])
    if event["bankWrites"]:
        parts.append(f"{event['bankWrites']}w")
    if event["citedEntries"]:
        parts.append(f"{event['citedEntries']} cited")
    return " ".join(parts)


def _collapse_keep_newlines(text: str) -> str:
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


def _cited_ids(text: str, bank: TaskMemoryBank) -> tuple[str, ...]:
    ids = bank.ids()
    status = bank.status
    found = [m for m in re.findall(r"\[(tm-[skp]-[0-9a-z]+)\]", text) if m in ids]
    return tuple(dict.fromkeys(i for i in found if not (status and i == status.id)))


@dataclass
class _State:
    """Everything ``reset()`` clears (§4 "reset()")."""

    tool_step: int = 0
    tools_since_memory_step: int = 0
    consecutive_errors: int = 0
    pending: OrderedDict[str, _Step] = field(default_factory=OrderedDict)
    trajectory: deque[_Step] = field(default_factory=deque)
    rules: RulesMemory = field(default_factory=RulesMemory)
    last_turn_end_step: int = 0
    compaction_pending: bool = False
    compaction_epoch: int = 0
    last_injected_key: tuple[str, str] | None = None
    last_injected_message: str | None = None
    current_task: str | None = None
    turn: int = 0
    turn_id: str | None = None
    last_prompted_boundary: str | None = None
    last_decision: dict[str, Any] | None = None
    triggers: list[str] = field(default_factory=list)
    activity: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=ACTIVITY_RING))
    annotated: set[tuple[str, str]] = field(default_factory=set)
    rules_spoke_since_step: bool = False
    annotated_since_turn_end: bool = False
    spoke_this_boundary: bool = False
    consecutive_llm_timeouts: int = 0
    deferred: list[_Deferred] = field(default_factory=list)
    offer: _Offer | None = None
    observed_session: str | None = None
    turn_aborted: bool = False


class MemoryMiddleware:
    """The memory registration of one session (MEMORY_SPEC §4).

    ``settings`` returns the live ``MemorySettings`` (or a whole ``Settings``; its
    ``context.memory`` is used) and is called on every hook. ``client_factory`` maps
    settings to a memory completion client, or None (rules tier only; also when no
    target is set). ``endpoint_busy`` reports a full endpoint (§10 route safety).
    ``telemetry`` receives v2 rows; ``usage_path`` receives usage rows;
    ``delivers_reminders`` is False for headless hosts (§10: ``no_consumer``).
    ``on_injected_entries`` is called with the ids an LLM-tier reminder cited
    (durable proposals, §6); it is never called for a stale generation.
    """

    def __init__(
        self,
        settings: Callable[[], Any],
        *,
        bank: TaskMemoryBank | None = None,
        telemetry: TelemetrySink | None = None,
        trace: MemoryTrace | None = None,
        client_factory: Callable[[MemorySettings], Any] | None = None,
        endpoint_busy: Callable[[], bool] | None = None,
        delivers_reminders: bool = True,
        usage_path: Path | None = None,
        session_id: str | None = None,
        repo_identity: str | None = None,
        workspace_root: Path | None = None,
        on_injected_entries: Callable[[tuple[str, ...]], None] | None = None,
    ) -> None:
        self._settings_source = settings
        self.bank = bank or TaskMemoryBank()
        self.telemetry = telemetry or TelemetrySink(None)
        self.trace = trace or MemoryTrace(None)
        self._client_factory = client_factory
        self._endpoint_busy = endpoint_busy
        self.delivers_reminders = delivers_reminders
        self.usage_path = usage_path
        self.session_id = session_id
        self.repo_identity = repo_identity
        self.workspace_root = workspace_root
        self._on_injected_entries = on_injected_entries
        self._generation = 0
        self._cancel = asyncio.Event()
        self._disposed = False
        self._in_flight: _InFlight | None = None
        self._s = _State(observed_session=session_id)
        self._last_snapshot = self._delta_snapshot()
        self._bank_dirty = False
        self.last_observation: dict[str, Any] | None = None
        """The classification of the latest observed tool call (replay, board)."""
        self.usage_log: list[dict[str, Any]] = []
        """Usage of every llm call by origin session (also the late ones)."""

    # -- settings and plumbing ------------------------------------------------------------

    def settings(self) -> MemorySettings:
        value = self._settings_source()
        context = getattr(value, "context", None)
        if context is not None and hasattr(context, "memory"):
            value = context.memory
        return value if isinstance(value, MemorySettings) else MemorySettings()

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def step_in_flight(self) -> bool:
        return self._in_flight is not None

    @property
    def tool_step(self) -> int:
        return self._s.tool_step

    @property
    def pending_triggers(self) -> tuple[str, ...]:
        return tuple(self._s.triggers)

    @property
    def last_decision(self) -> dict[str, Any] | None:
        return dict(self._s.last_decision) if self._s.last_decision else None

    @property
    def activity(self) -> list[dict[str, Any]]:
        return list(self._s.activity)

    def _active(self, settings: MemorySettings) -> bool:
        return settings.enabled and not self._disposed

    def _observe(self, session_id: str | None) -> None:
        """§4: a hook carrying a different session id than the last observed one
        resets the registration first."""
        if session_id is None:
            return
        if self._s.observed_session is not None and session_id != self._s.observed_session:
            self.reset()
        self._s.observed_session = session_id
        self.session_id = session_id

    def _delta_snapshot(self) -> dict[str, Any]:
        """What ``bank_delta`` compares (id, content, createdAt per class): cheaper
        than a full deep-copied snapshot, taken once per telemetry row."""

        def light(entry: Any) -> dict[str, str]:
            return {"id": entry.id, "content": entry.content, "createdAt": entry.created_at}

        status = self.bank.status
        return {
            "status": light(status) if status else None,
            "knowledge": [light(e) for e in self.bank.knowledge],
            "procedural": [light(e) for e in self.bank.procedural],
        }

    def _guard(self, name: str, func: Callable[[], list[Effect]]) -> list[Effect]:
        try:
            return func()
        except Exception:
            log.exception("memory hook %s failed; no effects", name)
            return []

    def _add_trigger(self, trigger: str) -> None:
        if trigger not in self._s.triggers:
            self._s.triggers.append(trigger)

    def _emit(
        self,
        triggers: Iterable[str],
        tier: str,
        decision: str,
        reason: str,
        *,
        cited: int = 0,
        bank_operations: int = 0,
        dropped_operations: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        latency_ms: float = 0.0,
        target_id: str | None = None,
        model_id: str | None = None,
        decoding: str | None = None,
        update_last_decision: bool = True,
    ) -> None:
        """One telemetry row and one activity event (§4, §5); ``decoding`` (llm rows)
        is the answer's decoding mode (§12.9)."""
        unique = list(dict.fromkeys(triggers))[:3] or ["manual"]
        if tier == "llm" or self._bank_dirty:
            snapshot = self._delta_snapshot()
            delta = bank_delta(self._last_snapshot, snapshot)
            self._last_snapshot = snapshot
            self._bank_dirty = False
        else:  # nothing written since the last row (writes by others land in the next one)
            delta = _NO_DELTA
        at = utc_now_iso()
        latency = max(0.0, round(latency_ms, 3)) if math.isfinite(latency_ms) else 0.0
        try:
            record = StepRecord.model_validate(
                {
                    "version": 2,
                    "at": at,
                    "triggerReasons": unique,
                    "tier": tier,
                    "bankDelta": delta.model_dump(),
                    "decision": decision,
                    "reason": reason,
                    "bankOperations": bank_operations,
                    "droppedOperations": dropped_operations,
                    "citedEntries": cited,
                    "tokenCost": {
                        "input": input_tokens,
                        "output": output_tokens,
                        "total": input_tokens + output_tokens,
                    },
                    "latencyMs": latency,
                    **(
                        {"targetId": target_id, "modelId": model_id}
                        if target_id and model_id
                        else {}
                    ),
                    **({"decoding": decoding} if decoding and tier == "llm" else {}),
                }
            )
            self.telemetry.emit(record)
        except Exception:
            log.debug("memory telemetry row rejected", exc_info=True)
        event = {
            "at": at,
            "triggerReasons": unique,
            "tier": tier,
            "decision": decision,
            "reason": reason,
            "citedEntries": cited,
            "bankWrites": delta.writes,
            "latencyMs": latency,
        }
        self._s.activity.appendleft(event)
        if update_last_decision:
            self._s.last_decision = event

    # -- turn_start -----------------------------------------------------------------------

    def turn_start(
        self, turn_id: str | None = None, text: str = "", *, session_id: str | None = None
    ) -> list[Effect]:
        """Start of an agent-loop iteration (before the model request).

        Non-blank ``text`` is a user prompt: it becomes the current task (first 2000
        chars) and §12.5 captures its explicit requirements as knowledge entries.
        Clears the per-turn annotated set. Returns the pending restore offer (§4,
        §12.6) and every deferred reminder still valid (§4 onDeferredReminder)."""
        return self._guard("turn_start", lambda: self._turn_start(turn_id, text, session_id))

    def _turn_start(self, turn_id: str | None, text: str, session_id: str | None) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings):
            return []
        s = self._s
        s.turn += 1
        s.turn_id = turn_id
        s.turn_aborted = False
        s.annotated.clear()
        s.spoke_this_boundary = False
        if text and text.strip():
            s.current_task = text.strip()[:TASK_MAX_CHARS]
            if settings.capture_requirements:
                self._capture_requirements(text)
        effects: list[Effect] = []
        if s.compaction_pending:
            s.compaction_pending = False
            self._make_restore_offer(settings, RESTORE_PREFIX)
        if s.offer is not None:
            offer = s.offer
            effects.append(
                InjectReminder(offer.text, offer.cited, offer.trigger, "restore", offer.offer_id)
            )
        for item in s.deferred:
            if item.epoch == s.compaction_epoch:
                effects.append(item.reminder)
        s.deferred.clear()
        return effects

    def _capture_requirements(self, text: str) -> None:
        self._bank_dirty = True
        rules = self._s.rules
        for sentence in extract_requirements(text):
            key = sentence.lower()
            if key in rules.requirements:
                continue
            rules.requirements.add(key)
            try:
                self.bank.save("knowledge", f"Requirement from the user: {sentence}")
            except ValueError:
                continue

    def _make_restore_offer(self, settings: MemorySettings, prefix: str) -> None:
        s = self._s
        budget = settings.max_output_tokens - estimate_tokens(prefix)
        body = self.bank.render_restored_state(budget)
        if settings.restore_unresolved_failures:
            # §12.6: unresolved failure entries follow, within the same budget.
            lines = [body] if body else []
            for entry_id in s.rules.unresolved_entry_ids(self.bank):
                entry = self.bank.get(entry_id)
                if entry is None:
                    continue
                line = f"- [{entry.id}] {entry.kind}: {entry.content}"
                if estimate_tokens("\n".join([*lines, line])) <= budget:
                    lines.append(line)
            body = "\n".join(lines)
        if not body:
            s.offer = None
            self._emit(["post_compaction"], "rules", "silent", "bank_empty")
            return
        text = prefix + body
        s.offer = _Offer(
            uuid.uuid4().hex[:12], text, _cited_ids(text, self.bank), "post_compaction"
        )

    def confirm_delivery(self, offer_id: str) -> None:
        """§12.6: the model request carrying restore offer ``offer_id`` was sent.
        Consumes the offer, counts its citations and writes its telemetry row. An
        unknown or superseded id does nothing."""

        def run() -> list[Effect]:
            s = self._s
            if s.offer is None or s.offer.offer_id != offer_id:
                return []
            offer, s.offer = s.offer, None
            ids = re.findall(r"\[(tm-[skp]-[0-9a-z]+)\]", offer.text)
            self.bank.record_injection(ids)
            s.last_injected_message = offer.text
            s.rules_spoke_since_step = True
            self._emit([offer.trigger], "rules", "injected", "intervened", cited=len(offer.cited))
            return []

        self._guard("confirm_delivery", run)

    # -- tools ----------------------------------------------------------------------------

    def _prepare(self, call: ToolCall) -> _Step | None:
        name = (call.tool_name or "").strip()
        if not name:
            return None  # §4: no tool name → ignored entirely
        canonical = canonical_call(name, call.args)
        step = _Step(
            step=0,
            tool_name=name,
            fingerprint=operation_fingerprint(canonical),
            call=call_description(canonical),
            tool_call_id=call.tool_call_id,
            state_changing=is_state_changing(name, call.args, call.kind),
        )
        return step

    def before_tool(self, call: ToolCall, *, session_id: str | None = None) -> list[Effect]:
        """§4: prepare the step and keep it under ``tool_call_id`` (or
        ``anonymous:<fp>``), bounded by the trajectory window (FIFO)."""

        def run() -> list[Effect]:
            self._observe(session_id)
            settings = self.settings()
            if not self._active(settings):
                return []
            step = self._prepare(call)
            if step is None:
                return []
            key = call.tool_call_id or f"anonymous:{step.fingerprint}"
            pending = self._s.pending
            pending[key] = step
            while len(pending) > settings.trajectory_steps:
                pending.popitem(last=False)
            return []

        return self._guard("before_tool", run)

    def after_tool(
        self, call: ToolCall, outcome: ToolOutcome, *, session_id: str | None = None
    ) -> list[Effect]:
        """§4 tool observation plus §12.1–12.4. Returns at most one
        ``AnnotateToolResult`` (repeated failure or environmental failure) and, at
        the ``loopStopRepeats``-th identical repeat, a ``StopTurn``."""
        return self._guard("after_tool", lambda: self._after_tool(call, outcome, session_id))

    def _after_tool(
        self, call: ToolCall, outcome: ToolOutcome, session_id: str | None
    ) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings):
            return []
        s = self._s
        name = (call.tool_name or "").strip()
        if not name:
            return []
        step = None
        if call.tool_call_id and call.tool_call_id in s.pending:
            step = s.pending.pop(call.tool_call_id)
        else:
            probe = self._prepare(call)
            if probe is not None:
                step = s.pending.pop(f"anonymous:{probe.fingerprint}", None) or probe
        if step is None:
            return []
        s.tool_step += 1
        s.tools_since_memory_step += 1
        step.step = s.tool_step
        if s.tools_since_memory_step >= settings.cadence_tool_calls:
            self._add_trigger("interval")

        # §12.2: informative non-zero exits are not errors.
        is_error = bool(outcome.is_error)
        command = shell_command_of(name, call.args)
        if is_error and command is not None and settings.exit_code_semantics:
            verdict = classify_exit(command, outcome.exit_code)
            if verdict.meaning == "informative":
                is_error = False
                step.informative = True
                step.digest = cap_digest(verdict.note)

        epoch_before = s.rules.state_epoch
        if step.state_changing and settings.state_change_resets_repeats:
            s.rules.note_change()

        effects: list[Effect] = []
        if is_error:
            step.outcome = "error"
            if outcome.digest:
                step.digest, step.provenance = cap_digest(outcome.digest), "canonical"
            else:
                step.digest = error_digest(outcome.output, exit_code=outcome.exit_code)
            s.consecutive_errors += 1
            if s.consecutive_errors >= 2:
                self._add_trigger("tool_error_streak")
            step.key = (
                step.fingerprint,
                error_signature(outcome.output, exit_code=outcome.exit_code),
            )
        else:
            if not step.digest:
                if outcome.digest:
                    step.digest, step.provenance = cap_digest(outcome.digest), "canonical"
                else:
                    step.digest = ok_digest(outcome.output)
            s.consecutive_errors = 0
            s.rules.note_success(step.fingerprint)

        s.trajectory.append(step)
        while len(s.trajectory) > settings.trajectory_steps:
            s.trajectory.popleft()
        self.last_observation = {
            "step": step.step,
            "outcome": step.outcome,
            "informative": step.informative,
            "stateChanging": step.state_changing,
            "digest": step.digest,
        }

        if is_error:
            effects.extend(self._on_failure(settings, step, outcome, epoch_before))
        return effects

    def _on_failure(
        self, settings: MemorySettings, step: _Step, outcome: ToolOutcome, epoch_before: int
    ) -> list[Effect]:
        s = self._s
        rules = s.rules
        assert step.key is not None
        effects: list[Effect] = []
        self._bank_dirty = True

        # §12.3: different commands failing alike are an environment fault.
        env = None
        signature = problem_signature(outcome.output, exit_code=outcome.exit_code)
        if settings.environmental_failures and meaningful_signature(signature):
            env = rules.note_environment(signature, step.fingerprint, step.step, step.digest)
            needed = ENV_COMMANDS if looks_environmental(signature) else ENV_COMMANDS_GENERIC
            if len(env.fingerprints) >= needed:
                if env.entry_id is None or self.bank.kind_of(env.entry_id) != "knowledge":
                    content = (
                        f"Environment: tool channel failing since step {env.first_step}: "
                        f"{env.digest}"
                    )
                    env.entry_id = self.bank.save("knowledge", content).id
                    text = environment_text(
                        env.entry_id, env.first_step, env.digest, len(env.fingerprints)
                    )
                    effects.extend(
                        self._annotate(settings, step, text, (env.entry_id,), "environment")
                    )
                return effects  # an environment fault blames no single command

        record = rules.record_failure(
            self.bank, step.fingerprint, step.call, step.digest, step.step
        )
        repeat = rules.count_repeat(step.key, step.step, epoch_before)
        if settings.state_change_resets_repeats:
            repeated = repeat.count >= 2
        else:  # reference rule: the window holds ≥2 errors with this fingerprint
            repeated = (
                sum(
                    1
                    for t in s.trajectory
                    if t.outcome == "error" and t.fingerprint == step.fingerprint
                )
                >= 2
            )
        if not repeated:
            return effects

        if settings.escalation and repeat.count >= settings.loop_stop_repeats:
            self.signal_loop()
            notice = loop_stop_text(step.call, repeat.count, step.digest)
            self.bank.record_injection([record.entry_id])
            self._emit(
                ["loop_signal", "repeated_failure"], "rules", "injected", "loop_stop", cited=1
            )
            s.rules_spoke_since_step = True
            return [StopTurn(notice, (record.entry_id,))]

        spent_key = step.key if settings.state_change_resets_repeats else (step.fingerprint, "")
        if spent_key in s.annotated:
            return effects  # §4: spent once per key per turn
        text = annotation_text(record.entry_id, step.call, record.first_step, record.digest)
        effects.extend(
            self._annotate(settings, step, text, (record.entry_id,), "repeated_failure", spent_key)
        )
        return effects

    def _annotate(
        self,
        settings: MemorySettings,
        step: _Step,
        text: str,
        cited: tuple[str, ...],
        trigger: str,
        spent_key: tuple[str, str] | None = None,
    ) -> list[Effect]:
        s = self._s
        text = _collapse_keep_newlines(text)[: settings.max_output_tokens * 4]
        telemetry_trigger = (
            "repeated_failure" if trigger == "repeated_failure" else "tool_error_streak"
        )
        if spent_key is not None:
            s.annotated.add(spent_key)
        if settings.escalation and text == s.last_injected_message:
            # §12.4: identical reminder text is never delivered twice in a row.
            self._emit([telemetry_trigger], "rules", "silent", "duplicate_reminder")
            return []
        s.last_injected_key = step.key
        s.last_injected_message = text
        s.rules_spoke_since_step = True
        s.annotated_since_turn_end = True
        s.spoke_this_boundary = True
        self.bank.record_injection(cited)
        reason = "intervened" if trigger == "repeated_failure" else "environmental_failure"
        self._emit([telemetry_trigger], "rules", "injected", reason, cited=len(cited))
        return [AnnotateToolResult(step.tool_call_id, text, cited, trigger)]

    # -- turn_end -------------------------------------------------------------------------

    def turn_end(
        self, turn_id: str | None = None, *, aborted: bool = False, session_id: str | None = None
    ) -> list[Effect]:
        """§4 turn_end (sync). A no-tool continuation does nothing. Otherwise the
        newest unreported repeated failure becomes a deferred reminder (delivered by
        the next ``turn_start``). An ``aborted`` turn's reminders are dropped."""
        return self._guard("turn_end", lambda: self._turn_end(turn_id, aborted, session_id))

    def _turn_end(self, turn_id: str | None, aborted: bool, session_id: str | None) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        if not self._active(settings):
            return []
        s = self._s
        if aborted or s.turn_aborted:
            # A reminder for an aborted turn is dropped, buffered ones included.
            s.deferred = [d for d in s.deferred if d.turn != s.turn]
            s.last_turn_end_step = max(s.last_turn_end_step, s.tool_step)
            return []
        if s.tool_step <= s.last_turn_end_step:
            return []  # §11.12: no-tool continuation
        match = None
        for step in reversed(s.trajectory):
            if step.step <= s.last_turn_end_step or step.outcome != "error" or step.key is None:
                continue
            if step.key == s.last_injected_key:
                continue
            record = s.rules.failures.get(step.fingerprint)
            repeat = s.rules.repeats.get(step.key)
            if record is None or repeat is None:
                continue
            if settings.state_change_resets_repeats:
                if repeat.count < 2:
                    continue
            elif (
                sum(
                    1
                    for t in s.trajectory
                    if t.outcome == "error" and t.fingerprint == step.fingerprint
                )
                < 2
            ):
                continue
            if step.key in s.annotated:
                continue
            match = (step, record)
            break
        s.last_turn_end_step = s.tool_step
        if match is None:
            if s.annotated_since_turn_end:
                s.annotated_since_turn_end = False
                return []  # the mid-turn annotation already reported this boundary
            self._emit(["turn_end"], "rules", "silent", "no_repeated_failure")
            return []
        s.annotated_since_turn_end = False
        step, record = match
        text = _collapse_keep_newlines(
            turn_end_text(record.entry_id, step.call, record.first_step, record.digest)
        )[: settings.max_output_tokens * 4]
        if settings.escalation and text == s.last_injected_message:
            self._emit(["repeated_failure"], "rules", "silent", "duplicate_reminder")
            return []
        s.last_injected_key = step.key
        s.last_injected_message = text
        s.rules_spoke_since_step = True
        s.spoke_this_boundary = True
        s.annotated.add(step.key)
        self.bank.record_injection([record.entry_id])
        self._emit(["repeated_failure"], "rules", "injected", "intervened", cited=1)
        reminder = InjectReminder(text, (record.entry_id,), "repeated_failure")
        s.deferred.append(_Deferred(reminder, s.turn, s.compaction_epoch))
        return []

    # -- deferred reminders -----------------------------------------------------------------

    def take_deferred(self) -> list[InjectReminder]:
        """Drain the deferred reminders still valid (§4 onDeferredReminder) for the
        next model request: turn-end and LLM-tier reminders not superseded by a
        compaction (§12.6). ``turn_start`` drains them too."""

        def run() -> list[Effect]:
            s = self._s
            if self._disposed:
                s.deferred.clear()
                return []
            taken: list[Effect] = [d.reminder for d in s.deferred if d.epoch == s.compaction_epoch]
            s.deferred.clear()
            return taken

        return [e for e in self._guard("take_deferred", run) if isinstance(e, InjectReminder)]

    def discard_deferred(self) -> None:
        """The current turn was aborted: its buffered reminders are dropped, and so
        is the reminder its ``turn_end`` would produce. A pending restore offer is
        kept (§12.6: not consumed until really delivered)."""
        self._s.deferred.clear()
        self._s.turn_aborted = True

    # -- other signals ----------------------------------------------------------------------

    def on_compaction(
        self, stage: str | None = None, *, offer_now: bool = False, session_id: str | None = None
    ) -> list[Effect]:
        """§4/§12.6: a compaction happened (nothing for the ``working_set_recall``
        stage). Buffered reminders, a pending offer and in-flight steps started
        before it lose their authority. The restore is offered at the next
        ``turn_start``, or returned right away with ``offer_now`` (for a compaction
        in the middle of a turn, whose next request must carry it)."""

        def run() -> list[Effect]:
            self._observe(session_id)
            settings = self.settings()
            if not self._active(settings) or stage == WORKING_SET_RECALL:
                return []
            s = self._s
            s.compaction_epoch += 1
            s.deferred.clear()
            s.offer = None
            if not offer_now:
                s.compaction_pending = True
                return []
            return self._offer_effects(settings, RESTORE_PREFIX)

        return self._guard("on_compaction", run)

    def _offer_effects(self, settings: MemorySettings, prefix: str) -> list[Effect]:
        self._make_restore_offer(settings, prefix)
        offer = self._s.offer
        if offer is None:
            return []
        return [InjectReminder(offer.text, offer.cited, offer.trigger, "restore", offer.offer_id)]

    def offer_restore_after_resume(self) -> list[Effect]:
        """§12.6: after a resumed session's bank (and ``import_state``) was restored,
        offer its state — status, knowledge, unresolved failures — for the next
        request. The offer stays pending until ``confirm_delivery``."""

        def run() -> list[Effect]:
            settings = self.settings()
            if not self._active(settings):
                return []
            return self._offer_effects(settings, RESUME_PREFIX)

        return self._guard("offer_restore_after_resume", run)

    def signal_loop(self) -> None:
        """§4: the host loop guard's verdict; adds the ``loop_signal`` trigger."""

        def run() -> list[Effect]:
            if not self._disposed:
                self._add_trigger("loop_signal")
            return []

        self._guard("signal_loop", run)

    def note_workspace_change(self) -> None:
        """§12.1: the file watcher saw the workspace change; repeat counts restart.
        The session core calls this from its watcher (watchfiles)."""

        def run() -> list[Effect]:
            if not self._disposed and self.settings().state_change_resets_repeats:
                self._s.rules.note_change()
            return []

        self._guard("note_workspace_change", run)

    # -- LLM tier -----------------------------------------------------------------------------

    async def evaluate(
        self, turn_id: str | None = None, *, session_id: str | None = None
    ) -> list[Effect]:
        """§4 evaluateAsync(turn_end): maybe start the detached LLM-tier step and
        return at once (always no effects; its reminder is delivered later)."""
        return self.evaluate_detached(turn_id, session_id=session_id)

    def evaluate_detached(
        self, turn_id: str | None = None, *, session_id: str | None = None
    ) -> list[Effect]:
        """``evaluate`` for synchronous callers; must run inside the event loop,
        which owns the detached step task. Never raises."""
        try:
            return self._evaluate(turn_id, session_id)
        except Exception:
            log.exception("memory evaluate failed; no effects")
            return []

    def _evaluate(self, turn_id: str | None, session_id: str | None) -> list[Effect]:
        self._observe(session_id)
        settings = self.settings()
        s = self._s
        if not self._active(settings) or not s.triggers:
            return []
        boundary = turn_id or f"tool-step:{s.tool_step}"
        if boundary == s.last_prompted_boundary:
            return []
        if not self.delivers_reminders:
            self._emit(s.triggers, "rules", "silent", "no_consumer", update_last_decision=False)
            s.triggers.clear()
            return []
        if self._in_flight is not None:
            self._emit(
                s.triggers,
                self._in_flight.tier,
                "dropped",
                "step_in_flight",
                update_last_decision=False,
            )
            return []  # §11.11: the triggers stay pending
        s.last_prompted_boundary = boundary
        triggers = list(s.triggers)
        s.triggers.clear()
        s.tools_since_memory_step = 0
        s.consecutive_errors = 0
        rules_spoke = s.rules_spoke_since_step or s.spoke_this_boundary
        s.rules_spoke_since_step = False
        deterministic = any(t != "interval" for t in triggers)
        flight = _InFlight(
            self._generation, "llm", s.compaction_epoch, self._cancel, self.session_id
        )
        self._in_flight = flight
        flight.task = asyncio.get_running_loop().create_task(
            self._prompted_step(flight, triggers, rules_spoke, deterministic)
        )
        # Also when the task is cancelled before its body ever ran.
        flight.task.add_done_callback(lambda _task: self._release(flight))
        return []

    def _release(self, flight: _InFlight) -> None:
        """§11.14: only the step's own generation frees the slot."""
        if self._in_flight is flight:
            self._in_flight = None

    def _is_current(self, generation: int, epoch: int) -> bool:
        return (
            not self._disposed
            and generation == self._generation
            and epoch == self._s.compaction_epoch
        )

    async def _prompted_step(
        self, flight: _InFlight, triggers: list[str], suppress: bool, deterministic: bool
    ) -> None:
        generation, epoch = flight.generation, flight.epoch
        cancel, origin_session = flight.cancel, flight.origin_session
        try:
            await self._run_prompted_step(
                generation, epoch, cancel, origin_session, triggers, suppress, deterministic
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("memory step failed")
        finally:
            self._release(flight)

    async def _run_prompted_step(
        self,
        generation: int,
        epoch: int,
        cancel: asyncio.Event,
        origin_session: str | None,
        triggers: list[str],
        suppress: bool,
        deterministic: bool,
    ) -> None:
        settings = self.settings()
        s = self._s
        if not self._active(settings):
            return
        if s.consecutive_llm_timeouts >= TIMEOUT_BACKOFF:
            self._emit(triggers, "rules", "silent", "llm_timeout_backoff")
            return
        try:
            client = (
                self._client_factory(settings) if self._client_factory and settings.target else None
            )
        except Exception as exc:
            log.warning("memory client could not be resolved: %s", exc)
            self._emit(triggers, "rules", "silent", "client_error")
            return
        if client is None:
            self._emit(triggers, "rules", "silent", "no_client")
            return
        if self._endpoint_busy is not None and self._endpoint_busy():
            for trigger in triggers:  # §4: the triggers stay pending
                self._add_trigger(trigger)
            s.last_prompted_boundary = None
            self._emit(triggers, "llm", "dropped", "endpoint_busy", update_last_decision=False)
            return

        from clio_acp.memory.policy import PolicyInput, run_task_memory_policy

        started = time.perf_counter()
        target_id, model_id = settings.target, settings.model
        calls_with_usage = 0

        def on_call_usage(usage: Any) -> None:
            # §5: one usage row per llm call, under the target that call ran on (a
            # fallback's calls run on different targets).
            nonlocal calls_with_usage
            calls_with_usage += 1
            self._record_usage(
                usage,
                origin_session,
                getattr(usage, "target_id", None) or target_id,
                getattr(usage, "model_id", None)
                or (None if getattr(usage, "target_id", None) else model_id),
                started,
            )

        def on_usage(usage: Any) -> None:
            # The step's usage (§3 step 3); a row only when no call reported its own.
            if not calls_with_usage:
                self._record_usage(usage, origin_session, target_id, model_id, started)

        client = _PerCallUsage(client, on_call_usage)

        def on_envelope(trace: Any) -> None:
            if self.trace.enabled:
                self.trace.write(
                    decision=trace.decision,
                    reason=trace.reason,
                    bankOperations=trace.bank_operations,
                    droppedOperations=trace.dropped_operations,
                    reminder=trace.reminder or "",
                    error=trace.error or "",
                    response=trace.response or "",
                    userPrompt=trace.user_prompt,
                    systemPromptChars=trace.system_prompt_chars,
                )

        inputs = PolicyInput(
            task=s.current_task,
            trajectory=[step.to_policy() for step in s.trajectory],
            deterministic_trigger=deterministic,
            max_tokens=settings.max_output_tokens,
            timeout_ms=settings.timeout_ms,
            suppress_intervention=suppress,
            previous_reminder=s.last_injected_message,
            workspace_root=self.workspace_root,
            is_current=lambda: self._is_current(generation, epoch),
            cancel=cancel,
            on_step_usage=on_usage,
            on_envelope=on_envelope,
        )
        result = await run_task_memory_policy(self.bank, inputs, client)
        latency = (time.perf_counter() - started) * 1000
        if generation != self._generation or self._disposed:
            return  # §10: a late completion of an old generation leaves no trace
        s = self._s
        if epoch != s.compaction_epoch:
            # §12.6: a step started before a compaction lost its authority.
            self._emit(triggers, "llm", "dropped", "scope_changed", update_last_decision=False)
            return
        if result.reason == "endpoint_busy":
            # §4/§11.17: skipped for a busy endpoint; the triggers stay pending.
            for trigger in triggers:
                self._add_trigger(trigger)
            s.last_prompted_boundary = None
            self._emit(triggers, "llm", "dropped", "endpoint_busy", update_last_decision=False)
            return
        if result.decision == "timeout":
            s.consecutive_llm_timeouts += 1
        else:
            s.consecutive_llm_timeouts = 0
        if result.decision == "injected" and result.reminder:
            s.last_injected_message = result.reminder
            reminder = InjectReminder(result.reminder, tuple(result.cited), "+".join(triggers))
            s.deferred.append(_Deferred(reminder, s.turn, s.compaction_epoch))
            if self._on_injected_entries is not None and result.cited:
                try:
                    self._on_injected_entries(tuple(result.cited))
                except Exception:
                    log.warning("memory proposal hook failed", exc_info=True)
        keep_rules_decision = suppress and result.decision == "silent"
        self._emit(
            triggers,
            "llm",
            result.decision,
            result.reason,
            cited=len(result.cited),
            bank_operations=result.bank_operations,
            dropped_operations=result.dropped_operations,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            latency_ms=latency,
            **_answered_route(result, target_id, model_id),
            decoding=result.decoding,
            update_last_decision=not keep_rules_decision,
        )

    def _record_usage(
        self,
        usage: Any,
        origin_session: str | None,
        target: str | None,
        model: str | None,
        started: float,
    ) -> None:
        """§5 usage rows: one per llm call that reported usage, under the origin
        session even when the answer arrives after a session change."""
        try:
            input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
            output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
            entry = {
                "sessionId": origin_session or "",
                "input": input_tokens,
                "output": output_tokens,
                "generationCurrent": origin_session == self.session_id,
            }
            self.usage_log.append(entry)
            if self.usage_path is None:
                return
            row = UsageRow(
                session_id=origin_session or "",
                repo_identity=self.repo_identity,
                target=target,
                attributed_model_id=model,
                usage=UsageFigures(
                    input=input_tokens,
                    output=output_tokens,
                    total_tokens=input_tokens + output_tokens,
                ),
                timing=UsageTiming(duration_ms=(time.perf_counter() - started) * 1000),
            )
            path = self.usage_path
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                append_usage_row(path, row)
            else:
                loop.run_in_executor(None, append_usage_row, path, row)
        except Exception:
            log.debug("memory usage accounting failed", exc_info=True)

    async def wait_idle(self) -> None:
        """Wait for the in-flight step (if any) to settle. For replay and tests."""
        flight = self._in_flight
        if flight is not None and flight.task is not None:
            await asyncio.gather(flight.task, return_exceptions=True)

    # -- lifecycle ----------------------------------------------------------------------------

    def reset(self) -> None:
        """§4/§10: new generation (the old one's step is aborted and loses every
        right to write, deliver or free the slot), empty bank, cleared state."""
        self._generation += 1
        self._cancel.set()
        self._cancel = asyncio.Event()
        self._in_flight = None
        self.bank.clear()
        self._s = _State()
        self._last_snapshot = self._delta_snapshot()

    def dispose(self) -> None:
        """§4: reset, then refuse all future work."""
        self.reset()
        self._disposed = True

    @property
    def disposed(self) -> bool:
        return self._disposed

    def export_state(self) -> dict[str, Any]:
        """Counters that survive compaction and resume (§12.4): failure records,
        repeat counts, environment faults, captured requirements, tool step."""
        data = self._s.rules.export()
        data["toolStep"] = self._s.tool_step
        return data

    def import_state(self, data: dict[str, Any]) -> None:
        """Inverse of ``export_state`` (after the bank was restored). Raises
        ``ValueError`` for a malformed snapshot, leaving the state unchanged."""
        rules = RulesMemory.load(data)
        self._s.rules = rules
        self._s.tool_step = int(data.get("toolStep", 0))
        self._s.last_turn_end_step = self._s.tool_step
        self._last_snapshot = self._delta_snapshot()

    def board(self) -> dict[str, Any]:
        """The operator view (§10 board): enabled, tier, size, last decision, bank
        (status included: this is the operator's own view), activity, stepInFlight."""
        settings = self.settings()
        tier = "llm" if settings.target and self._client_factory else "rules"
        return {
            "enabled": settings.enabled and not self._disposed,
            "tier": tier,
            "size": self.bank.size,
            "lastDecision": self.last_decision,
            "bank": self.bank.snapshot(),
            "activity": [dict(e, line=render_activity(e)) for e in self._s.activity],
            "stepInFlight": self.step_in_flight,
            "pendingTriggers": list(self._s.triggers),
        }


def _answered_route(result: Any, target_id: str | None, model_id: str | None) -> dict[str, Any]:
    """The step row's ``targetId``/``modelId`` (§5, both or neither): the route that
    answered when the client said, else the configured memory route."""
    answered = getattr(result, "target_id", None)
    if answered:
        target_id, model_id = answered, getattr(result, "model_id", None)
    if target_id and model_id:
        return {"target_id": target_id, "model_id": model_id}
    return {"target_id": None, "model_id": None}


class _PerCallUsage:
    """Wraps the step's memory client so every usage report of a call reaches
    ``on_call`` (usage rows) before the policy sees it (which keeps the first)."""

    def __init__(self, inner: Any, on_call: Callable[[Any], None]) -> None:
        self._inner = inner
        self._on_call = on_call

    async def complete(
        self, system: str, user: str, max_tokens: int, *, abort: Any, on_usage: Any
    ) -> Any:
        def both(usage: Any) -> None:
            try:
                self._on_call(usage)
            except Exception:
                log.debug("memory usage row failed", exc_info=True)
            on_usage(usage)

        return await self._inner.complete(system, user, max_tokens, abort=abort, on_usage=both)
