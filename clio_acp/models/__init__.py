"""Model routes: the OpenAI-compatible client, runtime dialects, targets, capacity
accounting, routing and fallback, and the embedded local model. Knows nothing about
memory or sessions.

Public entry points: ``Router`` (a session's routes: ``stream_chat``,
``memory_complete``), ``ModelClient`` (one target), ``ChatRequest`` and the stream
events, ``resolve_routes``, ``ENVELOPE_GRAMMAR``, and the errors in
``clio_acp.models.errors``.

The package is lazy (PEP 562): importing ``clio_acp.models.errors`` (as the memory
domain does) loads neither httpx nor the client; a name below is imported from its
submodule on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULE_OF: dict[str, str] = {
    **dict.fromkeys(("DEFAULT_TRACKER", "Capacity", "CapacityTracker"), "capacity"),
    **dict.fromkeys(
        (
            "ChatRequest",
            "Completion",
            "Done",
            "ModelClient",
            "ReasoningDelta",
            "StreamEvent",
            "TextDelta",
            "Timings",
            "ToolCall",
            "ToolCallDelta",
            "Usage",
        ),
        "client",
    ),
    **dict.fromkeys(
        (
            "EndpointBusyError",
            "MalformedStreamError",
            "ModelClientError",
            "ModelConnectionError",
            "ModelError",
            "ModelHTTPError",
            "ModelTimeoutError",
            "RouteError",
        ),
        "errors",
    ),
    **dict.fromkeys(("ENVELOPE_GRAMMAR", "envelope_grammar"), "grammar"),
    **dict.fromkeys(("MemoryAnswer", "Route", "Router", "RouteTable", "resolve_routes"), "routing"),
    "Target": "targets",
}

__all__ = sorted(_SUBMODULE_OF)


def __getattr__(name: str) -> Any:
    """Import ``name`` from its submodule on first access (PEP 562).

    Raises ``AttributeError`` for a name the package does not export.
    """
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
