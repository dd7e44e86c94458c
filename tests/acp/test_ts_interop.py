"""``clio-acp acp`` driven by the official TypeScript SDK (``@agentclientprotocol/sdk``
from npm, installed by ``.ci/run`` into ``tests/acp/ts/node_modules``) through
initialize, new, prompt with streaming, permission, cancel, close, load with replay,
list and resume (issue 7 item 8), then the client's MCP server and the plan (issue 21)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, subprocess_env
from tests.support.model_server import Reply, ToolCall, usage

pytestmark = pytest.mark.slow

TS_DIR = Path(__file__).parent / "ts"
PLAN = [
    {"content": "add the numbers", "status": "in_progress"},
    {"content": "report", "status": "pending"},
]
SDK_DIR = TS_DIR / "node_modules" / "@agentclientprotocol" / "sdk"


def _require_ts_sdk() -> str:
    node = shutil.which("node")
    if node is None or not SDK_DIR.is_dir():
        message = (
            "TypeScript ACP SDK not installed: run `npm ci --prefix tests/acp/ts` (.ci/run does)"
        )
        if os.environ.get("CLIO_REQUIRE_TS_SDK") or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return node


def test_typescript_sdk_client_passes_the_full_flow(model_server, tmp_path):
    node = _require_ts_sdk()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model_server.install_settings(memory=False)
    model_server.push(
        Reply(reasoning="thinking it over", text="Hello from clio", usage=usage(20, 4)),
        Reply(
            tool_calls=[
                ToolCall("write_file", json.dumps({"path": "out.txt", "content": "ts interop\n"}))
            ]
        ),
        Reply(text="The file is written."),
        Reply(text=["slow "] * 200, chunk_delay=0.05),
        Reply(tool_calls=[ToolCall("todo_write", json.dumps({"todos": PLAN}))]),
        Reply(tool_calls=[ToolCall("mcp__demo__add", json.dumps({"a": 2, "b": 40}))]),
        Reply(text="42"),
    )
    agent_cmd = [sys.executable, "-m", "clio_acp", "acp"]
    mcp_cmd = [sys.executable, "-m", "tests.support.mcp_server"]
    proc = subprocess.run(
        [node, str(TS_DIR / "interop.mjs")],
        cwd=TS_DIR,
        env=subprocess_env(
            {
                "AGENT_CMD": json.dumps(agent_cmd),
                "WORKSPACE": str(workspace),
                "MCP_CMD": json.dumps(mcp_cmd),
                "MCP_PYTHONPATH": str(REPO_ROOT),
            }
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])

    init = summary["initialize"]
    assert init["protocolVersion"] == 1
    assert init["agentInfo"]["name"] == "clio-acp"
    assert init["agentCapabilities"]["loadSession"] is True

    assert summary["newModes"]["currentModeId"] == "ask"
    assert summary["configOptionIds"][0] == "mode"

    assert summary["streamStop"] == "end_turn"
    assert summary["streamText"] == "Hello from clio"
    assert summary["streamThought"] == "thinking it over"

    assert summary["permissionStop"] == "end_turn"
    assert summary["permissionCount"] == 1
    assert summary["permissionKind"] == "edit"
    assert (workspace / "out.txt").read_text() == "ts interop\n"

    assert summary["cancelStop"] == "cancelled"
    assert "tool_call" in summary["kindsFirst"] and "usage_update" in summary["kindsFirst"]

    assert summary["replayUserText"].startswith("say hello")
    assert "write the file" in summary["replayUserText"]
    assert "Hello from clio" in summary["replayAgentText"]
    assert "tool_call" in summary["replayKinds"]
    assert summary["loadModes"]["currentModeId"] == "ask"
    assert summary["listed"] == [summary["sessionId"]]
    assert summary["resumeNewMessages"] == 0
    assert summary["afterCloseError"] == -32002

    # The client's MCP server and the plan, seen by the official client (issue 21).
    assert summary["mcpStop"] == "end_turn"
    assert summary["mcpPlans"] == [[["add the numbers", "in_progress"], ["report", "pending"]]]
    kinds = dict(summary["mcpToolCalls"])
    assert "other" in kinds.values() and "think" in kinds.values()
    assert summary["mcpPermissions"] == ["other"]
    assert "42" in model_server.bodies[-1]["messages"][-1]["content"]
