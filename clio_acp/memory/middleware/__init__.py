"""The memory middleware package (MEMORY_SPEC §4, §10, §12): one registration per
session beside the agent loop.

``MemoryMiddleware`` (``core``) is assembled from one module per concern: ``effects``
(hook inputs and the typed effects), ``state``, ``activity`` (telemetry rows and the
activity ring), ``turn_end`` (turn boundaries), ``observe`` (the rules tier),
``restore`` (restore offers), ``llm_step`` (the detached LLM step) and ``usage``.
"""

from __future__ import annotations

from clio_acp.memory.middleware.activity import render_activity
from clio_acp.memory.middleware.core import MemoryMiddleware
from clio_acp.memory.middleware.effects import (
    AnnotateToolResult,
    Effect,
    InjectReminder,
    StopTurn,
    ToolCall,
    ToolOutcome,
)
from clio_acp.memory.middleware.state import (
    ACTIVITY_RING,
    RESTORE_PREFIX,
    RESUME_PREFIX,
    DeferredReminder,
)

__all__ = [
    "ACTIVITY_RING",
    "RESTORE_PREFIX",
    "RESUME_PREFIX",
    "AnnotateToolResult",
    "DeferredReminder",
    "Effect",
    "InjectReminder",
    "MemoryMiddleware",
    "StopTurn",
    "ToolCall",
    "ToolOutcome",
    "render_activity",
]
