"""The chat route's bounds and constrained tool calling (issue 20 items 2-3), against
the scripted model server on loopback."""

from __future__ import annotations

import json

from clio_acp.agent.tools import ToolRegistry
from clio_acp.models.client import ChatRequest, Done, TextDelta
from clio_acp.models.routing import Router
from clio_acp.settings import Settings
from tests.support.model_server import Reply, usage

TOOLS = ToolRegistry().schemas()
ASK = [
    {"role": "system", "content": "You are clio."},
    {"role": "user", "content": "List the files."},
]


def _settings(
    url: str, *, runtime: str = "llamacpp", chat: dict | None = None, **target
) -> Settings:
    return Settings.model_validate(
        {
            "targets": [{"id": "t", "runtime": runtime, "url": url, **target}],
            "chat": {"target": "t", **(chat or {})},
        }
    )


async def _answer(router: Router, request: ChatRequest) -> tuple[list, Done]:
    events = [event async for event in router.stream_chat(request)]
    assert isinstance(events[-1], Done)
    return events[:-1], events[-1]


async def test_chat_requests_carry_an_output_cap(model_server):
    model_server.default = Reply(text="ok", usage=usage(5, 1))
    for settings, cap in (
        (_settings(model_server.base_url), 8192),
        (_settings(model_server.base_url, chat={"maxOutputTokens": 300, "seed": 7}), 300),
        (_settings(model_server.base_url, runtime="embedded"), 384),
    ):
        router = Router(settings)
        try:
            await _answer(router, ChatRequest([{"role": "user", "content": "hi"}]))
        finally:
            await router.aclose()
        assert model_server.bodies[-1]["max_tokens"] == cap
    assert model_server.bodies[1]["seed"] == 7 and "seed" not in model_server.bodies[0]


async def test_a_looping_answer_is_cut_with_the_reason_repetition(model_server):
    model_server.push(Reply(text=["Files:\n"] + ["- checkout-1.2\n"] * 300, usage=usage(5, 900)))
    router = Router(_settings(model_server.base_url))
    try:
        deltas, done = await _answer(router, ChatRequest([{"role": "user", "content": "ls"}]))
    finally:
        await router.aclose()
    assert done.completion.finish_reason == "repetition"
    assert "same line" in (done.completion.stop_detail or "")
    assert len(deltas) < 20  # stopped early, not after 300 lines
    assert done.completion.text.count("checkout-1.2") < 10


async def test_constrained_tool_calling_calls_then_answers_from_the_result(model_server):
    model_server.push(
        Reply(
            text=['{"name": "list_dir", ', '"arguments": {}}'],
            when=lambda b: "response_format" in b,
        ),
        Reply(text="README.md and src/.", when=lambda b: "response_format" not in b),
    )
    router = Router(_settings(model_server.base_url, toolCalling="constrained"))
    try:
        deltas, done = await _answer(router, ChatRequest(list(ASK), tools=TOOLS))
        assert not [d for d in deltas if isinstance(d, TextDelta)]  # the JSON is not shown
        (call,) = done.completion.tool_calls
        assert call.name == "list_dir" and json.loads(call.arguments) == {}
        history = [
            *ASK,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "README.md\nsrc/"},
        ]  # fmt: skip
        deltas, done = await _answer(router, ChatRequest(history, tools=TOOLS))
    finally:
        await router.aclose()
    assert done.completion.text == "README.md and src/." and not done.completion.tool_calls
    first, second = model_server.bodies
    assert "tools" not in first and first["response_format"]["type"] == "json_schema"
    assert "list_dir" in first["messages"][0]["content"]
    assert "tools" not in second and "response_format" not in second
    assert second["messages"][-1]["content"].startswith("Result of list_dir({}):\nREADME.md")


async def test_native_targets_get_tools_as_sent(model_server):
    model_server.push(Reply(text="hello"))
    router = Router(_settings(model_server.base_url))
    try:
        await _answer(router, ChatRequest(list(ASK), tools=TOOLS))
    finally:
        await router.aclose()
    (body,) = model_server.bodies
    assert body["tools"] == TOOLS and "response_format" not in body


async def test_constrained_mode_needs_a_grammar_runtime(model_server):
    model_server.push(Reply(text="hello"))
    router = Router(_settings(model_server.base_url, runtime="ollama", toolCalling="constrained"))
    try:
        await _answer(router, ChatRequest(list(ASK), tools=TOOLS))
    finally:
        await router.aclose()
    assert "tools" in model_server.bodies[0]  # ollama takes no schema: native tools
