"""The LLM-tier step's telemetry and usage rows name the route that really ran
(MEMORY_SPEC §5 targetId/modelId and usage rows, §12.9 "Telemetry records which mode
a step used"): the models router's answer (target, model, constrained, fallback) is
carried through the bridge and the policy into the rows."""

from __future__ import annotations

import asyncio
import json

import pytest

from clio_acp.agent.memory_hooks import RouterMemoryClient
from clio_acp.memory.policy import CompletionAnswer, CompletionUsage
from clio_acp.memory.telemetry import parse_step_line
from clio_acp.models.routing import Router
from clio_acp.settings import Settings
from tests.support.model_server import Reply, usage
from tests.test_memory_middleware_llm import REMIND, make, tools


def _usage_rows(tmp_path):
    return [json.loads(line) for line in (tmp_path / "usage.jsonl").read_text().splitlines()]


class TwoAttempts:
    """A memory client whose first attempt (on ``mem``) reported usage before it
    failed over to the chat route (``chat-box``), which answered unconstrained."""

    async def complete(self, system, user, max_tokens, *, abort, on_usage):
        on_usage(CompletionUsage(30, 0, target_id="mem", model_id="small"))
        on_usage(CompletionUsage(100, 20, target_id="chat-box", model_id="big"))
        return CompletionAnswer(
            REMIND,
            CompletionUsage(100, 20, target_id="chat-box", model_id="big"),
            target_id="chat-box",
            model_id="big",
            decoding="free",
        )


async def test_each_attempt_gets_its_own_usage_row_and_the_step_names_the_answering_route(
    tmp_path,
):
    mw, sink = make(
        TwoAttempts(), tmp_path=tmp_path, target="mem", model="small", cadence_tool_calls=2
    )
    mw.turn_start("t1", "fix the parser")
    tools(mw, 2)
    mw.turn_end("t1")
    await mw.evaluate("t1")
    await mw.wait_idle()
    row = sink.rows[-1]
    assert row.tier == "llm" and row.decision == "injected"
    assert (row.target_id, row.model_id, row.decoding) == ("chat-box", "big", "free")
    # The row round-trips through the strict parser with the new key.
    assert parse_step_line(row.to_json()).decoding == "free"
    for _ in range(200):  # usage rows are written off the loop
        if (tmp_path / "usage.jsonl").exists() and len(_usage_rows(tmp_path)) == 2:
            break
        await asyncio.sleep(0.01)
    rows = _usage_rows(tmp_path)
    # Rows are appended off the loop, so their order is not the attempts' order.
    assert sorted((r["target"], r["attributedModelId"], r["usage"]["input"]) for r in rows) == [
        ("chat-box", "big", 100),
        ("mem", "small", 30),
    ]


KINDS = ("status", "knowledge", "procedural")


def test_strict_parser_accepts_decoding_on_llm_rows_only():
    base = {
        "version": 2,
        "at": "2026-11-30T00:00:00.000Z",
        "triggerReasons": ["interval"],
        "tier": "llm",
        "bankDelta": {k: {"added": 0, "updated": 0, "deleted": 0} for k in KINDS},
        "decision": "silent",
        "reason": "model_silent",
        "bankOperations": 0,
        "droppedOperations": 0,
        "citedEntries": 0,
        "tokenCost": {"input": 1, "output": 1, "total": 2},
        "latencyMs": 5,
        "targetId": "t",
        "modelId": "m",
    }
    for mode in ("grammar", "json_schema", "free"):
        assert parse_step_line(json.dumps({**base, "decoding": mode})).decoding == mode
    with pytest.raises(ValueError):
        parse_step_line(json.dumps({**base, "decoding": "beam"}))
    with pytest.raises(ValueError):
        parse_step_line(json.dumps({**base, "tier": "rules", "decoding": "grammar"}))


async def test_router_client_carries_target_model_and_grammar_mode(model_server):
    settings = Settings.model_validate(
        {
            "targets": [{"id": "box", "runtime": "llamacpp", "url": model_server.base_url}],
            "chat": {"target": "box", "model": "big"},
            "context": {"memory": {"target": "box", "model": "small"}},
        }
    )
    model_server.push(Reply(text=REMIND, usage=usage(40, 9)))
    router = Router(settings)
    reports = []
    try:
        answer = await RouterMemoryClient(router).complete(
            "sys", "user", 100, abort=None, on_usage=reports.append
        )
    finally:
        await router.aclose()
    assert (answer.target_id, answer.model_id, answer.decoding) == ("box", "small", "grammar")
    assert [(u.target_id, u.model_id, u.input_tokens) for u in reports] == [("box", "small", 40)]
