"""Thinking-off and grammar request bodies per runtime, as the server receives
them (issue 5 items 1-2, 7)."""

from __future__ import annotations

import pytest

from clio_acp.models.client import ChatRequest, ModelClient
from clio_acp.models.targets import Target
from tests.support.model_server import Reply

HELLO = [{"role": "user", "content": "hi"}]


async def _body(model_server, runtime, request):
    model_server.push(Reply(text="ok"))
    client = ModelClient(Target(id="t", runtime=runtime, base_url=model_server.base_url))
    try:
        comp = await client.complete(request, timeout_ms=5000)
    finally:
        await client.aclose()
    return model_server.bodies[-1], comp


@pytest.mark.parametrize("runtime", ["llamacpp", "embedded", "vllm"])
async def test_thinking_off_uses_chat_template_kwargs(model_server, runtime):
    body, _ = await _body(
        model_server,
        runtime,
        ChatRequest(HELLO, thinking=False, extra={"chat_template_kwargs": {"keep": 1}}),
    )
    # extra is merged last, so a caller's own kwargs replace ours wholesale
    assert body["chat_template_kwargs"] == {"keep": 1}
    body, _ = await _body(model_server, runtime, ChatRequest(HELLO, thinking=False))
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "reasoning_effort" not in body


async def test_thinking_off_for_lm_studio_uses_reasoning_effort(model_server):
    body, _ = await _body(model_server, "lmstudio", ChatRequest(HELLO, thinking=False))
    assert body["reasoning_effort"] == "none"
    assert "chat_template_kwargs" not in body


@pytest.mark.parametrize("runtime", ["ollama", "litellm", "openai", "llama-cpp-python", "mystery"])
async def test_thinking_off_adds_nothing_where_no_switch_is_known(
    model_server, runtime, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    body, _ = await _body(model_server, runtime, ChatRequest(HELLO, thinking=False))
    assert "chat_template_kwargs" not in body and "reasoning_effort" not in body


async def test_thinking_on_adds_no_switch(model_server):
    body, _ = await _body(model_server, "llamacpp", ChatRequest(HELLO))
    assert "chat_template_kwargs" not in body


@pytest.mark.parametrize(
    ("runtime", "field", "constrained"),
    [
        ("llamacpp", "grammar", True),
        ("embedded", "grammar", True),
        ("llama-cpp-python", "grammar", True),
        ("vllm", "structured_outputs", True),
        ("ollama", None, False),
        ("lmstudio", None, False),
        ("litellm", None, False),
    ],
)
async def test_grammar_goes_where_the_runtime_reads_it(model_server, runtime, field, constrained):
    body, comp = await _body(model_server, runtime, ChatRequest(HELLO, grammar='root ::= "x"'))
    assert comp.constrained is constrained
    if field == "grammar":
        assert body["grammar"] == 'root ::= "x"'
    elif field == "structured_outputs":
        assert body["structured_outputs"] == {"grammar": 'root ::= "x"'}
    else:
        assert "grammar" not in body and "structured_outputs" not in body
