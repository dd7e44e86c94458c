"""Role resolution, capacity and the one chat-route fallback (MEMORY_SPEC §10 route
safety; issue 5 item 3), against scripted servers on loopback."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from clio_acp.models.capacity import Capacity, CapacityTracker
from clio_acp.models.client import ChatRequest, TextDelta
from clio_acp.models.errors import (
    EndpointBusyError,
    MalformedStreamError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
    RouteError,
)
from clio_acp.models.grammar import envelope_grammar_for_budget
from clio_acp.models.local import free_port
from clio_acp.models.routing import Router, resolve_routes
from clio_acp.models.targets import Target
from clio_acp.settings import Settings
from tests.support.model_server import Reply, ScriptedModelServer, busy, usage

ENVELOPE = "<operations>[]</operations>\n<no_intervention/>"


def settings_for(
    chat_url, memory_url=None, *, chat_runtime="llamacpp", memory_runtime="llamacpp", **memory
):
    targets = [{"id": "chat", "runtime": chat_runtime, "url": chat_url, "defaultModel": "big"}]
    mem = {"target": "chat", **memory}
    if memory_url is not None:
        targets.append({"id": "small", "runtime": memory_runtime, "url": memory_url})
        mem = {"target": "small", "model": "tiny", **memory}
    return Settings.model_validate(
        {"targets": targets, "chat": {"target": "chat"}, "context": {"memory": mem}}
    )


@pytest.fixture
def second_server():
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def tracker():
    return CapacityTracker()


# -- role resolution ------------------------------------------------------------


def test_unset_memory_role_means_rules_tier_only():
    s = Settings.model_validate(
        {
            "targets": [{"id": "a", "runtime": "ollama", "url": "http://h:11434/v1"}],
            "chat": {"target": "a"},
        }
    )
    table = resolve_routes(s, embedded_installed=False)
    assert table.chat is not None and table.memory is None


def test_target_naming_nothing_resets_the_role_with_a_note():
    s = Settings.model_validate(
        {
            "targets": [{"id": "a", "runtime": "ollama", "url": "http://h/v1"}],
            "chat": {"target": "a"},
            "context": {"memory": {"target": "nope", "model": "m"}},
        }
    )
    table = resolve_routes(s, embedded_installed=False)
    assert table.memory is None
    assert any("'nope' names no target" in n for n in table.notes)


def test_model_without_target_is_cleared_and_target_without_model_uses_its_default():
    s = Settings.model_validate(
        {
            "targets": [
                {"id": "a", "runtime": "ollama", "url": "http://h/v1", "defaultModel": "qwen3:4b"}
            ],
            "chat": {"model": "orphan"},
            "context": {"memory": {"target": "a"}},
        }
    )
    table = resolve_routes(s, embedded_installed=False)
    assert table.chat is None and any("orphan" in n for n in table.notes)
    assert table.memory.model == "qwen3:4b"


def test_memory_sharing_an_always_reasoning_chat_model_is_refused():
    base = {
        "targets": [
            {
                "id": "a",
                "runtime": "llamacpp",
                "url": "http://h/v1",
                "alwaysReasoningModels": ["qwq"],
            }
        ],
        "chat": {"target": "a", "model": "qwq"},
    }
    same = Settings.model_validate({**base, "context": {"memory": {"target": "a", "model": "qwq"}}})
    assert resolve_routes(same, embedded_installed=False).memory is None
    other = Settings.model_validate(
        {**base, "context": {"memory": {"target": "a", "model": "small"}}}
    )
    assert resolve_routes(other, embedded_installed=False).memory.model == "small"


def test_with_no_targets_chat_defaults_to_the_installed_embedded_model_memory_never():
    # MEMORY_SPEC §14.1: the LLM tier is opt-in; nothing picks a memory route.
    table = resolve_routes(Settings(), embedded_installed=True)
    assert table.chat.target.runtime == "embedded"
    assert table.memory is None
    assert resolve_routes(Settings(), embedded_installed=False).chat is None


def test_the_memory_route_is_never_the_chat_route_implicitly():
    s = Settings.model_validate(
        {
            "targets": [{"id": "a", "runtime": "openai", "url": "https://api.openai.com/v1"}],
            "chat": {"target": "a", "model": "gpt-x"},
        }
    )
    assert Settings().context.memory.target is None and Settings().context.memory.model is None
    assert resolve_routes(s, embedded_installed=True).memory is None
    assert resolve_routes(s, embedded_installed=False).memory is None


def test_configured_targets_switch_the_embedded_default_off_but_the_id_still_resolves():
    s = Settings.model_validate(
        {
            "targets": [{"id": "a", "runtime": "openai", "url": "https://api.openai.com/v1"}],
            "chat": {"target": "a", "model": "gpt-x"},
            "context": {"memory": {"target": "embedded"}},
        }
    )
    table = resolve_routes(s, embedded_installed=True)
    assert table.chat.target.id == "a" and table.memory.target.runtime == "embedded"
    assert (
        resolve_routes(
            Settings.model_validate({**s.model_dump(by_alias=True), "chat": {}}),
            embedded_installed=True,
        ).chat
        is None
    )


# -- capacity -------------------------------------------------------------------


async def test_capacity_order_declared_then_discovered_then_local_default_then_unbounded(tracker):
    async def three():
        return 3

    async def nothing():
        return None

    declared = Target(id="d", runtime="llamacpp", base_url="http://d:1/v1", declared_capacity=5)
    assert await tracker.resolve(declared, three) == Capacity(5, "declared")
    assert await tracker.resolve(
        Target(id="x", runtime="llamacpp", base_url="http://x:1/v1"), three
    ) == Capacity(3, "discovered")
    assert await tracker.resolve(
        Target(id="o", runtime="ollama", base_url="http://o:1/v1"), nothing
    ) == Capacity(1, "default")
    assert await tracker.resolve(
        Target(id="g", runtime="litellm", base_url="http://g:1/v1"), nothing
    ) == Capacity(None, "unbounded")


async def test_a_gateway_is_never_full(tracker):
    cap = Capacity(None, "unbounded")
    leases = [tracker.try_background("http://gw", cap) for _ in range(20)]
    assert tracker.occupancy("http://gw") == 20
    for lease in leases:
        lease.release()
        lease.release()  # idempotent
    assert tracker.occupancy("http://gw") == 0


async def test_memory_step_is_skipped_busy_while_chat_holds_the_only_slot(model_server, tracker):
    model_server.props = {"total_slots": 1}
    router = Router(settings_for(model_server.base_url), tracker=tracker)
    model_server.push(
        Reply(text=" ".join(["w"] * 50), chunk_delay=0.02, when=lambda b: "grammar" not in b)
    )
    try:
        stream = router.stream_chat(ChatRequest([{"role": "user", "content": "go"}]))
        first = await anext(stream)
        while not isinstance(first, TextDelta):
            first = await anext(stream)
        with pytest.raises(EndpointBusyError) as info:
            await router.memory_complete("sys", "user", 100)
        assert info.value.status is None  # refused locally, no request sent
        assert len(model_server.completions) == 1
        await stream.aclose()
        assert tracker.occupancy(router.chat_route.target.endpoint_key) == 0
        model_server.push(Reply(text=ENVELOPE, usage=usage(50, 9)))
        answer = await router.memory_complete("sys", "user", 100)
        assert answer.text == ENVELOPE
    finally:
        await router.aclose()


async def test_declared_capacity_of_two_lets_memory_run_beside_chat(model_server, tracker):
    settings = Settings.model_validate(
        {
            "targets": [
                {
                    "id": "a",
                    "runtime": "llamacpp",
                    "url": model_server.base_url,
                    "maxConcurrentRequests": 2,
                }
            ],
            "chat": {"target": "a"},
            "context": {"memory": {"target": "a"}},
        }
    )
    router = Router(settings, tracker=tracker)
    model_server.push(
        Reply(text=" ".join(["w"] * 40), chunk_delay=0.02, when=lambda b: "grammar" not in b),
        Reply(text=ENVELOPE, when=lambda b: "grammar" in b),
    )
    try:
        async with contextlib.aclosing(
            router.stream_chat(ChatRequest([{"role": "user", "content": "go"}]))
        ) as stream:
            await anext(stream)
            answer = await router.memory_complete("sys", "user", 100)
            assert answer.text == ENVELOPE
    finally:
        await router.aclose()


# -- the memory request ------------------------------------------------------------


async def test_memory_request_is_thinking_off_and_grammar_constrained_on_llamacpp(
    model_server, tracker
):
    router = Router(settings_for(model_server.base_url, maxOutputTokens=123), tracker=tracker)
    model_server.push(Reply(text=ENVELOPE))
    try:
        answer = await router.memory_complete("the system", "the user", 123)
    finally:
        await router.aclose()
    body = model_server.bodies[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["grammar"] == envelope_grammar_for_budget(123) and answer.constrained is True
    assert body["max_tokens"] == 123 and body["model"] == "big"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


@pytest.mark.parametrize(("runtime", "cached"), [("llamacpp", True), ("ollama", False)])
async def test_memory_request_asks_llamacpp_to_reuse_the_prompt_prefix(
    model_server, tracker, runtime, cached
):
    # MEMORY_SPEC §14.4: the system prompt comes first, byte-identical, and llama.cpp
    # routes get cache_prompt so a step pays only for its new tail.
    router = Router(settings_for(model_server.base_url, chat_runtime=runtime), tracker=tracker)
    model_server.push(Reply(text=ENVELOPE))
    model_server.push(Reply(text=ENVELOPE))
    try:
        await router.memory_complete("the system", "step one", 50)
        await router.memory_complete("the system", "step two", 50)
    finally:
        await router.aclose()
    first, second = model_server.bodies
    assert (
        first["messages"][0]
        == second["messages"][0]
        == {
            "role": "system",
            "content": "the system",
        }
    )
    assert first.get("cache_prompt") is (True if cached else None)


async def test_constrained_decoding_can_be_switched_off(model_server, tracker):
    router = Router(settings_for(model_server.base_url, constrainedDecoding=False), tracker=tracker)
    model_server.push(Reply(text=ENVELOPE))
    try:
        answer = await router.memory_complete("s", "u", 10)
    finally:
        await router.aclose()
    assert "grammar" not in model_server.bodies[0] and answer.constrained is False


async def test_no_memory_route_is_a_route_error(model_server, tracker):
    s = Settings.model_validate(
        {
            "targets": [{"id": "a", "runtime": "ollama", "url": model_server.base_url}],
            "chat": {"target": "a"},
        }
    )
    router = Router(s, tracker=tracker)
    with pytest.raises(RouteError):
        await router.memory_complete("s", "u", 10)
    await router.aclose()


# -- fallback ----------------------------------------------------------------------


async def test_one_fallback_to_chat_after_a_dedicated_route_client_error(
    model_server, second_server, tracker
):
    # model_server = chat, second_server = dedicated memory route
    second_server.push(Reply(status=500, error="model crashed"))
    model_server.push(Reply(text=ENVELOPE, usage=usage(30, 8)))
    seen = []
    router = Router(settings_for(model_server.base_url, second_server.base_url), tracker=tracker)
    try:
        answer = await router.memory_complete("s", "u", 50, on_usage=lambda *a: seen.append(a))
    finally:
        await router.aclose()
    assert answer.fell_back is True and answer.target_id == "chat" and answer.text == ENVELOPE
    assert second_server.bodies[0]["model"] == "tiny" and model_server.bodies[0]["model"] == "big"
    assert [(t, m, u.total_tokens) for t, m, u in seen] == [("chat", "big", 38)]


async def test_fallback_after_connection_refused(model_server, tracker):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    model_server.push(Reply(text=ENVELOPE))
    router = Router(settings_for(model_server.base_url, dead), tracker=tracker)
    try:
        answer = await router.memory_complete("s", "u", 50)
    finally:
        await router.aclose()
    assert answer.fell_back and answer.target_id == "chat"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(text=ENVELOPE, delay=2), ModelTimeoutError),
        (Reply(text="a b c d", disconnect_after=2), MalformedStreamError),
        (busy(429), EndpointBusyError),
    ],
)
async def test_no_fallback_after_timeout_malformed_or_busy(
    model_server, second_server, tracker, reply, error
):
    second_server.push(reply)
    router = Router(settings_for(model_server.base_url, second_server.base_url), tracker=tracker)
    try:
        with pytest.raises(error):
            await router.memory_complete("s", "u", 50, timeout_ms=700)
    finally:
        await router.aclose()
    assert model_server.completions == []


async def test_no_fallback_after_cancellation(model_server, second_server, tracker):
    second_server.push(Reply(text=ENVELOPE, delay=5))
    router = Router(settings_for(model_server.base_url, second_server.base_url), tracker=tracker)
    task = asyncio.create_task(router.memory_complete("s", "u", 50))
    await asyncio.to_thread(second_server.wait_for_requests, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await router.aclose()
    assert model_server.completions == []
    assert tracker.occupancy(router.memory_route.target.endpoint_key) == 0


async def test_fallback_shares_the_first_attempts_deadline(model_server, second_server, tracker):
    # 1 s to fail + 2.5 s to answer: fits a fresh 3 s deadline, not the shared one.
    second_server.push(Reply(status=500, error="boom", delay=1.0))
    model_server.push(Reply(text=ENVELOPE, delay=2.5))
    router = Router(settings_for(model_server.base_url, second_server.base_url), tracker=tracker)
    try:
        with pytest.raises(ModelTimeoutError):
            await router.memory_complete("s", "u", 50, timeout_ms=3000)
    finally:
        await router.aclose()
    assert len(model_server.completions) == 1  # the fallback was tried


async def test_no_fallback_when_memory_already_runs_on_the_chat_target(model_server, tracker):
    model_server.push(Reply(status=400, error="bad request"))
    router = Router(settings_for(model_server.base_url), tracker=tracker)
    try:
        with pytest.raises(ModelHTTPError):
            await router.memory_complete("s", "u", 50)
    finally:
        await router.aclose()
    assert len(model_server.completions) == 1


async def test_fallback_failure_raises_the_second_error(second_server, tracker):
    dead_chat = f"http://127.0.0.1:{free_port()}/v1"
    second_server.push(Reply(status=500, error="boom"))
    router = Router(settings_for(dead_chat, second_server.base_url), tracker=tracker)
    try:
        with pytest.raises(ModelConnectionError):
            await router.memory_complete("s", "u", 50)
    finally:
        await router.aclose()


def test_only_the_embedded_model_is_chosen_without_the_user_and_it_is_flagged():
    implicit = resolve_routes(Settings(), embedded_installed=True)
    assert implicit.chat is not None and implicit.chat.target.id == "embedded"
    assert implicit.implicit_chat is True and implicit.memory is None
    configured = Settings.model_validate(
        {"targets": [{"id": "lab", "runtime": "vllm", "url": "http://h:1"}]}
    )
    table = resolve_routes(configured, embedded_installed=True)
    assert table.chat is None and not table.implicit_chat  # a target but no chat: none
    chosen = Settings.model_validate({"chat": {"target": "embedded"}})
    assert resolve_routes(chosen, embedded_installed=True).implicit_chat is False
    assert resolve_routes(Settings(), embedded_installed=False).chat is None
