"""``clio-acp acp`` answers ``initialize`` before importing the session core (issue 18
part 1).

A child process runs the real agent (``acp.stdio.serve``) over pipes and looks at its
own ``sys.modules`` once ``initialize`` is answered, then after the first
``session/new`` (the first use). Speed itself is measured by ``bench/startup.py``,
never here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import subprocess_env

DEFERRED = (
    "httpx",
    "sqlite3",
    "clio_acp.session.manager",
    "clio_acp.session.commands",
    "clio_acp.memory",
    "clio_acp.memory.middleware",
    "clio_acp.agent",
    "clio_acp.models",
)
"""Modules answering ``initialize`` must not load."""

_PROBE = r"""
import asyncio, json, os, sys, threading

from clio_acp.acp.stdio import serve
from clio_acp.acp.transport import ProtocolFds

WATCHED = json.loads(sys.argv[1])
in_r, in_w = os.pipe()
out_r, out_w = os.pipe()
answers = os.fdopen(out_r, "rb")
report = {}


def send(request_id, method, params):
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    os.write(in_w, (json.dumps(message) + "\n").encode())


def answer(request_id):
    while True:
        message = json.loads(answers.readline())
        if message.get("id") == request_id:
            return message


def loaded():
    return [name for name in WATCHED if name in sys.modules]


def client():
    send(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    report["protocol"] = answer(0)["result"]["protocolVersion"]
    report["at_initialize"] = loaded()
    send(1, "session/new", {"cwd": os.getcwd(), "mcpServers": []})
    report["session"] = "sessionId" in answer(1)["result"]
    report["after_session_new"] = loaded()
    os.close(in_w)


thread = threading.Thread(target=client)
thread.start()
asyncio.run(serve(ProtocolFds(read_fd=in_r, write_fd=out_w)))
thread.join()
print(json.dumps(report))
"""


def test_initialize_is_answered_before_the_session_core_is_imported(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(DEFERRED)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["protocol"] == 1
    assert report["at_initialize"] == []
    # The first session loads the core (so the check above can see it).
    assert report["session"]
    assert {"clio_acp.session.manager", "sqlite3", "clio_acp.memory"} <= set(
        report["after_session_new"]
    )
