"""The LLM tier's detached step (MEMORY_SPEC §3, §4 evaluateAsync, §10, §11.11–11.17).

At turn end, pending triggers may start one policy step in the background: at most
one in flight per session, tied to the generation and compaction epoch it was
launched under. A late completion of an old generation writes, delivers, proposes
and emits nothing (its usage is still recorded); a step started before a compaction
is dropped as ``scope_changed``; a busy endpoint leaves the triggers pending.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from clio_acp.memory.middleware.effects import Effect, InjectReminder
from clio_acp.memory.middleware.state import TIMEOUT_BACKOFF, DeferredReminder, InFlightStep
from clio_acp.memory.middleware.usage import PerCallUsage, StepUsage, answered_route
from clio_acp.settings import MemorySettings

__all__ = ["LlmStep"]

log = logging.getLogger(__name__)


class LlmStep:
    """Mixin of ``MemoryMiddleware``: launching, running and settling the LLM step."""

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

    def evaluate_inline(self, turn_id: str | None = None, *, session_id: str | None = None) -> None:
        """``evaluate`` for a caller that waits for the step right away (replay):
        a step that cannot ask a model (no client factory or no target) would only
        write the row that says why (``no_client``, or ``llm_timeout_backoff``);
        it runs here, synchronously, with the rows and state the detached task
        would leave. With an LLM tier configured the detached step starts as in
        ``evaluate_detached``: await ``wait_idle()`` when ``idle`` is False.
        Never raises."""
        try:
            self._evaluate(turn_id, session_id, inline=True)
        except Exception:
            log.exception("memory evaluate failed; no effects")

    @property
    def idle(self) -> bool:
        """No detached step in flight and no usage row being written."""
        return self._in_flight is None and not self.__dict__.get("_usage_writes")

    def _evaluate(
        self, turn_id: str | None, session_id: str | None, inline: bool = False
    ) -> list[Effect]:
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
        if inline and not (self._client_factory and settings.target):
            self._step_without_model(settings, triggers)
            return []
        flight = InFlightStep(
            self._generation, "llm", s.compaction_epoch, self._cancel, self.session_id
        )
        self._in_flight = flight
        flight.task = asyncio.get_running_loop().create_task(
            self._prompted_step(flight, triggers, rules_spoke, deterministic)
        )
        # Also when the task is cancelled before its body ever ran.
        flight.task.add_done_callback(lambda _task: self._release(flight))
        return []

    def _release(self, flight: InFlightStep) -> None:
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
        self, flight: InFlightStep, triggers: list[str], suppress: bool, deterministic: bool
    ) -> None:
        try:
            await self._run_prompted_step(flight, triggers, suppress, deterministic)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("memory step failed")
        finally:
            self._release(flight)

    def _step_without_model(self, settings: MemorySettings, triggers: list[str]) -> None:
        """What ``_run_prompted_step`` does when no client can exist for ``settings``:
        ``_step_client`` writes the row that says why and returns None."""
        try:
            self._step_client(settings, triggers)
        except Exception:
            log.exception("memory step failed")

    def _keep_triggers_pending(self, triggers: list[str]) -> None:
        """§4/§11.17: a step skipped for a busy endpoint leaves its triggers pending."""
        for trigger in triggers:
            self._add_trigger(trigger)
        self._s.last_prompted_boundary = None
        self._emit(triggers, "llm", "dropped", "endpoint_busy", update_last_decision=False)

    def _step_client(self, settings: MemorySettings, triggers: list[str]) -> Any:
        """The memory completion client for this step, or None after writing the
        row that says why there is none (backoff, no client, client error, busy)."""
        if self._s.consecutive_llm_timeouts >= TIMEOUT_BACKOFF:
            self._emit(triggers, "rules", "silent", "llm_timeout_backoff")
            return None
        try:
            client = (
                self._client_factory(settings) if self._client_factory and settings.target else None
            )
        except Exception as exc:
            log.warning("memory client could not be resolved: %s", exc)
            self._emit(triggers, "rules", "silent", "client_error")
            return None
        if client is None:
            self._emit(triggers, "rules", "silent", "no_client")
            return None
        if self._endpoint_busy is not None and self._endpoint_busy():
            self._keep_triggers_pending(triggers)
            return None
        return client

    def _write_trace(self, trace: Any) -> None:
        """The step's envelope to ``CLIO_ACP_MEMORY_TRACE`` (content; opt-in)."""
        if self.trace.enabled:
            self.trace.write(
                sessionId=self.session_id or "",
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

    async def _run_prompted_step(
        self, flight: InFlightStep, triggers: list[str], suppress: bool, deterministic: bool
    ) -> None:
        settings = self.settings()
        if not self._active(settings):
            return
        client = self._step_client(settings, triggers)
        if client is None:
            return
        from clio_acp.memory.policy import PolicyInput, run_task_memory_policy

        usage = StepUsage(
            self._record_usage, flight.origin_session, (settings.target, settings.model)
        )
        s = self._s
        generation, epoch = flight.generation, flight.epoch
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
            cancel=flight.cancel,
            on_step_usage=usage.on_step,
            on_envelope=self._write_trace,
            unresolved_failures=tuple(s.rules.unresolved_entry_ids(self.bank)),
        )
        result = await run_task_memory_policy(
            self.bank, inputs, PerCallUsage(client, usage.on_call)
        )
        latency = (time.perf_counter() - usage.started) * 1000
        self._settle_step(flight, triggers, suppress, result, latency, usage)

    def _settle_step(
        self,
        flight: InFlightStep,
        triggers: list[str],
        suppress: bool,
        result: Any,
        latency: float,
        usage: StepUsage,
    ) -> None:
        """Apply a finished step's result, if it still has the authority to."""
        if flight.generation != self._generation or self._disposed:
            return  # §10: a late completion of an old generation leaves no trace
        s = self._s
        if flight.epoch != s.compaction_epoch:
            # §12.6: a step started before a compaction lost its authority.
            self._emit(triggers, "llm", "dropped", "scope_changed", update_last_decision=False)
            return
        if result.reason == "endpoint_busy":
            self._keep_triggers_pending(triggers)
            return
        s.consecutive_llm_timeouts = (
            s.consecutive_llm_timeouts + 1 if result.decision == "timeout" else 0
        )
        if result.decision == "injected" and result.reminder:
            self._defer_llm_reminder(result, triggers)
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
            **answered_route(result, usage.target_id, usage.model_id),
            decoding=result.decoding,
            update_last_decision=not keep_rules_decision,
        )

    def _defer_llm_reminder(self, result: Any, triggers: list[str]) -> None:
        """Buffer an LLM-tier reminder for the next boundary and propose its cited
        entries as durable records (§6; the hook's failure is only logged)."""
        s = self._s
        s.last_injected_message = result.reminder
        reminder = InjectReminder(result.reminder, tuple(result.cited), "+".join(triggers))
        s.deferred.append(DeferredReminder(reminder, s.turn, s.compaction_epoch))
        if self._on_injected_entries is not None and result.cited:
            try:
                self._on_injected_entries(tuple(result.cited))
            except Exception:
                log.warning("memory proposal hook failed", exc_info=True)

    async def wait_idle(self) -> None:
        """Wait for the in-flight step (if any) to settle and its usage rows to be
        written. For replay, eval and tests."""
        flight = self._in_flight
        if flight is not None and flight.task is not None:
            await asyncio.gather(flight.task, return_exceptions=True)
        await self.usage_written()
