"""The OpenAI-compatible client against the scripted server: SSE framing edge
cases, typed errors, retries, deadlines and cancellation (issue 5 items 1 and 7)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from clio_acp.models.client import (
    ChatRequest,
    Done,
    ModelClient,
    TextDelta,
    ToolCallDelta,
)
from clio_acp.models.errors import (
    EndpointBusyError,
    MalformedStreamError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)
from clio_acp.models.local import free_port
from clio_acp.models.targets import Target, normalize_base_url, root_url
from tests.support.model_server import Reply, ToolCall, busy, usage
from tests.support.waiting import wait_until

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def client(model_server):
    c = ModelClient(Target(id="box", runtime="llamacpp", base_url=model_server.base_url))
    yield c
    await c.aclose()


async def test_streamed_text_and_reasoning_are_reassembled_in_order(client, model_server):
    model_server.push(
        Reply(reasoning=["Let ", "me ", "think"], text=["Hel", "lo ", "there"], usage=usage(9, 3))
    )
    events = [e async for e in client.stream(ChatRequest(HELLO), timeout_ms=5000)]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ReasoningDelta") < kinds.index("TextDelta")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo ", "there"]
    done = events[-1]
    assert isinstance(done, Done)
    assert done.completion.text == "Hello there"
    assert done.completion.reasoning == "Let me think"
    assert done.completion.finish_reason == "stop"
    assert done.completion.target_id == "box"


async def test_tool_call_arguments_split_mid_json_are_reassembled(client, model_server):
    args = json.dumps({"path": "src/app.py", "lines": [1, 2, 3], "note": 'say "hi"'})
    model_server.push(
        Reply(
            tool_calls=[
                ToolCall("read_file", args, id="call_a", split=4),
                ToolCall("run", '{"cmd": "pytest -q"}', id="call_b", split=3),
            ]
        )
    )
    pieces = []
    comp = await client.complete(ChatRequest(HELLO), timeout_ms=5000, on_event=pieces.append)
    assert sum(isinstance(p, ToolCallDelta) for p in pieces) > 4
    assert [(c.id, c.name) for c in comp.tool_calls] == [("call_a", "read_file"), ("call_b", "run")]
    assert json.loads(comp.tool_calls[0].arguments) == json.loads(args)
    assert json.loads(comp.tool_calls[1].arguments) == {"cmd": "pytest -q"}
    assert comp.finish_reason == "tool_calls"


async def test_usage_in_the_last_chunk_with_cached_tokens_and_timings(client, model_server):
    timings = {
        "prompt_n": 40,
        "prompt_ms": 12.5,
        "predicted_n": 3,
        "predicted_ms": 30.0,
        "cache_n": 100,
    }
    model_server.push(Reply(text="ok", usage=usage(140, 3), timings=timings))
    comp = await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    assert (comp.usage.input_tokens, comp.usage.output_tokens) == (140, 3)
    assert comp.usage.cached_tokens == 100  # from timings.cache_n
    assert comp.timings.prompt_tokens == 40 and comp.timings.prompt_ms == 12.5


async def test_usage_in_a_separate_choiceless_chunk_is_read(client, model_server):
    model_server.push(Reply(text="ok", usage=usage(7, 2, cached=5), usage_in_separate_chunk=True))
    comp = await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    assert comp.usage.total_tokens == 9 and comp.usage.cached_tokens == 5


async def test_missing_done_after_a_finish_reason_is_a_complete_answer(client, model_server):
    model_server.push(Reply(text="all here", done=False))
    comp = await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    assert comp.text == "all here"


async def test_stream_that_ends_without_finish_or_done_is_malformed(client, model_server):
    payload = json.dumps({"choices": [{"index": 0, "delta": {"content": "half"}}]})
    model_server.push(Reply(raw=[payload], done=False))
    with pytest.raises(MalformedStreamError, match="ended before"):
        await client.complete(ChatRequest(HELLO), timeout_ms=5000)


async def test_disconnect_mid_stream_is_malformed_not_retried(client, model_server):
    model_server.push(Reply(text="one two three four five", disconnect_after=3))
    model_server.push(Reply(text="second request would succeed"))
    with pytest.raises(MalformedStreamError):
        await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    assert len(model_server.completions) == 1


async def test_non_json_chunk_is_malformed(client, model_server):
    model_server.push(Reply(raw=["{not json"]))
    with pytest.raises(MalformedStreamError, match="not JSON"):
        await client.complete(ChatRequest(HELLO), timeout_ms=5000)


@pytest.mark.parametrize("status", [429, 503])
async def test_busy_statuses_raise_endpoint_busy_with_retry_after(client, model_server, status):
    model_server.push(busy(status, "all slots busy", retry_after="3"))
    with pytest.raises(EndpointBusyError) as info:
        await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    assert info.value.status == status and info.value.retry_after_s == 3.0
    assert "all slots busy" in str(info.value)


async def test_other_http_errors_are_client_errors_with_the_server_message(client, model_server):
    model_server.push(Reply(status=400, error="context length exceeded"))
    with pytest.raises(ModelHTTPError, match="context length exceeded") as info:
        await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    assert info.value.status == 400


async def test_error_object_mid_stream_is_a_typed_error(client, model_server):
    model_server.push(Reply(raw=[json.dumps({"error": {"message": "slot evicted", "code": 500}})]))
    with pytest.raises(ModelHTTPError, match="slot evicted"):
        await client.complete(ChatRequest(HELLO), timeout_ms=5000)


async def test_slow_stream_hits_the_deadline(client, model_server):
    model_server.push(Reply(text="a b c d e f g h", chunk_delay=0.3))
    with pytest.raises(ModelTimeoutError) as info:
        await client.complete(ChatRequest(HELLO), timeout_ms=500)
    assert isinstance(info.value, TimeoutError) and info.value.timeout_ms == 500


async def test_silent_server_hits_the_deadline_before_headers(client, model_server):
    model_server.push(Reply(text="late", delay=3))
    with pytest.raises(ModelTimeoutError):
        await client.complete(ChatRequest(HELLO), timeout_ms=300)


async def test_connection_refused_is_retried_then_typed():
    port = free_port()
    client = ModelClient(
        Target(id="gone", runtime="llamacpp", base_url=f"http://127.0.0.1:{port}/v1"),
        retry_pauses_s=(0.01, 0.01),
    )
    try:
        with pytest.raises(ModelConnectionError, match="unreachable"):
            await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    finally:
        await client.aclose()


async def test_cancelling_the_consumer_closes_the_stream_promptly(client, model_server):
    model_server.push(Reply(text=" ".join(["word"] * 200), chunk_delay=0.05))
    got_first = asyncio.Event()

    async def consume():
        async for event in client.stream(ChatRequest(HELLO), timeout_ms=30_000):
            if isinstance(event, TextDelta):
                got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # The server notices the closed connection on its next write.
    await wait_until(lambda: model_server.completions[0].client_disconnected, timeout_s=5)


async def test_non_streaming_answer(client, model_server):
    model_server.push(
        Reply(
            text="whole",
            reasoning="brief",
            tool_calls=[ToolCall("f", '{"x":1}')],
            usage=usage(3, 4),
        )
    )
    comp = await client.complete(ChatRequest(HELLO), timeout_ms=5000, stream=False)
    assert model_server.bodies[0]["stream"] is False
    assert (comp.text, comp.reasoning) == ("whole", "brief")
    assert comp.tool_calls[0].arguments == '{"x":1}' and comp.usage.output_tokens == 4


async def test_server_that_ignores_stream_and_answers_json_still_works(client, model_server):
    model_server.push(Reply(text="json anyway"))
    # A streaming request whose answer is plain JSON: the body override makes the
    # scripted server answer as if stream were false.
    comp = await client.complete(ChatRequest(HELLO, extra={"stream": False}), timeout_ms=5000)
    assert comp.text == "json anyway"


async def test_request_body_carries_model_tools_limits_and_extra(client, model_server):
    model_server.push(Reply(text="ok"))
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    await client.complete(
        ChatRequest(
            HELLO,
            model="m1",
            tools=tools,
            max_tokens=50,
            temperature=0.2,
            seed=7,
            extra={"cache_prompt": False},
        ),
        timeout_ms=5000,
    )
    body = model_server.bodies[0]
    assert body["model"] == "m1" and body["tools"] == tools and body["max_tokens"] == 50
    assert body["seed"] == 7 and body["cache_prompt"] is False and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_api_key_comes_from_the_named_environment_variable(model_server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test-123")
    c = ModelClient(
        Target(id="h", runtime="openai", base_url=model_server.base_url, api_key_env="MY_KEY")
    )
    model_server.push(Reply(text="ok"))
    try:
        await c.complete(ChatRequest(HELLO), timeout_ms=5000)
    finally:
        await c.aclose()
    assert model_server.completions[0].headers["authorization"] == "Bearer sk-test-123"


async def test_list_models_and_slot_discovery(client, model_server):
    model_server.models = ["a", "b"]
    model_server.props = {"total_slots": 3}
    assert await client.list_models() == ["a", "b"]
    assert await client.discover_slots() == 3
    model_server.props = None
    model_server.slots = [{"id": 0}, {"id": 1}]
    assert await client.discover_slots() == 2
    model_server.slots = None
    assert await client.discover_slots() is None


def test_base_url_normalisation():
    assert normalize_base_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert normalize_base_url("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert normalize_base_url("localhost:11434/v1") == "http://localhost:11434/v1"
    assert normalize_base_url("https://gw.example/api/v1") == "https://gw.example/api/v1"
    assert root_url("http://h:1/v1") == "http://h:1"


async def test_clients_share_one_tls_context_per_certificate_setting(monkeypatch):
    # Building a context reads the whole CA bundle (tens of ms); a session makes a
    # client per route, so the bundle is read once per certificate setting.
    import ssl

    import certifi

    from clio_acp.models import client as client_module

    loads: list[object] = []
    real_load = ssl.SSLContext.load_verify_locations

    def counting_load(self, *args, **kwargs):
        loads.append(args or kwargs)
        return real_load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting_load)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    client_module._tls_context_for.cache_clear()
    target = Target(id="t", runtime="openai", base_url="https://example.invalid/v1")
    clients = [ModelClient(target) for _ in range(3)]
    assert len(loads) == 1
    context = client_module.tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    monkeypatch.delenv("SSL_CERT_FILE")
    clients.append(ModelClient(target))  # another bundle setting: read once more
    assert len(loads) == 2 and client_module.tls_context() is not context
    for client in clients:
        await client.aclose()
