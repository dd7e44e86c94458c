"""Continuation replay through a whole session (issue 19 item 2): the reasoning a model
returned goes back to that model on the next request, never to another model after
``Session.set_model``, survives a load in a new manager, and never reaches a
compaction summary."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clio_acp.paths import resolve_paths
from clio_acp.session.manager import SessionManager
from clio_acp.settings import load_settings
from tests.support.model_server import Reply, ToolCall

CHAIN = "private chain of thought 7f3a"


def _two_targets(model_server, window: int = 32768) -> None:
    config = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.yaml").write_text(
        "version: 2\ntargets:\n"
        f"  - id: first\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        f"    defaultModel: model-a\n    contextWindow: {window}\n"
        f"  - id: second\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-b\n"
        "chat:\n  target: first\n  model: model-a\n"
        "context:\n  memory:\n    enabled: false\n"
    )


def _assistants(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


async def _manager() -> SessionManager:
    settings = load_settings(resolve_paths().settings_file)
    return SessionManager(paths=resolve_paths(), settings=lambda: settings)


async def test_reasoning_returns_to_the_same_model_and_not_after_a_model_switch(
    model_server, workspace
):
    _two_targets(model_server)
    model_server.push(
        Reply(reasoning=CHAIN, tool_calls=[ToolCall("list_dir", "{}", id="c1")]),
        Reply(text="listed"),
        Reply(text="second turn, same model"),
        Reply(text="third turn, other model"),
    )
    manager = await _manager()
    try:
        session = await manager.new_session(workspace)
        await session.prompt("list the folder")
        await session.prompt("again")
        session.set_model("second", "model-b")
        await session.prompt("and now?")
    finally:
        await manager.aclose()
    bodies = model_server.bodies
    assert [b["model"] for b in bodies] == ["model-a", "model-a", "model-a", "model-b"]
    # Next request of the turn (after the tool result) and the next turn: sent back.
    for body in bodies[1:3]:
        assert _assistants(body)[0]["reasoning_content"] == CHAIN
    # After the switch: the ordinary rendering, nothing of the old model's state.
    assert CHAIN not in json.dumps(bodies[3])
    assert all("_continuation" not in json.dumps(b) for b in bodies)


async def test_replay_survives_loading_the_session_in_a_new_manager(model_server, workspace):
    _two_targets(model_server)
    model_server.push(Reply(reasoning=CHAIN, text="first"), Reply(text="after load"))
    manager = await _manager()
    try:
        session = await manager.new_session(workspace)
        await session.prompt("think")
        sid = session.id
    finally:
        await manager.aclose()
    manager = await _manager()
    try:
        loaded, _events = await manager.load_session(sid)
        await loaded.prompt("go on")
    finally:
        await manager.aclose()
    assert _assistants(model_server.bodies[1])[0]["reasoning_content"] == CHAIN


def _is_summary(body: dict) -> bool:
    return not body.get("tools") and "working summary" in body["messages"][0]["content"]


async def test_compaction_summary_request_never_carries_the_reasoning_state(
    model_server, workspace
):
    _two_targets(model_server, window=4096)
    model_server.push(
        Reply(reasoning=CHAIN, text="answered 1", when=lambda b: not _is_summary(b)),
        Reply(text="answered 2", when=lambda b: not _is_summary(b)),
        Reply(text="SUMMARY: one question answered.", when=_is_summary),
    )
    manager = await _manager()
    try:
        session = await manager.new_session(workspace)
        await session.prompt("question one " + "with detail " * 200)
        await session.prompt("question two " + "with detail " * 300)
        await session.compact()
    finally:
        await manager.aclose()
    summaries = [b for b in model_server.bodies if _is_summary(b)]
    assert len(summaries) == 1
    assert "answered 1" in json.dumps(summaries[0])  # the reasoning turn was summarised
    assert CHAIN not in json.dumps(summaries[0])
    rows = [r for r in session.rows() if r.type == "compaction"]
    assert rows and CHAIN not in json.dumps(rows[0].data)
