"""The LSP byte stream (issue 16 item 5), over a real ``clio-acp lsp`` subprocess:
an unparseable body is answered ``-32700`` with ``id: null`` and logged, never shown
as a ``window/showMessage`` popup, and the server goes on; a header line or a
``Content-Length`` over the limits gets a clear error and the connection is closed
(the server exits instead of buffering whatever follows)."""

from __future__ import annotations

import pytest

from clio_acp.lsp.stdio import MAX_BODY_BYTES, MAX_HEADER_LINE_BYTES
from tests.support.hostile import WirePeer, lsp_message, probe, start_peer, wire_env
from tests.support.waiting import wait_until_sync


@pytest.fixture
def peer(tmp_path):
    """A server of its own: the test may close the connection."""
    server = start_peer("lsp", tmp_path)
    yield server
    server.close()


@pytest.fixture(scope="module")
def live_peer(tmp_path_factory):
    """One server for the tests that leave the connection open (each asserts it still
    answers, so a test that broke it fails itself, not only the next one)."""
    server = start_peer("lsp", tmp_path_factory.mktemp("live-peer"))
    yield server
    server.close()


def _null_id_errors(peer) -> list[dict]:
    return [m for m in peer.messages if isinstance(m, dict) and "error" in m and m["id"] is None]


def _popups(peer) -> list[dict]:
    return [
        m for m in peer.messages if isinstance(m, dict) and m.get("method") == "window/showMessage"
    ]


UNPARSEABLE = [b"{not json", b"\xff\xfe\x00garbage", b"[" * 100_000]
"""Bodies that are not JSON: bad syntax, not UTF-8, nested past the parser's stack."""


def test_unparseable_bodies_are_parse_errors_with_null_id_and_no_popup(live_peer):
    # One server for the three: the reader judges each body on its own, and a body that
    # ended the server would fail the next probe.
    peer = live_peer
    before = len(_null_id_errors(peer))
    for n, body in enumerate(UNPARSEABLE, 1):
        assert peer.send(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        wait_until_sync(lambda n=n: len(_null_id_errors(peer)) >= before + n, timeout_s=30)
        errors = _null_id_errors(peer)
        assert len(errors) == before + n and errors[-1]["error"]["code"] == -32700, body[:20]
        assert probe(peer, f"after-bad-body-{n}"), body[:20]  # the session goes on
    assert _popups(peer) == []


def test_overlong_header_line_closes_the_connection_with_a_clear_error(peer):
    assert peer.send(b"X-Junk: " + b"a" * (MAX_HEADER_LINE_BYTES + 10) + b"\r\n")
    peer.proc.wait(timeout=30)
    (error,) = _null_id_errors(peer)
    assert "header line longer than" in error["error"]["message"]
    assert _popups(peer) == []


def test_huge_content_length_closes_the_connection_instead_of_buffering(peer):
    assert peer.send(b"Content-Length: %d\r\n\r\n{" % (10**12))
    peer.proc.wait(timeout=30)
    (error,) = _null_id_errors(peer)
    assert f"over the limit of {MAX_BODY_BYTES} bytes" in error["error"]["message"]


def test_a_well_formed_message_still_works_after_the_limits(live_peer):
    big = {"jsonrpc": "2.0", "id": "big", "method": "x/unknown", "params": {"t": "y" * 100_000}}
    assert live_peer.send(lsp_message(big))
    assert live_peer.wait_for({"big"}, 30) == set()


@pytest.mark.parametrize(
    "reply",
    [{"result": None}, {"error": "not an error object"}],
    ids=["null", "bad-error"],
)
def test_a_mistyped_reply_to_the_configuration_pull_settles_it_at_once(tmp_path, reply):
    # Regression: pygls could not structure such a reply, so the pull (and every command
    # waiting for the initial configuration) hung until its 10 s timeout, after which
    # the server sent $/cancelRequest for it.
    peer = WirePeer("lsp", wire_env(tmp_path), tmp_path / "lsp-stderr.log")
    try:
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "processId": None, "rootUri": None,
            "capabilities": {"workspace": {"configuration": True}}}}  # fmt: skip
        peer.send(lsp_message(init))
        assert peer.wait_for({"init"}, 60) == set()
        peer.send(lsp_message({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        pull = peer.wait_for_request("workspace/configuration", 60)
        assert pull is not None
        peer.send(lsp_message({"jsonrpc": "2.0", "id": pull["id"], **reply}))
        usage = {"jsonrpc": "2.0", "id": "usage", "method": "workspace/executeCommand",
                 "params": {"command": "clio.usage", "arguments": []}}  # fmt: skip
        peer.send(lsp_message(usage))
        assert peer.wait_for({"usage"}, 60) == set()
        methods = [m.get("method") for m in peer.messages if isinstance(m, dict)]
        assert "$/cancelRequest" not in methods
        (answer,) = [m for m in peer.messages if isinstance(m, dict) and m.get("id") == "usage"]
        assert "result" in answer
    finally:
        peer.close()
