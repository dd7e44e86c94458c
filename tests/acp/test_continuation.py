"""Continuation replay through ``clio-acp acp`` (issue 19 item 2, done-when): the scripted
server sees the reasoning payload on the next request to the same model, and none
after ``session/set_config_option`` switches the model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from acp import text_block
from acp.schema import ClientCapabilities

from tests.support.acp_client import acp_agent
from tests.support.model_server import Reply

pytestmark = pytest.mark.slow

CHAIN = "the user wants 2+2; that is 4 (chain 91c2)"


def _settings(model_server, *, replay: bool = True) -> None:
    config = Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    flag = "" if replay else "    continuationReplay: false\n"
    (config / "settings.yaml").write_text(
        "version: 2\ntargets:\n"
        f"  - id: first\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        f"    defaultModel: model-a\n{flag}"
        f"  - id: second\n    runtime: llamacpp\n    url: {model_server.base_url}\n"
        "    defaultModel: model-b\n"
        "chat:\n  target: first\n  model: model-a\n"
        "context:\n  memory:\n    enabled: false\n"
    )


async def _three_turns(model_server, workspace: Path) -> list[dict]:
    model_server.push(
        Reply(reasoning=CHAIN, text="4"), Reply(text="still model a"), Reply(text="model b")
    )
    async with acp_agent() as (conn, _client, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("what is 2+2?")])
        await conn.prompt(session_id=sid, prompt=[text_block("sure?")])
        await conn.set_config_option(config_id="model", session_id=sid, value="second/model-b")
        await conn.prompt(session_id=sid, prompt=[text_block("and you?")])
    return model_server.bodies


def _assistant(body: dict) -> dict:
    return next(m for m in body["messages"] if m["role"] == "assistant")


async def test_reasoning_goes_back_to_the_same_model_and_not_after_set_config_option(
    model_server, tmp_path
):
    _settings(model_server)
    bodies = await _three_turns(model_server, tmp_path)
    assert [b["model"] for b in bodies] == ["model-a", "model-a", "model-b"]
    assert _assistant(bodies[1])["reasoning_content"] == CHAIN
    assert CHAIN not in json.dumps(bodies[2])
    assert _assistant(bodies[2]) == {"role": "assistant", "content": "4"}


async def test_continuation_replay_false_never_sends_the_payload(model_server, tmp_path):
    _settings(model_server, replay=False)
    bodies = await _three_turns(model_server, tmp_path)
    assert not any(CHAIN in json.dumps(b) for b in bodies)
