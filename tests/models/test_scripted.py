"""The scripted model server itself (tests/support/model_server.py): what other
teams rely on must hold — SSE framing, split tool calls, errors, cuts, recording,
and the standalone mode used beside child processes."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from httpx_sse import connect_sse

from tests.conftest import subprocess_env
from tests.support.model_server import Reply, ToolCall, busy, usage


def _events(server, body):
    with (
        httpx.Client() as client,
        connect_sse(client, "POST", f"{server.base_url}/chat/completions", json=body) as source,
    ):
        return [sse.data for sse in source.iter_sse()]


def test_streamed_reply_carries_reasoning_text_tool_deltas_usage_and_done(model_server):
    model_server.push(
        Reply(
            reasoning="think first",
            text="Hello world",
            tool_calls=[ToolCall("read_file", '{"path": "a/b.py"}', split=5)],
            usage=usage(10, 4, cached=6),
        )
    )
    data = _events(model_server, {"model": "m", "stream": True, "messages": []})
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "think first"
    assert "".join(d.get("content") or "" for d in deltas) == "Hello world"
    pieces = [tc["function"]["arguments"] for d in deltas for tc in d.get("tool_calls", [])]
    assert len(pieces) > 1 and "".join(pieces) == '{"path": "a/b.py"}'
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 6
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_records_request_bodies_and_uses_when_predicates(model_server):
    model_server.push(
        Reply(text="memory", when=lambda b: b.get("max_tokens") == 7), Reply(text="chat")
    )
    with httpx.Client() as client:
        r1 = client.post(f"{model_server.base_url}/chat/completions", json={"messages": []})
        r2 = client.post(
            f"{model_server.base_url}/chat/completions", json={"messages": [], "max_tokens": 7}
        )
    assert r1.json()["choices"][0]["message"]["content"] == "chat"
    assert r2.json()["choices"][0]["message"]["content"] == "memory"
    assert model_server.bodies == [{"messages": []}, {"messages": [], "max_tokens": 7}]


def test_unscripted_request_is_a_loud_500(model_server):
    with httpx.Client() as client:
        r = client.post(f"{model_server.base_url}/chat/completions", json={"messages": []})
    assert r.status_code == 500 and "no reply scripted" in r.text


def test_busy_answer_has_status_and_retry_after(model_server):
    model_server.push(busy(429, retry_after="2"))
    with httpx.Client() as client:
        r = client.post(f"{model_server.base_url}/chat/completions", json={"stream": True})
    assert r.status_code == 429 and r.headers["retry-after"] == "2"


def test_disconnect_mid_stream_breaks_the_chunked_body(model_server):
    model_server.push(Reply(text="a b c d e f", disconnect_after=3))
    with pytest.raises(httpx.RemoteProtocolError):
        _events(model_server, {"stream": True})


def test_missing_done_ends_cleanly_without_the_marker(model_server):
    model_server.push(Reply(text="a b", done=False))
    data = _events(model_server, {"stream": True})
    assert data and "[DONE]" not in data


def test_standalone_mode_prints_url_serves_script_and_records(tmp_path):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([{"text": "from a file"}]))
    record = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.model_server",
            "--script",
            str(script),
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        base = proc.stdout.readline().strip()
        r = httpx.post(f"{base}/chat/completions", json={"messages": [{"role": "user"}]})
        assert r.json()["choices"][0]["message"]["content"] == "from a file"
        assert (
            json.loads(record.read_text().splitlines()[0])["body"]["messages"][0]["role"] == "user"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_install_settings_writes_a_loadable_settings_file(model_server, isolated_dirs):
    from clio_acp.settings import load_settings

    path = model_server.install_settings()
    assert path == isolated_dirs["config"] / "settings.yaml"
    settings = load_settings(path)
    assert settings.chat.target == "scripted"
    assert settings.context.memory.target == "scripted"
