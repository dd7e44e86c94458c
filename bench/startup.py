"""Benchmark of process start: spawn → ``initialize`` answered, for ``clio-acp lsp``
and ``clio-acp acp``, each against a bare server of the library it is built on
(issue 18 part 1; issue 10 item 3 before it).

Run from the repository root:

    python bench/startup.py              # median of 5 runs
    python bench/startup.py --runs 9 --json

Figures (each the median over ``--runs`` cold starts; fresh data/state/config/cache
roots each time, no settings file; within a run the servers are started one after the
other in rotating order so load drifts hit them alike):

- ``lsp_initialize_ms``: spawn ``python -m clio_acp lsp`` → ``initialize`` result
  received by a pygls client (VS Code capability set) — what an editor waits for.
- ``bare_pygls_initialize_ms``: the same client and measurement against a minimal
  pygls 2.x ``LanguageServer`` (no features; the script is written by this bench).
  ``lsp_vs_bare_pygls`` = the ratio (issue 18 target ≤ 1.1).
- ``acp_initialize_ms``: spawn ``python -m clio_acp acp`` → ``initialize`` response
  line read (``protocolVersion`` 1, one newline-delimited JSON-RPC request).
- ``bare_acp_sdk_initialize_ms``: the same against a minimal agent-client-protocol SDK
  agent (``acp.run_agent`` with an ``initialize`` that returns protocol version 1).
  ``acp_vs_bare_sdk`` = the ratio (target ≤ 1.0).
- ``python_start_ms``: ``python -c pass`` spawn → exit; ``*_vs_python`` show what the
  imports and setup add over the interpreter alone.

No timing is asserted anywhere; CI does not run this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from isolated_env import isolated_env  # bench/ is sys.path[0]
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pytest_lsp import client_capabilities

ROOT = Path(__file__).resolve().parents[1]

BARE_PYGLS = '''\
"""A pygls server with no features: the floor for an LSP server's start."""
from pygls.lsp.server import LanguageServer

LanguageServer("bare-pygls", "1").start_io()
'''

BARE_ACP = '''\
"""An agent-client-protocol SDK agent answering only initialize."""
import asyncio

from acp import InitializeResponse, run_agent


class BareAgent:
    async def initialize(self, protocol_version, client_capabilities=None,
                         client_info=None, **kwargs):
        return InitializeResponse(protocol_version=1)

    def on_connect(self, conn):
        pass


asyncio.run(run_agent(BareAgent()))
'''


async def lsp_initialize_ms(home: Path, command: list[str]) -> float:
    """One cold LSP server (``command``): spawn → initialize result, ms."""
    env = isolated_env(home)
    workspace = home / "ws"
    workspace.mkdir(exist_ok=True)
    client = LanguageClient("clio-bench", "1")
    for method in (
        types.WINDOW_LOG_MESSAGE,
        types.WINDOW_SHOW_MESSAGE,
        types.PROGRESS,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        types.WINDOW_WORK_DONE_PROGRESS_CREATE,
        "clio/status",
    ):
        client.feature(method)(lambda params: None)
    client.feature(types.WORKSPACE_CONFIGURATION)(lambda params: [None for _ in params.items])
    start = time.perf_counter()
    await client.start_io(*command, env=env, cwd=str(workspace))
    await client.initialize_async(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            process_id=os.getpid(),
            root_uri=workspace.as_uri(),
        )
    )
    elapsed = (time.perf_counter() - start) * 1000
    client.initialized(types.InitializedParams())
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return elapsed


def acp_initialize_ms(home: Path, command: list[str]) -> float:
    """One cold ACP agent (``command``): spawn → ``initialize`` response read, ms."""
    request = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
    request["params"] = {"protocolVersion": 1, "clientCapabilities": {}}
    start = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=isolated_env(home),
        cwd=str(home),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise EOFError(f"{command} exited before answering initialize")
        message = json.loads(line)
        if message.get("id") == 0:
            if "result" not in message:
                raise RuntimeError(f"{command} answered initialize with {message}")
            break
    elapsed = (time.perf_counter() - start) * 1000
    proc.stdin.close()
    proc.wait(timeout=30)
    return elapsed


def python_start_ms() -> float:
    """``python -c pass``: spawn → exit, ms."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - start) * 1000


def measure(runs: int) -> dict[str, list[float]]:
    """``runs`` rounds of the five starts, order rotated each round."""
    samples: dict[str, list[float]] = {
        name: [] for name in ("lsp", "bare_pygls", "acp", "bare_acp", "python")
    }
    with tempfile.TemporaryDirectory(prefix="clio-bench-") as tmp:
        scripts = Path(tmp)
        (scripts / "bare_pygls.py").write_text(BARE_PYGLS)
        (scripts / "bare_acp.py").write_text(BARE_ACP)
        py = sys.executable
        starts = {
            "lsp": lambda home: asyncio.run(lsp_initialize_ms(home, [py, "-m", "clio_acp", "lsp"])),
            "bare_pygls": lambda home: asyncio.run(
                lsp_initialize_ms(home, [py, str(scripts / "bare_pygls.py")])
            ),
            "acp": lambda home: acp_initialize_ms(home, [py, "-m", "clio_acp", "acp"]),
            "bare_acp": lambda home: acp_initialize_ms(home, [py, str(scripts / "bare_acp.py")]),
            "python": lambda home: python_start_ms(),
        }
        names = list(starts)
        for i in range(runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                samples[name].append(starts[name](Path(tmp) / f"{name}{i}"))
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    med = {name: statistics.median(values) for name, values in measure(args.runs).items()}
    result = {
        "runs": args.runs,
        "lsp_initialize_ms": round(med["lsp"], 1),
        "bare_pygls_initialize_ms": round(med["bare_pygls"], 1),
        "lsp_vs_bare_pygls": round(med["lsp"] / med["bare_pygls"], 2),
        "acp_initialize_ms": round(med["acp"], 1),
        "bare_acp_sdk_initialize_ms": round(med["bare_acp"], 1),
        "acp_vs_bare_sdk": round(med["acp"] / med["bare_acp"], 2),
        "python_start_ms": round(med["python"], 1),
        "lsp_vs_python": round(med["lsp"] / med["python"], 2),
        "acp_vs_python": round(med["acp"] / med["python"], 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
