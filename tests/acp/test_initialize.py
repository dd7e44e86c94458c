"""ACP ``initialize``: protocol version, honest capabilities, ``agentInfo``."""

from __future__ import annotations

import pytest

from tests.support.acp_client import acp_agent

pytestmark = pytest.mark.slow


async def test_initialize_answers_version_1_with_honest_capabilities_and_agent_info():
    async with acp_agent() as (conn, _client, _proc):
        init = await conn.initialize(protocol_version=1)
        data = init.model_dump(by_alias=True, exclude_none=True)
    assert data["protocolVersion"] == 1
    caps = data["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
    assert set(caps["sessionCapabilities"]) >= {"list", "resume", "close", "delete"}
    assert caps["auth"] == {"logout": {}}
    assert caps["_meta"]["clio/board"]["method"] == "_clio/session/board"
    assert data["agentInfo"]["name"] == "clio-acp"
    assert data["authMethods"] == []


async def test_a_newer_client_protocol_version_gets_version_1():
    async with acp_agent() as (conn, _client, _proc):
        init = await conn.initialize(protocol_version=7)
    assert init.protocol_version == 1
