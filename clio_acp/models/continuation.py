"""Provider continuation state: what a route returns beside an answer and wants back.

Owns the capture of reasoning state a chat answer carries — the reasoning text under
the field name the server used (``reasoning_content`` for llama.cpp, vLLM and
DeepSeek-style servers, ``reasoning`` for servers that name it so), structured
reasoning items (``reasoning_details``: OpenRouter-style items holding signatures or
encrypted reasoning) and per-tool-call provider extras (``extra_content``, e.g.
Gemini's thought signatures) — keyed by the identity of the route that produced it
(target id, runtime, model); and the replay rule (seed 004, MEM-RTE-content-replay):
the next request carries a stored state back in its assistant message only when that
identity equals the current route's and replay is enabled for the target; otherwise the
ordinary assistant rendering is sent. The state travels through the model view under
the private message key ``_continuation``, which :func:`prepare_messages` always
strips before a body leaves.

Pure data and functions: no I/O, nothing about sessions, memory or compaction (a
compaction summary is rendered from message content and never sees this state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clio_acp.context.tokens import CONTINUATION_KEY

__all__ = [
    "CONTINUATION_KEY",
    "REASONING_TEXT_FIELDS",
    "Continuation",
    "ContinuationCollector",
    "RouteIdentity",
    "prepare_messages",
]

REASONING_TEXT_FIELDS = ("reasoning_content", "reasoning")
"""Message fields a server may stream reasoning text under, in order of preference."""
REASONING_ITEMS_FIELD = "reasoning_details"
TOOL_CALL_EXTRA_FIELD = "extra_content"
_MESSAGE_FIELDS = (*REASONING_TEXT_FIELDS, REASONING_ITEMS_FIELD)
_MERGED_ITEM_TEXT = ("text", "summary", "data")
"""String fields of a streamed reasoning item that arrive in pieces and are joined."""


@dataclass(frozen=True)
class RouteIdentity:
    """Who answered: the target id, its runtime and the model name sent (None: the
    server's default). Replay needs all three to be equal."""

    target: str
    runtime: str
    model: str | None

    def to_json(self) -> dict[str, Any]:
        """``{target, runtime, model}``: the identity a continuation is stored with and
        compared against."""
        return {"target": self.target, "runtime": self.runtime, "model": self.model}


@dataclass(frozen=True)
class Continuation:
    """The state one answer carries back: ``message`` fields merged into its assistant
    message (reasoning text, reasoning items) and ``tool_calls`` extras by position
    (None where a call has none)."""

    identity: RouteIdentity
    message: dict[str, Any] = field(default_factory=dict)
    tool_calls: tuple[dict[str, Any] | None, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON for the journal: ``{target, runtime, model, message, toolCalls?}``."""
        data = {**self.identity.to_json(), "message": dict(self.message)}
        if any(extra for extra in self.tool_calls):
            data["toolCalls"] = [dict(extra) if extra else None for extra in self.tool_calls]
        return data

    @classmethod
    def from_json(cls, data: Any) -> Continuation | None:
        """The state stored by :meth:`to_json`; None for anything malformed (a damaged
        journal row is sent in the ordinary rendering, never fails a request)."""
        if not isinstance(data, Mapping):
            return None
        target, runtime, model = data.get("target"), data.get("runtime"), data.get("model")
        message = data.get("message")
        calls = data.get("toolCalls") or []
        if not (isinstance(target, str) and isinstance(runtime, str)):
            return None
        if model is not None and not isinstance(model, str):
            return None
        if not isinstance(message, Mapping) or not isinstance(calls, list):
            return None
        fields = {k: v for k, v in message.items() if k in _MESSAGE_FIELDS}
        extras = tuple(dict(c) if isinstance(c, Mapping) else None for c in calls)
        return cls(RouteIdentity(target, runtime, model), fields, extras)

    def apply(self, message: dict[str, Any]) -> dict[str, Any]:
        """A copy of the assistant ``message`` with this state merged in."""
        out = {**message, **self.message}
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(self.tool_calls):
            merged = []
            for position, call in enumerate(calls):
                extra = self.tool_calls[position] if position < len(self.tool_calls) else None
                if isinstance(call, dict) and extra:
                    call = {
                        **call,
                        **{k: v for k, v in extra.items() if k == TOOL_CALL_EXTRA_FIELD},
                    }
                merged.append(call)
            out["tool_calls"] = merged
        return out


class ContinuationCollector:
    """Gathers the continuation state of one streamed (or whole) answer from its
    ``delta``/``message`` objects and tool-call pieces."""

    def __init__(self) -> None:
        self._text_field: str | None = None
        self._text: list[str] = []
        self._items: list[dict[str, Any]] = []
        self._call_extras: dict[int, dict[str, Any]] = {}

    def feed_delta(self, delta: Mapping[str, Any]) -> None:
        """Take the reasoning text and reasoning items of one delta (or message)."""
        for name in REASONING_TEXT_FIELDS:
            value = delta.get(name)
            if isinstance(value, str) and value:
                # One field per answer: the first name the server used (some send both).
                if self._text_field in (None, name):
                    self._text_field = name
                    self._text.append(value)
                break
        items = delta.get(REASONING_ITEMS_FIELD)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, Mapping):
                    _merge_item(self._items, item)

    def feed_tool_call(self, index: int, call: Mapping[str, Any]) -> None:
        """Take the provider extras of one tool-call piece (call ``index``)."""
        extra = call.get(TOOL_CALL_EXTRA_FIELD)
        if isinstance(extra, Mapping):
            slot = self._call_extras.setdefault(index, {})
            slot[TOOL_CALL_EXTRA_FIELD] = _deep_merge(slot.get(TOOL_CALL_EXTRA_FIELD, {}), extra)

    def build(
        self, identity: RouteIdentity, call_indexes: Sequence[int] = ()
    ) -> Continuation | None:
        """The answer's state for ``identity`` (None when it carried none).
        ``call_indexes``: the answer's tool-call indexes in the order they are sent."""
        message: dict[str, Any] = {}
        if self._text_field is not None:
            message[self._text_field] = "".join(self._text)
        if self._items:
            message[REASONING_ITEMS_FIELD] = [dict(item) for item in self._items]
        extras = tuple(self._call_extras.get(i) for i in call_indexes)
        if not message and not any(extras):
            return None
        return Continuation(identity, message, extras)


def _merge_item(items: list[dict[str, Any]], piece: Mapping[str, Any]) -> None:
    """Fold one streamed reasoning item into ``items``: pieces with the same
    ``index`` join their text fields; an item without an index is its own."""
    index = piece.get("index")
    if isinstance(index, int):
        for item in items:
            if item.get("index") == index:
                for key, value in piece.items():
                    if key in _MERGED_ITEM_TEXT and isinstance(value, str):
                        item[key] = str(item.get(key) or "") + value
                    elif value is not None:
                        item[key] = value
                return
    items.append(dict(piece))


def _deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def prepare_messages(
    messages: Iterable[Any], identity: RouteIdentity | None, *, replay: bool
) -> list[Any]:
    """The messages to send: every ``_continuation`` key removed; an assistant
    message's stored state merged back only when ``replay`` is on and its identity
    equals ``identity`` (the route this request goes to). Inputs are not changed."""
    out: list[Any] = []
    for message in messages:
        if not isinstance(message, dict) or CONTINUATION_KEY not in message:
            out.append(message)
            continue
        plain = {k: v for k, v in message.items() if k != CONTINUATION_KEY}
        if replay and identity is not None and plain.get("role") == "assistant":
            state = Continuation.from_json(message[CONTINUATION_KEY])
            if state is not None and state.identity == identity:
                plain = state.apply(plain)
        out.append(plain)
    return out
