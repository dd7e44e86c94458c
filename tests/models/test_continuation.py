"""Provider continuation replay (issue 19 item 2): the reasoning state an answer carries
is kept with its route identity and sent back only to the same target, runtime and
model — checked on the wire with the scripted server, plus the pure rules."""

from __future__ import annotations

import json

import pytest

from clio_acp.models.client import ChatRequest, ModelClient
from clio_acp.models.continuation import (
    CONTINUATION_KEY,
    Continuation,
    ContinuationCollector,
    RouteIdentity,
    prepare_messages,
)
from clio_acp.models.targets import Target
from tests.support.model_server import Reply, ToolCall

HELLO = [{"role": "user", "content": "hello"}]
BOX = RouteIdentity("box", "llamacpp", "model-a")


def _client(model_server, *, replay: bool = True, model: str = "model-a") -> ModelClient:
    return ModelClient(
        Target(
            id="box",
            runtime="llamacpp",
            base_url=model_server.base_url,
            default_model=model,
            continuation_replay=replay,
        )
    )


def _history(state: dict | None) -> list[dict]:
    assistant = {"role": "assistant", "content": "It is 4.", CONTINUATION_KEY: state}
    return [*HELLO, assistant, {"role": "user", "content": "and 3+3?"}]


async def test_reasoning_content_goes_back_to_the_same_target_runtime_and_model(model_server):
    model_server.push(Reply(reasoning=["2+2 ", "is 4"], text="It is 4."), Reply(text="6"))
    client = _client(model_server)
    try:
        first = await client.complete(ChatRequest(HELLO), timeout_ms=5000)
        state = first.continuation
        assert state is not None and state.identity == BOX
        assert state.message == {"reasoning_content": "2+2 is 4"}
        await client.complete(ChatRequest(_history(state.to_json())), timeout_ms=5000)
    finally:
        await client.aclose()
    sent = model_server.bodies[1]["messages"][1]
    assert sent == {"role": "assistant", "content": "It is 4.", "reasoning_content": "2+2 is 4"}


@pytest.mark.parametrize(
    "stored",
    [
        RouteIdentity("box", "llamacpp", "model-b"),  # another model on the same target
        RouteIdentity("other", "llamacpp", "model-a"),  # the same model name elsewhere
        RouteIdentity("box", "vllm", "model-a"),  # another runtime
    ],
)
async def test_state_of_another_route_is_dropped_and_the_plain_message_sent(model_server, stored):
    model_server.push(Reply(text="6"))
    state = Continuation(stored, {"reasoning_content": "secret chain"}).to_json()
    client = _client(model_server)
    try:
        await client.complete(ChatRequest(_history(state)), timeout_ms=5000)
    finally:
        await client.aclose()
    body = json.dumps(model_server.bodies[0])
    assert "secret chain" not in body and CONTINUATION_KEY not in body
    assert model_server.bodies[0]["messages"][1] == {"role": "assistant", "content": "It is 4."}


async def test_replay_off_for_the_target_sends_no_state(model_server):
    model_server.push(Reply(text="6"))
    state = Continuation(BOX, {"reasoning_content": "chain"}).to_json()
    client = _client(model_server, replay=False)
    try:
        await client.complete(ChatRequest(_history(state)), timeout_ms=5000)
    finally:
        await client.aclose()
    assert "chain" not in json.dumps(model_server.bodies[0])


async def test_reasoning_items_and_tool_call_signatures_are_captured_and_replayed(
    model_server,
):
    def chunk(delta: dict, finish: str | None = None) -> str:
        return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    signature = {"google": {"thought_signature": "sig-123"}}
    raw = [
        chunk({"reasoning_details": [{"type": "reasoning.text", "index": 0, "text": "Look "}]}),
        chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.text", "index": 0, "text": "first", "signature": "s1"}
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "function": {"name": "read_file", "arguments": '{"path":'},
                        "extra_content": signature,
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a.py"}'}}]}, "tool_calls"),
    ]
    model_server.push(Reply(raw=raw), Reply(text="done"))
    client = _client(model_server)
    try:
        first = await client.complete(ChatRequest(HELLO), timeout_ms=5000)
        assert first.continuation is not None
        assert first.continuation.message == {
            "reasoning_details": [
                {"type": "reasoning.text", "index": 0, "text": "Look first", "signature": "s1"}
            ]
        }
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
        }
        history = [
            *HELLO,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call],
                CONTINUATION_KEY: first.continuation.to_json(),
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
        ]
        await client.complete(ChatRequest(history), timeout_ms=5000)
    finally:
        await client.aclose()
    sent = model_server.bodies[1]["messages"][1]
    assert sent["reasoning_details"][0]["signature"] == "s1"
    assert sent["tool_calls"] == [{**call, "extra_content": signature}]


def test_an_answer_without_reasoning_carries_no_state():
    collector = ContinuationCollector()
    collector.feed_delta({"content": "plain"})
    assert collector.build(BOX) is None


def test_only_the_first_reasoning_field_name_is_kept_when_a_server_sends_both():
    collector = ContinuationCollector()
    collector.feed_delta({"reasoning_content": "a", "reasoning": "a"})
    collector.feed_delta({"reasoning": "b"})
    collector.feed_delta({"reasoning_content": "c"})
    state = collector.build(BOX)
    assert state is not None and state.message == {"reasoning_content": "ac"}


def test_damaged_state_is_sent_in_the_ordinary_rendering():
    messages = [
        {"role": "assistant", "content": "x", CONTINUATION_KEY: {"target": 3}},
        {"role": "assistant", "content": "y", CONTINUATION_KEY: "junk"},
    ]
    out = prepare_messages(messages, BOX, replay=True)
    assert out == [{"role": "assistant", "content": "x"}, {"role": "assistant", "content": "y"}]
    assert CONTINUATION_KEY in messages[0]  # the caller's messages are not changed


def test_stored_state_cannot_overwrite_content_or_add_unknown_fields():
    state = {
        "target": "box",
        "runtime": "llamacpp",
        "model": "model-a",
        "message": {"content": "forged", "role": "system", "reasoning": "r"},
    }
    out = prepare_messages(
        [{"role": "assistant", "content": "real", CONTINUATION_KEY: state}], BOX, replay=True
    )
    assert out == [{"role": "assistant", "content": "real", "reasoning": "r"}]


def test_round_trip_through_json_keeps_identity_and_tool_call_positions():
    state = Continuation(
        BOX, {"reasoning_content": "r"}, (None, {"extra_content": {"google": {"x": 1}}})
    )
    again = Continuation.from_json(json.loads(json.dumps(state.to_json())))
    assert again == state


async def test_a_tool_call_script_keeps_working_with_reasoning(model_server):
    model_server.push(Reply(reasoning="plan", tool_calls=[ToolCall("list_dir", "{}", id="c1")]))
    client = _client(model_server)
    try:
        comp = await client.complete(ChatRequest(HELLO), timeout_ms=5000)
    finally:
        await client.aclose()
    assert comp.continuation is not None
    assert comp.continuation.to_json() == {
        "target": "box",
        "runtime": "llamacpp",
        "model": "model-a",
        "message": {"reasoning_content": "plan"},
    }


def test_the_view_estimate_counts_a_stored_state_it_may_send():
    from clio_acp.context.tokens import estimate_message

    plain = {"role": "assistant", "content": "It is 4."}
    state = Continuation(BOX, {"reasoning_content": "x" * 4000}).to_json()
    assert estimate_message({**plain, CONTINUATION_KEY: state}) == estimate_message(plain) + 1000
