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

The class is assembled from one mixin per concern: ``activity`` (telemetry rows and
the activity ring), ``turn_end`` (turn boundaries and the deferred buffer),
``observe`` (the rules tier), ``restore`` (restore offers and saved counters),
``llm_step`` (the detached LLM step), ``usage`` (usage rows), ``triggers`` (the §13
rules-tier triggers) and ``status`` (the rules-written status, completion check).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.middleware.activity import ActivityLog, render_activity
from clio_acp.memory.middleware.effects import Effect
from clio_acp.memory.middleware.llm_step import LlmStep
from clio_acp.memory.middleware.observe import RulesTierObservation
from clio_acp.memory.middleware.restore import RestoreOffers
from clio_acp.memory.middleware.state import InFlightStep, MiddlewareState
from clio_acp.memory.middleware.status import RulesStatus
from clio_acp.memory.middleware.turn_end import TurnBoundaries
from clio_acp.memory.middleware.usage import UsageAccounting
from clio_acp.memory.telemetry import MemoryTrace, TelemetrySink
from clio_acp.settings import MemorySettings

__all__ = ["MemoryMiddleware"]

log = logging.getLogger(__name__)


class MemoryMiddleware(
    ActivityLog,
    TurnBoundaries,
    RulesTierObservation,
    RulesStatus,
    RestoreOffers,
    LlmStep,
    UsageAccounting,
):
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
        self._in_flight: InFlightStep | None = None
        self._s = MiddlewareState(observed_session=session_id)
        self._last_snapshot = self._delta_snapshot()
        self._bank_dirty = False
        self.last_observation: dict[str, Any] | None = None
        """The classification of the latest observed tool call (replay, board)."""
        self.usage_log: list[dict[str, Any]] = []
        """Usage of every llm call by origin session (also the late ones)."""

    def settings(self) -> MemorySettings:
        """The live memory settings (read on every hook; defaults when the source
        returns something else)."""
        value = self._settings_source()
        if isinstance(value, MemorySettings):
            return value
        context = getattr(value, "context", None)
        if context is not None and hasattr(context, "memory"):
            value = context.memory
        return value if isinstance(value, MemorySettings) else MemorySettings()

    @property
    def generation(self) -> int:
        """Bumped by every ``reset``: a step of an older generation has no authority."""
        return self._generation

    @property
    def step_in_flight(self) -> bool:
        """True while a detached LLM step runs (§10: at most one per session)."""
        return self._in_flight is not None

    @property
    def tool_step(self) -> int:
        """Tool calls observed since the last reset (the §4 step counter)."""
        return self._s.tool_step

    @property
    def pending_triggers(self) -> tuple[str, ...]:
        """Triggers waiting for the next LLM step, in arrival order."""
        return tuple(self._s.triggers)

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

    def _add_trigger(self, trigger: str) -> None:
        if trigger not in self._s.triggers:
            self._s.triggers.append(trigger)

    def _guard(self, name: str, func: Callable[..., list[Effect]], *args: Any) -> list[Effect]:
        """``func(*args)``; an exception is logged and yields no effects (hooks never
        raise)."""
        try:
            return func(*args)
        except Exception:
            log.exception("memory hook %s failed; no effects", name)
            return []

    def signal_loop(self) -> None:
        """§4: the host loop guard's verdict; adds the ``loop_signal`` trigger."""

        def run() -> list[Effect]:
            if not self._disposed:
                self._add_trigger("loop_signal")
            return []

        self._guard("signal_loop", run)

    def reset(self) -> None:
        """§4/§10: new generation (the old one's step is aborted and loses every
        right to write, deliver or free the slot), empty bank, cleared state."""
        self._generation += 1
        self._cancel.set()
        self._cancel = asyncio.Event()
        self._in_flight = None
        self.bank.clear()
        self._s = MiddlewareState()
        self._last_snapshot = self._delta_snapshot()

    def dispose(self) -> None:
        """§4: reset, then refuse all future work."""
        self.reset()
        self._disposed = True

    @property
    def disposed(self) -> bool:
        """True after ``dispose``: every hook then does nothing."""
        return self._disposed

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
