"""The memory middleware's per-session state and its constants (MEMORY_SPEC §4).

``MiddlewareState`` is everything ``reset()`` clears; the small records beside it
are one observed tool call, a deferred reminder, the LLM step in flight and a
pending restore offer.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Literal

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.middleware.effects import InjectReminder
from clio_acp.memory.middleware.facts import CallFacts
from clio_acp.memory.rules import RulesMemory

__all__ = [
    "ACTIVITY_RING",
    "RESTORE_PREFIX",
    "RESUME_PREFIX",
    "DeferredReminder",
    "InFlightStep",
    "MiddlewareState",
    "RestoreOffer",
    "TrajectoryStep",
    "cited_ids",
    "collapse_keep_newlines",
]

# MEMORY_SPEC §4 "lastDecision rules": the activity ring holds 20 events.
ACTIVITY_RING = 20
# MEMORY_SPEC §4 "Post-compaction restore".
RESTORE_PREFIX = "Memory: execution state restored after compaction:\n"
RESUME_PREFIX = "Memory: execution state restored from the saved session:\n"
# MEMORY_SPEC §4 "Post-compaction restore": this stage does not arm the restore.
WORKING_SET_RECALL = "working_set_recall"
# §13.2: a dead tool channel is this many different commands failing with the same
# exit code and empty output.
DEAD_CHANNEL_COMMANDS = 3
# §13.3: the same problem line in this many failures within the last WINDOW calls.
RECURRING_FAILURES = 3
RECURRING_WINDOW = 12
# MEMORY_SPEC §4 runPromptedStep: two consecutive llm timeouts back the tier off.
TIMEOUT_BACKOFF = 2


@dataclass
class TrajectoryStep:
    """One observed tool call (§4 trajectory step). What depends on the call alone
    comes from its shared ``CallFacts`` (computed when first read)."""

    step: int
    tool_name: str
    facts: CallFacts
    outcome: Literal["ok", "error"] = "ok"
    digest: str = ""
    provenance: str = "legacy"
    key: tuple[str, str] | None = None
    informative: bool = False
    tool_call_id: str | None = None
    located: tuple[tuple[str, ...], tuple[int | None, ...]] | None = None
    """After a failure naming files: (paths, 0-based lines), the named files first."""

    @property
    def fingerprint(self) -> str:
        """§4 operation fingerprint (16 hex)."""
        return self.facts.fingerprint

    @property
    def call(self) -> str:
        """§4 call description."""
        return self.facts.call

    @property
    def state_changing(self) -> bool:
        """§12.1 the call changes the workspace."""
        return self.facts.state_changing

    @property
    def command(self) -> str:
        """The call as a user would type it (§13.7)."""
        return self.facts.command

    @property
    def shell(self) -> str | None:
        """The shell command line of a shell tool call."""
        return self.facts.shell

    @property
    def revert(self) -> bool:
        """A state change that only reverts (git checkout/restore/stash/reset, §13.1)."""
        return self.facts.revert

    @property
    def writes(self) -> tuple[str, ...]:
        """Files the call writes, as it names them (§13.5)."""
        return self.facts.writes

    @property
    def paths(self) -> tuple[str, ...]:
        """Absolute workspace files the call named (its ``path`` arguments); after a
        failure, the files its output names come first (``memory.locations``)."""
        return self.located[0] if self.located is not None else self.facts.paths

    @property
    def lines(self) -> tuple[int | None, ...]:
        """0-based line in each of ``paths`` the failure output named (same order)."""
        return self.located[1] if self.located is not None else ()

    def to_policy(self) -> dict[str, Any]:
        """The step as the policy's trajectory input (§3 ``trajectory`` item)."""
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
class DeferredReminder:
    """A reminder waiting for the next boundary, tied to its turn and compaction epoch."""

    reminder: InjectReminder
    turn: int
    epoch: int


@dataclass
class InFlightStep:
    """The step in flight, with everything captured when it was *launched* (the
    task body starts later, after a reset or compaction may already have happened)."""

    generation: int
    tier: str
    epoch: int
    cancel: asyncio.Event
    origin_session: str | None
    task: asyncio.Task[None] | None = None


@dataclass
class RestoreOffer:
    """A restore offer (§12.6), pending until the request carrying it is sent."""

    offer_id: str
    text: str
    cited: tuple[str, ...]
    trigger: str

    def reminder(self) -> InjectReminder:
        """The offer as the ``restore``-channel effect that carries it."""
        return InjectReminder(self.text, self.cited, self.trigger, "restore", self.offer_id)


def collapse_keep_newlines(text: str) -> str:
    """Collapse runs of blanks inside each line and drop empty lines."""
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


def cited_ids(text: str, bank: TaskMemoryBank) -> tuple[str, ...]:
    """Bank ids cited as ``[tm-…]`` in ``text``, in order, never the status (§2)."""
    ids = bank.ids()
    status = bank.status
    found = [m for m in re.findall(r"\[(tm-[skp]-[0-9a-z]+)\]", text) if m in ids]
    return tuple(dict.fromkeys(i for i in found if not (status and i == status.id)))


@dataclass
class MiddlewareState:
    """Everything ``reset()`` clears (§4 "reset()")."""

    tool_step: int = 0
    tools_since_memory_step: int = 0
    consecutive_errors: int = 0
    pending: OrderedDict[str, TrajectoryStep] = field(default_factory=OrderedDict)
    trajectory: deque[TrajectoryStep] = field(default_factory=deque)
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
    deferred: list[DeferredReminder] = field(default_factory=list)
    offer: RestoreOffer | None = None
    observed_session: str | None = None
    turn_aborted: bool = False
    failures_this_turn: int = 0
    """Failed calls so far in this agent-loop iteration: a later failure of the same
    batch may only follow from an earlier one (§13.1 knock-on, not reminded)."""
    spoken_steps: set[int] = field(default_factory=set)
    """Tool steps a rules-tier note was attached to (bounded to the recent ones)."""
