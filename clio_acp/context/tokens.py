"""Token estimates for the model view (seed ``004`` context rules).

Owns the one estimate every context decision uses: ``ceil(chars / 4)`` per text part
plus a flat 1,200 tokens per image part, and the per-message estimate of an
OpenAI-style chat message. It counts; it never decides when to compact or spill.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

CHARS_PER_TOKEN = 4
"""Seed ``004``: a token is estimated as 4 characters."""
IMAGE_TOKENS = 1_200
"""Seed ``004``: each image part counts as 1,200 tokens."""
MESSAGE_OVERHEAD_TOKENS = 4
"""Role and framing tokens per message (a small constant, so empty messages count)."""


def estimate_text(text: str) -> int:
    """Estimated tokens of ``text``: ``ceil(len(text) / 4)`` (0 for empty text)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def estimate_content(content: Any) -> int:
    """Estimated tokens of a message ``content`` (a string or a list of OpenAI parts).

    Text parts count ``ceil(chars / 4)``; ``image_url`` parts count 1,200 each; any
    other part counts its compact JSON text.
    """
    if content is None:
        return 0
    if isinstance(content, str):
        return estimate_text(content)
    total = 0
    for part in content:
        if not isinstance(part, dict):
            total += estimate_text(str(part))
        elif part.get("type") == "text":
            total += estimate_text(str(part.get("text", "")))
        elif part.get("type") in ("image_url", "image"):
            total += IMAGE_TOKENS
        else:
            total += estimate_text(json.dumps(part, separators=(",", ":")))
    return total


def estimate_message(message: dict[str, Any]) -> int:
    """Estimated tokens of one chat message: content, tool calls and a small overhead."""
    total = MESSAGE_OVERHEAD_TOKENS + estimate_content(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        total += estimate_text(str(function.get("name", "")))
        total += estimate_text(str(function.get("arguments", "")))
    if message.get("reasoning_content"):
        total += estimate_text(str(message["reasoning_content"]))
    total += _continuation_tokens(message.get(CONTINUATION_KEY))
    return total


CONTINUATION_KEY = "_continuation"
"""The view key of a stored reasoning state (``models/continuation.py``): it goes back
with the message when the route matches, so the view's estimate counts it."""


def _continuation_tokens(state: Any) -> int:
    fields = state.get("message") if isinstance(state, dict) else None
    if not isinstance(fields, dict):
        return 0
    return sum(
        estimate_text(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
        for value in fields.values()
    )


def estimate_messages(messages: Iterable[dict[str, Any]]) -> int:
    """Sum of :func:`estimate_message` over ``messages``."""
    return sum(estimate_message(m) for m in messages)
