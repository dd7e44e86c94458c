"""Shared helpers of the ACP face suites: a workspace folder, a client with every tool
capability, and the first two requests of a session (SDK client or raw wire).

Tests that are not about the process share one ``clio-acp acp`` per configuration
and test process (an xdist worker runs several modules): ``agent`` is the agent of
the module's ``agent_settings`` and ``agent_capabilities`` (written before it starts
and given at ``initialize``: a settings change would be a live reload), with its
recording client and its scripted model server reset for the test; each test opens
its own sessions (``session/new`` in its own workspace), and the sessions it leaves
are closed after it. Such a module marks its tests
``pytest.mark.asyncio(loop_scope="session")`` (the agent lives on the session's event
loop; ``agent`` fails a test on another loop); its ``model_server`` and
data/state/config folders are the agent's.

Raw-wire tests that are not about the process share ``raw_wire``: one initialized
agent (no client capabilities, memory off) with its own folders and scripted model
server (``raw_wire.model``, reset per test); each test opens its own sessions
(``raw_wire.new_session``, closed after it) and prefixes its request ids with its node
id (``raw_wire.rid``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp import RequestError
from acp.schema import ClientCapabilities, FileSystemCapabilities

from clio_acp.acp.errors import RESOURCE_NOT_FOUND
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


# -- one agent per configuration ----------------------------------------------------


@dataclass
class SharedAgent:
    """A shared agent: the SDK connection, its recording client, the process, its
    data/state/config/cache folders and the scripted model server its settings name."""

    conn: Any
    client: RecordingClient
    proc: asyncio.subprocess.Process
    home: dict[str, Path]
    model: ScriptedModelServer

    async def new_session(self, cwd: Path, **kwargs: Any) -> Any:
        """``session/new`` in ``cwd`` (no MCP servers unless given)."""
        kwargs.setdefault("mcp_servers", [])
        return await self.conn.new_session(cwd=str(cwd), **kwargs)


class AgentPool:
    """This process's shared agents, one per (settings, client capabilities): those
    fix the agent for good (settings are read at start and reloaded by a watcher,
    capabilities are given at ``initialize``), so modules that agree on them share
    one. Everything is stopped by ``aclose``."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._stack = contextlib.AsyncExitStack()
        self._agents: dict[str, SharedAgent] = {}

    async def get(self, settings: dict[str, Any], capabilities: ClientCapabilities) -> SharedAgent:
        key = json.dumps(
            [settings, capabilities.model_dump(mode="json", by_alias=True)], sort_keys=True
        )
        if key not in self._agents:
            self._agents[key] = await self._start(settings, capabilities)
        return self._agents[key]

    async def _start(
        self, settings: dict[str, Any], capabilities: ClientCapabilities
    ) -> SharedAgent:
        home = make_home(self._tmp.mktemp("agent-home"))
        model = self._stack.enter_context(running_server())
        model.install_settings(home["config"], **settings)
        env = {f"CLIO_ACP_{name.upper()}_DIR": str(path) for name, path in home.items()}
        conn, client, proc = await self._stack.enter_async_context(acp_agent(env=env))
        await conn.initialize(protocol_version=1, client_capabilities=capabilities)
        return SharedAgent(conn, client, proc, home, model)

    async def aclose(self) -> None:
        await self._stack.aclose()


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
def agent_settings() -> dict[str, Any]:
    """``install_settings`` arguments for the shared agent; override per module."""
    return {"memory": False}


@pytest.fixture(scope="module")
def agent_capabilities() -> ClientCapabilities:
    """The client capabilities the shared agent is initialized with; override per
    module (they fix whether tools run in the client, for every session)."""
    return ClientCapabilities()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def agent_pool(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AgentPool]:
    pool = AgentPool(tmp_path_factory)
    yield pool
    await pool.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def shared_agent(
    agent_pool: AgentPool,
    agent_settings: dict[str, Any],
    agent_capabilities: ClientCapabilities,
) -> SharedAgent:
    """The agent of the module's settings and capabilities, shared with every other
    module of this process that has the same."""
    return await agent_pool.get(agent_settings, agent_capabilities)


@pytest.fixture(scope="module")
def agent_home(shared_agent: SharedAgent) -> dict[str, Path]:
    """The shared agent's data/state/config/cache folders."""
    return shared_agent.home


@pytest.fixture(scope="module")
def shared_model(shared_agent: SharedAgent) -> ScriptedModelServer:
    """The scripted model server the shared agent's settings name."""
    return shared_agent.model


@pytest_asyncio.fixture(loop_scope="session")
async def agent(
    shared_agent: SharedAgent, model_server: ScriptedModelServer, request: pytest.FixtureRequest
):
    """The shared agent for one test (``model_server`` is its model server, reset)."""
    marker = request.node.get_closest_marker("asyncio")
    if marker is None or marker.kwargs.get("loop_scope") != "session":
        pytest.fail(
            f"{request.node.nodeid} uses a shared agent: mark it "
            'pytest.mark.asyncio(loop_scope="session")'
        )
    assert shared_agent.proc.returncode is None, "an earlier test on this shared agent ended it"
    _fresh_client(shared_agent.client)
    yield shared_agent
    await _close_sessions(shared_agent)


async def _close_sessions(agent: SharedAgent) -> None:
    """``session/close`` for every session the test heard of (ends running turns); one
    the test closed itself is "not found". Any other error fails the test's teardown:
    the session would stay open for the tests after it."""
    if agent.proc.returncode is not None:
        return
    seen = {p.get("sessionId") for p in agent.client.raw_updates} - {None}
    seen |= {r["sessionId"] for r in agent.client.permission_requests}
    for sid in sorted(seen):
        try:
            await agent.conn.close_session(session_id=sid)
        except RequestError as error:
            if error.code != RESOURCE_NOT_FOUND:
                raise


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


# -- one agent on the raw wire --------------------------------------------------------


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def raw_agent(tmp_path_factory) -> AsyncIterator[tuple[RawPeer, ScriptedModelServer]]:
    """One initialized agent on the raw wire (no client capabilities, memory off) for the
    wire tests of this test process, in folders of its own, with the scripted model
    server its settings name."""
    home = make_home(tmp_path_factory.mktemp("raw-agent-home"))
    with running_server() as model:
        model.install_settings(home["config"], memory=False)
        env = {f"CLIO_ACP_{name.upper()}_DIR": str(path) for name, path in home.items()}
        peer = await RawPeer.start(env=env)
        try:
            await peer.send(req("raw-init", "initialize", {"protocolVersion": 1}))
            await peer.recv_until(lambda m: m.get("id") == "raw-init")
            yield peer, model
        finally:
            await peer.close()


@dataclass
class Wire:
    """The raw agent for one test: its model server (reset) and the test's name, which
    prefixes the test's request ids (``rid``); sessions it opened are closed after it."""

    peer: RawPeer
    model: ScriptedModelServer
    tag: str
    opened: list[str] = field(default_factory=list)

    def rid(self, name: str) -> str:
        return f"{self.tag}-{name}"

    async def new_session(self, cwd: Path) -> str:
        await self.peer.send(
            req(self.rid("new"), "session/new", {"cwd": str(cwd), "mcpServers": []})
        )
        new, _ = await self.peer.recv_until(lambda m: m.get("id") == self.rid("new"))
        self.opened.append(new["result"]["sessionId"])
        return self.opened[-1]

    def chunk_in(self, sid: str):
        """A predicate: an ``agent_message_chunk`` update of session ``sid``."""

        def chunk(m: dict) -> bool:
            params = m.get("params", {})
            return (
                params.get("sessionId") == sid
                and params.get("update", {}).get("sessionUpdate") == "agent_message_chunk"
            )

        return chunk


@pytest_asyncio.fixture(loop_scope="session")
async def raw_wire(raw_agent, request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    peer, model = raw_agent
    _fresh_model(model)
    wire = Wire(peer, model, request.node.nodeid)
    yield wire
    for sid in wire.opened:
        await peer.send(req(wire.rid(f"close-{sid}"), "session/close", {"sessionId": sid}))
        await peer.recv_until(lambda m, sid=sid: m.get("id") == wire.rid(f"close-{sid}"))
