"""Benchmark of the LSP face: request latency while an agent turn streams.

Run from the repository root:

    python bench/lsp_latency.py                 # median of 5 runs, 200 requests each
    python bench/lsp_latency.py --runs 3 --requests 400 --json

Each run starts a real ``python -m clio_acp lsp`` subprocess (VS Code capability set)
against the scripted model server on loopback, then measures sequential round trips
of two requests an editor sends all the time:

- ``textDocument/codeAction`` on a workspace file (what every cursor move costs), and
- ``workspace/executeCommand clio.usage`` (a cheap command),

first with the server idle (the baseline, same run), then while a turn streams a long
scripted answer (thousands of ``clio/sessionUpdate`` notifications and ``$/progress``
reports going out). Figures are the medians over runs of each run's p50 and p99, in
milliseconds, and the ratio streaming/idle of the p50. The streamed notification rate
during the measurement is reported too.

No timing is asserted anywhere; CI does not run this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pytest_lsp import client_capabilities

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.support.model_server import Reply, ScriptedModelServer  # noqa: E402

STREAM_CHUNKS = 6000  # answer pieces of the streaming turn
CHUNK_DELAY_S = 0.002  # between pieces: ~12 s of streaming at most


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


class _Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("clio-bench", "1")
        self.updates = 0
        self.streaming = asyncio.Event()

        @self.feature("clio/sessionUpdate")
        def _update(params: Any) -> None:
            self.updates += 1
            if getattr(params, "type", None) == "message_chunk":
                self.streaming.set()

        @self.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def _create(params: Any) -> None:
            return None

        @self.feature(types.WORKSPACE_CONFIGURATION)
        def _configuration(params: Any) -> list[None]:
            return [None for _ in params.items]

        for method in (
            types.PROGRESS,
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
            types.WINDOW_SHOW_MESSAGE,
            types.WINDOW_LOG_MESSAGE,
        ):
            self.feature(method)(lambda params: None)


async def _timed(calls: int, make: Any) -> list[float]:
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        await make()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def _one_run(requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="clio-bench-") as tmp, ScriptedModelServer() as model:
        root = Path(tmp)
        env = dict(os.environ)
        for name in ("data", "state", "config", "cache"):
            (root / name).mkdir()
            env[f"CLIO_ACP_{name.upper()}_DIR"] = str(root / name)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        model.install_settings(root / "config", memory=False)
        workspace = root / "ws"
        workspace.mkdir()
        source = workspace / "main.py"
        source.write_text("print('hello')\n", encoding="utf-8")

        client = _Client()
        await client.start_io(sys.executable, "-m", "clio_acp", "lsp", env=env, cwd=str(workspace))
        await client.initialize_async(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                process_id=os.getpid(),
                root_uri=workspace.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            )
        )
        client.initialized(types.InitializedParams())

        position = types.Position(line=0, character=0)
        action_params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=source.as_uri()),
            range=types.Range(start=position, end=position),
            context=types.CodeActionContext(diagnostics=[]),
        )
        usage_params = types.ExecuteCommandParams(command="clio.usage", arguments=[])

        def code_action() -> Any:
            return client.text_document_code_action_async(action_params)

        def usage() -> Any:
            return client.workspace_execute_command_async(usage_params)

        # Warm up (imports, the session manager, the first turn's model route).
        model.push(Reply(text="warm"))
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.prompt", arguments=["warm up"])
        )
        await _timed(20, code_action)

        idle = {
            "codeAction": await _timed(requests, code_action),
            "usage": await _timed(requests, usage),
        }

        model.push(Reply(text=["x "] * STREAM_CHUNKS, chunk_delay=CHUNK_DELAY_S))
        turn = asyncio.ensure_future(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="clio.prompt", arguments=["stream"])
            )
        )
        client.streaming.clear()
        await client.streaming.wait()
        started = time.perf_counter()
        counted = client.updates
        busy = {
            "codeAction": await _timed(requests, code_action),
            "usage": await _timed(requests, usage),
        }
        elapsed = time.perf_counter() - started
        rate = (client.updates - counted) / elapsed
        still_streaming = not turn.done()

        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.cancel", arguments=[])
        )
        await asyncio.wait_for(turn, 30)
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()

    result: dict[str, Any] = {"updates_per_s": rate, "turn_streamed_throughout": still_streaming}
    for name in ("codeAction", "usage"):
        result[f"{name}_idle_p50_ms"] = _percentile(idle[name], 0.5)
        result[f"{name}_idle_p99_ms"] = _percentile(idle[name], 0.99)
        result[f"{name}_streaming_p50_ms"] = _percentile(busy[name], 0.5)
        result[f"{name}_streaming_p99_ms"] = _percentile(busy[name], 0.99)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [asyncio.run(_one_run(args.requests)) for _ in range(args.runs)]
    keys = [k for k in runs[0] if k != "turn_streamed_throughout"]
    summary: dict[str, Any] = {k: round(statistics.median(r[k] for r in runs), 3) for k in keys}
    for name in ("codeAction", "usage"):
        summary[f"{name}_p50_ratio_streaming_vs_idle"] = round(
            summary[f"{name}_streaming_p50_ms"] / summary[f"{name}_idle_p50_ms"], 2
        )
    summary["runs"] = args.runs
    summary["requests_per_phase"] = args.requests
    summary["turn_streamed_throughout_all_runs"] = all(r["turn_streamed_throughout"] for r in runs)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for key, value in summary.items():
            print(f"{key:45} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
