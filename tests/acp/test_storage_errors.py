"""An unusable state folder is a plain-worded ACP error, not -32603 with SQLite's text."""

from __future__ import annotations

from tests.support.acp_client import RawPeer

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}  # fmt: skip


async def test_state_folder_that_is_a_file_gives_a_clear_error(tmp_path) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    peer = await RawPeer.start(env={"CLIO_ACP_STATE_DIR": str(blocker / "state")})
    try:
        await peer.send(INIT)
        await peer.recv()
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                         "params": {"cwd": str(tmp_path), "mcpServers": []}})  # fmt: skip
        reply = await peer.recv()
        assert reply["id"] == 2 and reply["error"]["code"] == -32000
        assert reply["error"]["message"].startswith("cannot use the state folder")
        assert reply["error"]["data"] == {"reason": "cannot-open"}
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}})
        assert (await peer.recv())["id"] == 3  # the agent goes on answering
    finally:
        await peer.close()
