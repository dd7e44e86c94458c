"""The reminder gate chain and the one vocabulary of decisions and reasons
(MEMORY_SPEC §3 "Vocabulary", "Gates", step 7; §5).

``gate_reminder`` is the pure part of §3's gate chain: given what the step parsed
and what the bank says, it returns the verdict of the first gate that stops the
reminder, in §3's exact order, or ``injected``/``intervened``. The workspace-path
gate (8) stats files and runs in the policy step, after these.

``REASONS`` and ``DECISIONS`` are the only lists of reasons and decisions:
``PolicyReason`` (what one policy step can return) plus ``MiddlewareReason`` (what
the middleware adds around it). Telemetry validates rows against them; a reason
missing here is a row silently dropped, so a test pins every reason the code emits.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

from clio_acp.settings import MEMORY_MAX_OUTPUT_TOKENS_DEFAULT

__all__ = [
    "CHARS_PER_TOKEN",
    "DECISIONS",
    "MEMORY_PREFIX",
    "REASONS",
    "EndpointBusy",
    "GateInput",
    "MiddlewareReason",
    "PolicyDecision",
    "PolicyReason",
    "Reason",
    "Verdict",
    "classify_client_error",
    "gate_reminder",
    "prefixed",
]

# MEMORY_SPEC §3 gate 3: every delivered reminder starts with this prefix.
MEMORY_PREFIX = "Memory: "
# MEMORY_SPEC §3 gate 3: the reminder cap is 4 chars per token of maxTokens.
CHARS_PER_TOKEN = 4

PolicyDecision = Literal["silent", "injected", "gated", "timeout", "malformed"]
"""§3 decisions of one policy step."""

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
"""§3 reasons of one policy step."""

MiddlewareReason = Literal[
    "no_consumer",
    "step_in_flight",
    "llm_timeout_backoff",
    "no_repeated_failure",
    "bank_empty",
    "endpoint_preempted",
    "information_flow_blocked",
    "environmental_failure",
    "loop_stop",
    "spent_this_turn",
]
"""Reasons the middleware adds around the step (§4, §5; clio_acp's own:
``environmental_failure`` §12.3, ``loop_stop`` §12.4)."""

Reason = PolicyReason | MiddlewareReason

REASONS: frozenset[str] = frozenset(get_args(PolicyReason) + get_args(MiddlewareReason))
"""Every reason a telemetry row may carry (§5: the set grows with the code)."""

DECISIONS: frozenset[str] = frozenset((*get_args(PolicyDecision), "dropped", "client_error"))
"""Every decision a telemetry row may carry: the step's plus telemetry's ``dropped``."""


class EndpointBusy(Exception):
    """The memory route's endpoint has no free request slot (HTTP 429/503 or local
    capacity): the step is skipped and its triggers stay pending (§3 step 7, §4).
    The agent layer's route adapter raises it for the models layer's busy error."""


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


def prefixed(reminder: str) -> str:
    """The reminder as delivered: starting with ``Memory:`` (§3 gate 3)."""
    return reminder if reminder.startswith("Memory:") else MEMORY_PREFIX + reminder


@dataclass(frozen=True)
class GateInput:
    """What the pure gates look at (§3 "Gates" 1–7).

    ``reminder``/``reminder_error``: the envelope's reminder (None when the model
    was silent) or why it was rejected; ``max_tokens``: the reminder budget in
    tokens (cap = ×``CHARS_PER_TOKEN`` chars); ``cited``: knowledge/procedural ids
    the prefixed reminder cites in the post-write bank; ``resolved_call``: a cited
    failure's call that has since succeeded (gate 7), else None.
    """

    reminder: str | None
    reminder_error: str | None = None
    max_tokens: int = MEMORY_MAX_OUTPUT_TOKENS_DEFAULT
    suppress_intervention: bool = False
    previous_reminder: str | None = None
    cited: tuple[str, ...] = ()
    deterministic_trigger: bool = False
    resolved_call: str | None = None


class Verdict(NamedTuple):
    """A gate's verdict: ``decision``, ``reason`` and the envelope-only ``detail``."""

    decision: PolicyDecision
    reason: PolicyReason
    detail: str | None = None


def gate_reminder(gate: GateInput) -> Verdict:
    """The first of §3's gates 1–7 that stops the reminder, in order, else
    ``injected``/``intervened``: invalid reminder → gated; none → silent
    ``model_silent``; over the cap → gated ``over_budget``; suppressed → silent;
    same as the previous reminder → silent ``duplicate_reminder``; no citation on a
    non-deterministic trigger → gated ``uncited``; a cited failure since resolved →
    gated ``resolved_failure``. Pure: no I/O, never raises."""
    if gate.reminder_error is not None:
        return Verdict("gated", "invalid_reminder", gate.reminder_error)
    if gate.reminder is None:
        return Verdict("silent", "model_silent")
    reminder = prefixed(gate.reminder)
    cap = gate.max_tokens * CHARS_PER_TOKEN
    if len(reminder) > cap:
        return Verdict("gated", "over_budget", f"reminder is {len(reminder)} chars (max {cap})")
    if gate.suppress_intervention:
        return Verdict("silent", "suppressed")
    if gate.previous_reminder is not None and reminder == gate.previous_reminder:
        return Verdict("silent", "duplicate_reminder")
    if not gate.cited and not gate.deterministic_trigger:
        return Verdict("gated", "uncited")
    if gate.resolved_call is not None:
        detail = f"cited failure of {gate.resolved_call} has since succeeded"
        return Verdict("gated", "resolved_failure", detail)
    return Verdict("injected", "intervened")
