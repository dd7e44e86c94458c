"""Raw-wire behaviour of ``clio-acp acp``: malformed frames, files as stdio, stdout
protection, ``$/cancel_request`` (issue 7 items 1 and 8).

The malformed lines go to one agent (a line that ended it would fail the next
request); well-formed requests the agent must refuse go to the test process's shared
raw-wire agent (``raw_wire``, tests/acp/conftest.py), each test with its own ids."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from acp.connection import Connection
from acp.router import MessageRouter, Route

from clio_acp.acp.requests import RequestTracker
from clio_acp.acp.server import REQUEST_CANCELLED
from clio_acp.acp.transport import LineTransport, scrub_surrogates
from tests.acp.conftest import Wire, init_new
from tests.conftest import subprocess_env
from tests.support.acp_client import RawPeer
from tests.support.model_server import Reply

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


MALFORMED = [
    ("this is not json", -32700),
    ('{"jsonrpc": "2.0", "id": 7, "method": "initialize"', -32700),
    ("[1, 2, 3]", -32600),
    ("42", -32600),
    ('"initialize"', -32600),
    ("null", -32600),
    ('{"jsonrpc": "2.0", "id": {"x": 1}, "method": "initialize"}', -32600),
    ('{"jsonrpc": "2.0", "id": 9, "method": 5}', -32600),
    ('{"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": 3}', -32600),
    ('{"jsonrpc": "2.0"}', -32600),
]
"""Lines the transport refuses, with the error code of their reply."""


async def test_malformed_lines_get_error_replies_and_the_agent_keeps_serving():
    # One agent for all of them: the transport's read loop judges each line on its own
    # (no state), and a line that ended the process would fail at the next request;
    # the first line still meets an agent that was never initialized.
    peer = await RawPeer.start()
    try:
        for n, (line, code) in enumerate(MALFORMED):
            await peer.send_line(line)
            reply = await peer.recv()
            assert reply["error"]["code"] == code, line
            assert reply["error"]["data"]["details"], line
            await peer.send({**INIT, "id": f"after-{n}"})
            answer = await peer.recv()
            assert answer["id"] == f"after-{n}", line
            assert answer["result"]["protocolVersion"] == 1, line
    finally:
        _, err = await peer.close()
    assert peer.proc.returncode == 0, err.decode()


@pytest.fixture
def wire(raw_wire: Wire) -> RawPeer:
    """The test process's initialized raw-wire agent (``raw_wire``, tests/acp/conftest.py;
    in folders of its own). These tests use request ids of their own."""
    return raw_wire.peer


async def _ask(peer: RawPeer, rid: str, method: str, params: Any) -> dict:
    await peer.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    reply, _ = await peer.recv_until(lambda m: m.get("id") == rid)
    return reply


@pytest.mark.asyncio(loop_scope="session")
async def test_unknown_method_is_method_not_found_not_a_fake_success(wire):
    reply = await _ask(wire, "unknown-1", "session/set_model", {})
    assert reply["error"]["code"] == -32601
    assert (await _ask(wire, "unknown-2", "_unknown/ext", {}))["error"]["code"] == -32601


@pytest.mark.asyncio(loop_scope="session")
async def test_blank_lines_and_unknown_fields_are_tolerated(wire):
    await wire.send_line("")
    await wire.send_line("   ")
    params = {"protocolVersion": 1, "clientInfo": None, "futureField": {"a": 1}}
    answer = await _ask(wire, "blank-1", "initialize", params)
    assert answer["result"]["agentInfo"]["name"] == "clio-acp"


def test_regular_files_work_as_stdin_and_stdout(tmp_path):
    requests = tmp_path / "in.jsonl"
    replies = tmp_path / "out.jsonl"
    requests.write_text(
        "garbage\n"
        + json.dumps(INIT)
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "logout", "params": {}})
        + "\n"
    )
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        proc = subprocess.run(
            [sys.executable, "-m", "clio_acp", "acp"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    lines = [json.loads(line) for line in replies.read_text().splitlines()]
    by_id = {m.get("id"): m for m in lines}
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[1]["result"]["protocolVersion"] == 1
    assert by_id[2]["result"] == {}


def test_stray_output_of_the_process_and_its_children_goes_to_stderr(tmp_path):
    """fd-level protection: after protect_stdio, fd 1 is stderr for everyone."""
    script = (
        "import os, subprocess, sys\n"
        "from clio_acp.acp.transport import protect_stdio\n"
        "fds = protect_stdio()\n"
        "print('STRAY-PRINT')\n"
        "os.write(1, b'STRAY-FD1\\n')\n"
        "subprocess.run(['sh', '-c', 'echo STRAY-CHILD; cat'], check=True)\n"
        "os.write(fds.write_fd, b'{\"ok\": true}\\n')\n"
        "data = os.read(fds.read_fd, 100)\n"
        "os.write(fds.write_fd, data)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        input=b'{"echo": 1}\n',
        capture_output=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().splitlines() == ['{"ok": true}', '{"echo": 1}']
    for marker in ("STRAY-PRINT", "STRAY-FD1", "STRAY-CHILD"):
        assert marker in proc.stderr.decode()


async def _pipe_pair() -> tuple[LineTransport, int, int]:
    c2a_r, c2a_w = os.pipe()
    a2c_r, a2c_w = os.pipe()
    transport = LineTransport(c2a_r, a2c_w)
    await transport.start()
    return transport, c2a_w, a2c_r


_buffers: dict[int, bytearray] = {}


async def _read_json(fd: int) -> dict:
    buf = _buffers.setdefault(fd, bytearray())
    while b"\n" not in buf:
        chunk = await asyncio.to_thread(os.read, fd, 65536)
        assert chunk, "eof"
        buf.extend(chunk)
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


async def test_cancel_request_answers_the_cancelled_request_with_minus_32800():
    """Pins the SDK seam we rely on: each handler task sees its own request id."""
    tracker = RequestTracker()
    started = asyncio.Event()

    async def slow(params):
        started.set()
        await asyncio.Event().wait()  # runs until cancelled
        return {"late": True}

    async def quick(params):
        return {"quick": params}

    router = MessageRouter()
    router.add_route(Route(method="test/slow", func=tracker.track(slow), kind="request"))
    router.add_route(Route(method="test/quick", func=tracker.track(quick), kind="request"))

    async def cancel(params):
        from acp.schema import CancelRequestNotification

        await tracker.cancel(CancelRequestNotification.model_validate(params).request_id)

    router.add_route(Route(method="$/cancel_request", func=cancel, kind="notification"))
    transport, to_agent, from_agent = await _pipe_pair()
    conn = Connection(router, transport)
    try:
        os.write(to_agent, b'{"jsonrpc":"2.0","id":"s1","method":"test/slow","params":{}}\n')
        await asyncio.wait_for(started.wait(), 10)
        os.write(to_agent, b'{"jsonrpc":"2.0","id":2,"method":"test/quick","params":{"a":1}}\n')
        assert (await _read_json(from_agent))["result"] == {"quick": {"a": 1}}
        os.write(
            to_agent, b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"s1"}}\n'
        )
        reply = await asyncio.wait_for(_read_json(from_agent), 10)
        assert reply["id"] == "s1"
        assert reply["error"]["code"] == REQUEST_CANCELLED
        # the connection still serves
        os.write(to_agent, b'{"jsonrpc":"2.0","id":3,"method":"test/quick","params":{}}\n')
        assert (await _read_json(from_agent))["id"] == 3
    finally:
        await conn.close()
        for fd in (to_agent, from_agent):
            os.close(fd)


async def test_after_response_callback_runs_after_the_response_is_written():
    order: list[str] = []
    transport, to_agent, from_agent = await _pipe_pair()

    async def handler(method, params, is_notification):
        from clio_acp.acp.transport import CURRENT_REQUEST_ID

        async def later():
            order.append("callback")
            await transport.send({"jsonrpc": "2.0", "method": "after", "params": {}})

        transport.after_response(CURRENT_REQUEST_ID.get(), later)
        for _ in range(20):  # give a wrongly scheduled callback the chance to run
            await asyncio.sleep(0)
        order.append("handler")
        return {"done": True}

    conn = Connection(handler, transport)
    try:
        os.write(to_agent, b'{"jsonrpc":"2.0","id":1,"method":"x","params":{}}\n')
        first = await asyncio.wait_for(_read_json(from_agent), 10)
        second = await asyncio.wait_for(_read_json(from_agent), 10)
        assert first["id"] == 1 and first["result"] == {"done": True}
        assert second["method"] == "after"
        assert order == ["handler", "callback"]
    finally:
        await conn.close()
        for fd in (to_agent, from_agent):
            os.close(fd)


@pytest.mark.asyncio(loop_scope="session")
async def test_invalid_frame_with_a_usable_id_is_answered_under_that_id(wire):
    await wire.send_line('{"jsonrpc": "2.0", "id": "req-9", "method": ""}')
    reply, _ = await wire.recv_until(lambda m: m.get("id") == "req-9")
    assert reply["error"]["code"] == -32600
    # ... and the agent goes on (the wire is shared with the module's other tests)
    assert "error" in await _ask(wire, "after-req-9", "no/such/method", {})


@pytest.mark.asyncio(loop_scope="session")
async def test_line_separators_in_a_reply_are_escaped_on_the_wire(wire):
    """Issue 21: U+2028/U+2029 go out as ``\\u2028``/``\\u2029`` (newer Node readline
    splits lines on the raw characters)."""
    start = len(wire.lines)
    reply = await _ask(wire, "separators-1", "session/list", {"cwd": "rel\u2028\u2029"})
    raw = b"".join(wire.lines[start:])
    assert "\u2028".encode() not in raw and "\u2029".encode() not in raw
    assert b"\\u2028" in raw
    assert reply["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("session/new", {"mcpServers": []}, "cwd"),
        ("initialize", {"protocolVersion": 1, "clientCapabilities": 5}, "clientCapabilities"),
        ("session/prompt", {"sessionId": "s", "prompt": "hi"}, "prompt"),
    ],
)
@pytest.mark.asyncio(loop_scope="session")
async def test_bad_params_are_minus_32602_naming_the_field(wire, method, params, field):
    """Issue 21: a missing or mis-typed field is ``-32602`` that names it (not -32603)."""
    reply = await _ask(wire, f"bad-{method}", method, params)
    assert reply["error"]["code"] == -32602, reply
    assert field in json.dumps(reply["error"]), reply


async def test_a_lone_surrogate_in_a_first_prompt_is_sanitised_not_an_internal_error(
    model_server, tmp_path
):
    """Issue 21: ``"\\ud800"`` in a prompt (it names the session and reaches the journal
    and the model) becomes U+FFFD on input; the turn runs."""
    model_server.install_settings(memory=False)
    model_server.push(Reply(text="fine"))
    peer = await RawPeer.start()
    try:
        sid, _ = await init_new(peer, tmp_path)
        params = '{"sessionId":"' + sid + '","prompt":[{"type":"text","text":"hi \\ud800 there"}]}'
        frame = '{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":' + params + "}"
        await peer.send_line(frame)
        reply, _ = await peer.recv_until(lambda m: m.get("id") == "p")
    finally:
        await peer.close()
    assert reply.get("result") == {"stopReason": "end_turn"}, reply
    assert "hi \ufffd there" in json.dumps(model_server.bodies[-1]["messages"], ensure_ascii=False)


def test_scrub_surrogates_keeps_pairs_and_replaces_lone_ones():
    params = json.loads('{"a":"x\\ud800y","b":["\\ud83d\\ude00",{"\\udc00k":[1,"\\udfff"]}]}')
    assert scrub_surrogates(params) == {
        "a": "x\ufffdy",
        "b": ["\U0001f600", {"\ufffdk": [1, "\ufffd"]}],
    }
