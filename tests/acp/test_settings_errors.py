"""An unusable settings file reaches the ACP client (issue 20 item 5): a visible
notice after ``session/new`` (and on the next prompt of a session not yet told), once
per session and problem; the agent serves on the last good settings."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.acp_client import RawPeer

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def _text(update: dict) -> str:
    inner = update.get("params", {}).get("update", {})
    content = inner.get("content") or {}
    return str(content.get("text") or inner.get("description") or "")


def _is_commands(message: dict) -> bool:
    update = message.get("params", {}).get("update", {})
    return update.get("sessionUpdate") == "available_commands_update"


async def _new_session(peer: RawPeer, cwd: Path, rid: int) -> tuple[str, list[dict]]:
    """``session/new``; returns the id and the messages up to its commands update."""
    await peer.send(
        {"jsonrpc": "2.0", "id": rid, "method": "session/new",
         "params": {"cwd": str(cwd), "mcpServers": []}}
    )  # fmt: skip
    answer, before = await peer.recv_until(lambda m: m.get("id") == rid)
    _, seen = await peer.recv_until(_is_commands)
    return answer["result"]["sessionId"], before + seen


async def test_a_broken_settings_file_is_a_visible_notice_once_per_session(tmp_path):
    settings = Path(os.environ["CLIO_ACP_CONFIG_DIR"]) / "settings.yaml"
    settings.write_text("chat:\n  targte: lab\n", encoding="utf-8")
    peer = await RawPeer.start()
    try:
        await peer.send(INIT)
        await peer.recv_until(lambda m: m.get("id") == 1)
        first, _ = await _new_session(peer, tmp_path, 2)
        # Queued right after the commands update, which follows the response.
        notice, _ = await peer.recv_until(lambda m: "settings not applied" in _text(m))
        assert notice["params"]["sessionId"] == first
        assert "targte" in _text(notice) and "previous good settings" in _text(notice)
        second, seen = await _new_session(peer, tmp_path, 3)
        notice, _ = await peer.recv_until(lambda m: "settings not applied" in _text(m))
        assert notice["params"]["sessionId"] == second != first  # each session hears of it
        assert not [m for m in seen if "settings not applied" in _text(m)]  # once per session
    finally:
        _, err = await peer.close()
    assert b"Traceback" not in err


async def test_good_settings_send_no_notice(tmp_path):
    peer = await RawPeer.start()
    try:
        await peer.send(INIT)
        await peer.recv_until(lambda m: m.get("id") == 1)
        _, first = await _new_session(peer, tmp_path, 2)
        _, second = await _new_session(peer, tmp_path, 3)
        assert not [m for m in first + second if "settings" in _text(m)]
    finally:
        await peer.close()
