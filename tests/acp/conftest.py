"""Shared helpers of the ACP face suites: a workspace folder, a client with every tool
capability, and the first two requests of a session (SDK client or raw wire).

Tests that are not about the process share one ``clio-acp acp`` per module: ``agent``
is that agent (already initialized with the module's ``agent_capabilities``) with its
recording client and the module's scripted model server reset for the test; each test
opens its own sessions (``session/new`` in its own workspace), and the sessions it
leaves are closed after it. The agent's settings are the module's
(``agent_settings``, written before it starts: a settings change would be a live
reload). Such a module marks its tests ``pytest.mark.asyncio(loop_scope="module")``;
its ``model_server`` and data/state/config folders are the agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp.schema import ClientCapabilities, FileSystemCapabilities

from tests.conftest import make_home
from tests.support.acp_client import RawPeer, RecordingClient, acp_agent
from tests.support.model_server import DEFAULT_MODEL, ScriptedModelServer, running_server

ALL_TOOLS = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)
"""A client that offers ``fs/read_text_file``, ``fs/write_text_file`` and terminals."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


async def start_session(conn: Any, ws: Path, caps: ClientCapabilities | None = None) -> Any:
    """``initialize`` then ``session/new`` in ``ws`` through the SDK client."""
    await conn.initialize(protocol_version=1, client_capabilities=caps or ClientCapabilities())
    return await conn.new_session(cwd=str(ws), mcp_servers=[])


def texts_of(client: RecordingClient, kind: str, sid: str) -> str:
    """The concatenated text of the ``kind`` updates the client received for ``sid``."""
    return "".join(u["content"]["text"] for u in client.updates(kind, sid))


def req(rid: Any, method: str, params: Any) -> dict[str, Any]:
    """A raw JSON-RPC request."""
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def init_new(peer: RawPeer, cwd: Any) -> tuple[str, list[dict]]:
    """Raw ``initialize`` + ``session/new``: the session id and what came before the
    ``session/new`` answer."""
    await peer.send(req(1, "initialize", {"protocolVersion": 1}))
    await peer.recv_until(lambda m: m.get("id") == 1)
    await peer.send(req(2, "session/new", {"cwd": str(cwd), "mcpServers": []}))
    new, before = await peer.recv_until(lambda m: m.get("id") == 2)
    return new["result"]["sessionId"], before


# -- one agent per module ------------------------------------------------------------


@dataclass
class SharedAgent:
    """The module's agent: the SDK connection, its recording client, the process."""

    conn: Any
    client: RecordingClient
    proc: asyncio.subprocess.Process

    async def new_session(self, cwd: Path, **kwargs: Any) -> Any:
        """``session/new`` in ``cwd`` (no MCP servers unless given)."""
        kwargs.setdefault("mcp_servers", [])
        return await self.conn.new_session(cwd=str(cwd), **kwargs)


def _fresh_client(client: RecordingClient) -> None:
    """What a new ``RecordingClient`` would hold (the same object: the connection
    keeps it)."""
    for name, value in vars(RecordingClient()).items():
        setattr(client, name, value)


def _fresh_model(server: ScriptedModelServer) -> None:
    """No script, no records, the default model list (as a new server would be)."""
    server.script([])
    with server._lock:
        server.requests.clear()
    server.responder = None
    server.default = None
    server.models = [DEFAULT_MODEL]
    server.model_meta = {}
    server.props = None
    server.slots = None


@pytest.fixture(scope="module")
def agent_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The shared agent's data/state/config/cache folders."""
    return make_home(tmp_path_factory.mktemp("agent-home"))


@pytest.fixture(scope="module")
def agent_settings() -> dict[str, Any]:
    """``install_settings`` arguments for the shared agent; override per module."""
    return {"memory": False}


@pytest.fixture(scope="module")
def agent_capabilities() -> ClientCapabilities:
    """The client capabilities the shared agent is initialized with; override per
    module (they fix whether tools run in the client, for every session)."""
    return ClientCapabilities()


@pytest.fixture(scope="module")
def shared_model(
    agent_home: dict[str, Path], agent_settings: dict[str, Any]
) -> Iterator[ScriptedModelServer]:
    with running_server() as server:
        server.install_settings(agent_home["config"], **agent_settings)
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_agent(
    agent_home: dict[str, Path],
    shared_model: ScriptedModelServer,
    agent_capabilities: ClientCapabilities,
) -> AsyncIterator[SharedAgent]:
    env = {f"CLIO_ACP_{name.upper()}_DIR": str(path) for name, path in agent_home.items()}
    async with acp_agent(env=env) as (conn, client, proc):
        await conn.initialize(protocol_version=1, client_capabilities=agent_capabilities)
        yield SharedAgent(conn, client, proc)


@pytest_asyncio.fixture(loop_scope="module")
async def agent(shared_agent: SharedAgent, model_server: ScriptedModelServer):
    """The module's agent for one test (``model_server`` is the module's, reset)."""
    assert shared_agent.proc.returncode is None, "an earlier test of this module ended the agent"
    _fresh_client(shared_agent.client)
    yield shared_agent
    await _close_sessions(shared_agent)


async def _close_sessions(agent: SharedAgent) -> None:
    """``session/close`` for every session the test heard of (ends running turns)."""
    if agent.proc.returncode is not None:
        return
    seen = {p.get("sessionId") for p in agent.client.raw_updates} - {None}
    seen |= {r["sessionId"] for r in agent.client.permission_requests}
    for sid in sorted(seen):
        with contextlib.suppress(Exception):
            await agent.conn.close_session(session_id=sid)


@pytest.fixture
def model_server(model_server: ScriptedModelServer, request: pytest.FixtureRequest):
    """On the shared agent: the module's model server, its script and records reset."""
    if "shared_agent" not in request.fixturenames:
        return model_server
    shared = request.getfixturevalue("shared_model")
    _fresh_model(shared)
    return shared


@pytest.fixture(autouse=True)
def isolated_dirs(isolated_dirs, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A test on the shared agent uses the agent's folders."""
    if "shared_agent" not in request.fixturenames:
        return isolated_dirs
    home = request.getfixturevalue("agent_home")
    for name, path in home.items():
        monkeypatch.setenv(f"CLIO_ACP_{name.upper()}_DIR", str(path))
    return home
