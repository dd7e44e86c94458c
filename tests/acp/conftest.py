"""Shared helpers of the ACP face suites: a workspace folder, a client with every tool
capability, and the first two requests of a session (SDK client or raw wire)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp.schema import ClientCapabilities, FileSystemCapabilities

from tests.support.acp_client import RawPeer, RecordingClient

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
