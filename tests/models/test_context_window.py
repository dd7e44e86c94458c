"""Context windows (issue 20 item 4): discovered from the server, estimates scaled by
the server's ``usage.prompt_tokens``, and a context-overflow answer recognised."""

from __future__ import annotations

import pytest

from clio_acp.agent.model_port import RouterChatModel, resolve_chat_model
from clio_acp.models.client import ChatRequest, ModelClient, context_overflow
from clio_acp.models.errors import ContextOverflowError
from clio_acp.models.routing import Router
from clio_acp.models.targets import Target
from clio_acp.settings import Settings
from tests.support.model_server import Reply, usage

LLAMACPP_OVERFLOW = {
    "code": 400,
    "message": "the request exceeds the available context size, try increasing it",
    "type": "exceed_context_size_error",
    "n_prompt_tokens": 5210,
    "n_ctx": 4096,
}


def _settings(url: str, runtime: str = "llamacpp", **target) -> Settings:
    return Settings.model_validate(
        {
            "targets": [{"id": "t", "runtime": runtime, "url": url, **target}],
            "chat": {"target": "t"},
        }
    )


def test_overflow_answers_of_each_runtime_are_recognised():
    assert context_overflow(
        400, '{"error": {"type": "exceed_context_size_error", "n_ctx": 4096}}'
    ) == (
        True,
        4096,
    )
    vllm = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"
    assert context_overflow(400, vllm) == (True, 8192)
    assert context_overflow(400, '{"error": {"code": "context_length_exceeded"}}') == (True, None)
    assert context_overflow(400, '{"error": {"message": "bad temperature"}}') is None
    assert context_overflow(401, "context_length_exceeded") is None


async def test_a_llamacpp_overflow_raises_context_overflow_with_the_window(model_server):
    model_server.push(Reply(status=400, error={"error": LLAMACPP_OVERFLOW}))
    client = ModelClient(Target(id="t", runtime="llamacpp", base_url=model_server.base_url))
    try:
        with pytest.raises(ContextOverflowError) as info:
            await client.complete(ChatRequest([{"role": "user", "content": "x"}]), timeout_ms=5000)
    finally:
        await client.aclose()
    assert info.value.window == 4096 and info.value.status == 400


async def test_llamacpp_window_comes_from_props_per_slot(model_server):
    model_server.props = {"total_slots": 2, "default_generation_settings": {"n_ctx": 4096}}
    model = resolve_chat_model(_settings(model_server.base_url))
    try:
        model_server.push(Reply(text="hi", usage=usage(10, 1)))
        assert model.context_window == 32_768  # before the first request: the default
        await model.stream([{"role": "user", "content": "x" * 40}], ())
        assert model.window_tokens == 4096
    finally:
        await model.aclose()


async def test_vllm_window_comes_from_models_metadata(model_server):
    model_server.models = ["other", "big"]
    model_server.model_meta = {"other": {"max_model_len": 1000}, "big": {"max_model_len": 16384}}
    router = Router(_settings(model_server.base_url, runtime="vllm", defaultModel="big"))
    try:
        assert await router.chat_window() == 16384
    finally:
        await router.aclose()


async def test_a_declared_window_wins_and_is_not_discovered(model_server):
    model_server.props = {"default_generation_settings": {"n_ctx": 4096}}
    model = resolve_chat_model(_settings(model_server.base_url, contextWindow=12000))
    try:
        model_server.push(Reply(text="hi", usage=usage(10, 1)))
        await model.stream([{"role": "user", "content": "hello"}], ())
        assert model.window_tokens == 12000
    finally:
        await model.aclose()


async def test_estimates_are_scaled_by_the_reported_prompt_tokens(model_server):
    router = Router(_settings(model_server.base_url))
    model = RouterChatModel(router, context_window=8000)
    messages = [{"role": "user", "content": "word " * 400}]  # about 500 estimated tokens
    try:
        model_server.push(Reply(text="a", usage=usage(1000, 1)))
        await model.stream(messages, ())
        assert 1.8 < model.token_scale < 2.2
        assert 3600 < model.context_window < 4400  # the window in estimated tokens
        model_server.push(Reply(text="b", usage=usage(10**7, 1)))  # absurd report: bounded
        await model.stream(messages, ())
        assert model.context_window == 2000
    finally:
        await model.aclose()
