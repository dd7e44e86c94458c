"""Model routes: the OpenAI-compatible client, runtime dialects, targets, capacity
accounting, routing and fallback, and the embedded local model. Knows nothing about
memory or sessions.

Public entry points: ``Router`` (a session's routes: ``stream_chat``,
``memory_complete``), ``ModelClient`` (one target), ``ChatRequest`` and the stream
events, ``resolve_routes``, ``ENVELOPE_GRAMMAR``, and the errors in
``clio_acp.models.errors``.
"""

from clio_acp.models.capacity import DEFAULT_TRACKER, Capacity, CapacityTracker
from clio_acp.models.client import (
    ChatRequest,
    Completion,
    Done,
    ModelClient,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Timings,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from clio_acp.models.errors import (
    EndpointBusyError,
    MalformedStreamError,
    ModelClientError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    RouteError,
)
from clio_acp.models.grammar import ENVELOPE_GRAMMAR, envelope_grammar
from clio_acp.models.routing import MemoryAnswer, Route, Router, RouteTable, resolve_routes
from clio_acp.models.targets import Target

__all__ = [
    "DEFAULT_TRACKER",
    "ENVELOPE_GRAMMAR",
    "Capacity",
    "CapacityTracker",
    "ChatRequest",
    "Completion",
    "Done",
    "EndpointBusyError",
    "MalformedStreamError",
    "MemoryAnswer",
    "ModelClient",
    "ModelClientError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelTimeoutError",
    "ReasoningDelta",
    "Route",
    "RouteError",
    "RouteTable",
    "Router",
    "StreamEvent",
    "Target",
    "TextDelta",
    "Timings",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "envelope_grammar",
    "resolve_routes",
]
