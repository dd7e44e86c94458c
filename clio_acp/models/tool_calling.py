"""Constrained tool calling: tools for a model whose chat template cannot carry them.

Owns the ``constrained`` tool-calling mode (issue 20 item 3) for runtimes that take
a JSON schema for the answer (llama.cpp, vLLM, llama-cpp-python: OpenAI
``response_format`` of type ``json_schema``, which they compile to a grammar). A
turn then has two phases, told apart from the messages alone:

- **call** (no tool result since the user's last prompt): the ``SHORTLIST`` tools that
  best match the prompt are described in the system message, ``tools`` is not sent,
  and the answer is constrained to one JSON object ``{"name": <a tool>, "arguments":
  <its required arguments>}`` (optional ones keep their defaults), which
  ``completion_as_tool_call`` turns into an ordinary tool call;
- **answer** (a tool result came back): no tools and no constraint; the model
  answers in text from the result.

Earlier calls and results in the history are rewritten as plain text (a call as
its JSON, a result as a user message naming the tool), so any chat template renders
them. One tool step per prompt is what a small model can follow; a model that can
do more should use ``native`` mode. It must not send requests.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from clio_acp.models.client import ChatRequest, Completion, ToolCall

SHORTLIST = 3
"""Tools offered in one call phase: those whose name and description share most words
with the user's prompt, best first (a small model picks among few far better)."""
REMINDER_PREFIX = "<system-reminder>"
"""User messages the system adds (memory reminders), not prompts from the user."""
SCHEMA_NAME = "tool_call"


def _name(tool: dict[str, Any]) -> str:
    return str((tool.get("function") or tool).get("name") or "")


def wants_tool_call(messages: Sequence[dict[str, Any]]) -> bool:
    """True in the call phase: walking back from the end, the user's prompt comes
    before any tool result (a system reminder is not a prompt)."""
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            return False
        content = message.get("content")
        if role == "user" and not (
            isinstance(content, str) and content.startswith(REMINDER_PREFIX)
        ):
            return True
    return True


ANSWER_TEXT = "\n\nAnswer the user's request briefly from the tool result above."
_WORD = re.compile(r"[a-z]+")
_STOP_WORDS = frozenset(
    "a an and are as at be by can do for from how i in is it me my of on or please "
    "show tell that the this to what which with you your".split()
)


def _words(text: str) -> set[str]:
    """Lower-case words without a plural ``s`` (``files`` ~ ``file``), stop words out;
    ``list_dir`` gives ``list`` and ``dir``."""
    return {w.removesuffix("s") for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS}


def last_prompt(messages: Sequence[dict[str, Any]]) -> str:
    """The user's latest prompt (system reminders skipped), or ``""``."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            if not content.startswith(REMINDER_PREFIX):
                return content
    return ""


def _first_word(text: str) -> str:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS]
    return words[0].removesuffix("s") if words else ""


def _score(tool: dict[str, Any], prompt: str, wanted: set[str]) -> int:
    """3 when the prompt's verb (its first word) is the tool name's verb, plus 2 per
    prompt word in the name and 1 per prompt word in the description."""
    function = tool.get("function") or tool
    name = _name(tool).replace("_", " ")
    verb = 3 if _first_word(prompt) and _first_word(prompt) == _first_word(name) else 0
    described = _words(str(function.get("description") or ""))
    return verb + 2 * len(wanted & _words(name)) + len(wanted & described)


def shortlist(tools: Sequence[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """The ``SHORTLIST`` tools that best match ``prompt`` (``_score``), best first
    (ties keep the given order); all of them, in order, when none matches."""
    wanted = _words(prompt)
    scored = [(-_score(tool, prompt, wanted), i, tool) for i, tool in enumerate(tools)]
    scored.sort(key=lambda item: item[:2])
    if not scored or scored[0][0] == 0:
        return list(tools)
    return [tool for _, _, tool in scored[:SHORTLIST]]


def required_only(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` (a JSON schema object) keeping only its required properties: a small
    model fills optional ones with invented values, the tool's defaults serve better."""
    required = list(params.get("required") or [])
    properties = params.get("properties") or {}
    return {
        **{k: v for k, v in params.items() if k not in ("properties", "required")},
        "type": "object",
        "properties": {k: v for k, v in properties.items() if k in required},
        "required": required,
        "additionalProperties": False,
    }


def call_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call of any of ``tools`` (``anyOf``, one per tool), each
    with its required arguments only."""
    options = []
    for tool in tools:
        function = tool.get("function") or tool
        params = required_only(function.get("parameters") or {})
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": _name(tool)}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": options}


def _signature(tool: dict[str, Any]) -> str:
    function = tool.get("function") or tool
    params = (function.get("parameters") or {}).get("properties") or {}
    required = set((function.get("parameters") or {}).get("required") or ())
    args = ", ".join(
        f"{key}: {_type_text(spec)}"
        for key, spec in params.items()
        if isinstance(spec, dict) and key in required
    )
    description = str(function.get("description") or "").strip().split("\n")[0]
    return f"- {_name(tool)}({args}): {description}"


def _type_text(spec: dict[str, Any]) -> str:
    if "type" in spec:
        return str(spec["type"])
    options = [o.get("type") for o in spec.get("anyOf") or () if isinstance(o, dict)]
    return "|".join(str(o) for o in options if o and o != "null") or "any"


def tools_text(tools: Sequence[dict[str, Any]]) -> str:
    """The tools as the system message describes them in the call phase."""
    lines = "\n".join(_signature(tool) for tool in tools)
    return (
        "\n\nTools (name(arguments): what it does):\n"
        f"{lines}\n"
        'Call exactly one tool now: answer with {"name": <tool>, "arguments": {...}}.'
    )


def plain_history(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with tool calls and results as plain text any template renders:
    a call becomes part of the user message that carries its result ("Result of
    list_dir(...):"), so a small model does not imitate the call's JSON."""
    calls: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                args = json.dumps(_args(function))
                calls[str(call.get("id"))] = f"{function.get('name') or 'tool'}({args})"
            if message.get("content"):
                out.append({"role": "assistant", "content": message["content"]})
        elif role == "tool":
            call = calls.get(str(message.get("tool_call_id")), "the tool")
            out.append(
                {"role": "user", "content": f"Result of {call}:\n{message.get('content') or ''}"}
            )
        else:
            out.append({k: v for k, v in message.items() if k in ("role", "content", "name")})
    return out


def _args(function: dict[str, Any]) -> Any:
    raw = function.get("arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw if raw is not None else {}


def _with_system_suffix(messages: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content') or ''}{suffix}"
        return [first, *messages[1:]]
    return [{"role": "system", "content": suffix.lstrip()}, *messages]


def call_request(request: ChatRequest) -> ChatRequest:
    """The call-phase request: the shortlisted tools in the system message, the answer
    constrained to one call of them (``response_format`` json_schema), ``tools`` not
    sent."""
    tools = shortlist(request.tools or [], last_prompt(request.messages))
    messages = _with_system_suffix(plain_history(request.messages), tools_text(tools))
    extra = dict(request.extra)
    extra["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": call_schema(tools), "strict": True},
    }
    return replace(request, messages=messages, tools=None, tool_choice=None, extra=extra)


def answer_request(request: ChatRequest) -> ChatRequest:
    """The answer-phase request: plain history, no tools, no constraint."""
    return replace(request, messages=plain_history(request.messages), tools=None, tool_choice=None)


def completion_as_tool_call(completion: Completion, tools: Sequence[dict[str, Any]]) -> Completion:
    """The call-phase answer as a completion with one tool call (text emptied). An
    answer that is not a call of a known tool (cut by the output cap, or a runtime
    that ignored the schema) stays a text answer."""
    try:
        data = json.loads(completion.text)
    except ValueError:
        return completion
    known = {_name(tool) for tool in tools}
    if not isinstance(data, dict) or data.get("name") not in known:
        return completion
    arguments = data.get("arguments")
    call = ToolCall(
        id=f"call_{uuid.uuid4().hex[:12]}",
        name=str(data["name"]),
        arguments=json.dumps(arguments if isinstance(arguments, dict) else {}),
    )
    return replace(completion, text="", tool_calls=[call], finish_reason="tool_calls")
