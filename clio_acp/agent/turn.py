"""The records of one turn: its limits, the context rules in force, and its state."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from clio_acp.settings import (
    COMPACTION_RETAIN_RATIO_DEFAULT,
    COMPACTION_TRIGGER_RATIO_DEFAULT,
    MAX_TURN_REQUESTS_DEFAULT,
    SPILL_THRESHOLD_BYTES_DEFAULT,
)


@dataclass
class TurnLimits:
    """``max_turn_requests``: model requests in one turn before it stops;
    ``max_output_tokens``: completion budget of one chat request (None: the server's)."""

    max_turn_requests: int = MAX_TURN_REQUESTS_DEFAULT
    max_output_tokens: int | None = None


@dataclass
class ContextRules:
    """The compaction/spill settings in force for the turn (``context.*``)."""

    trigger_ratio: float = COMPACTION_TRIGGER_RATIO_DEFAULT
    retain_ratio: float = COMPACTION_RETAIN_RATIO_DEFAULT
    spill_threshold_bytes: int = SPILL_THRESHOLD_BYTES_DEFAULT


@dataclass
class TurnState:
    """One running turn: its id, model requests so far, the loop guard's stop notice
    (set when the turn must end) and the tool calls started but not finished."""

    turn_id: str
    requests: int = 0
    stop_notice: str | None = None
    inflight: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> tool name of calls started but not finished."""
    completion_checked: bool = False
    """Memory's completion check (§13.6) already let the model continue once."""


def new_id(prefix: str) -> str:
    """A fresh id ``<prefix>_<16 hex>`` (turns, messages, thoughts)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"
