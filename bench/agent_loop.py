"""Benchmark of the agent loop's own cost per turn, excluding model time, and the
journal size after a 200-tool-call session.

Run from the repository root:

    python bench/agent_loop.py             # median of 7 runs
    python bench/agent_loop.py --runs 11 --json

The model is an in-process scripted ``ChatModel`` that answers at once (no network,
no tokens), so the measured time is the loop itself: journal writes (SQLite WAL on a
worker thread), the model-view projection, event fan-out, permission gate, memory
hooks (the real middleware when present) and the tools. Figures:

- ``turn_text_ms``: a turn with one text answer and no tools (the baseline; median of
  5 turns per run);
- ``turn_5tools_ms``: a turn with five ``read_file`` calls (median of 5 per run); ``per_tool_ms`` is the
  difference divided by 5 and ``ratio_5tools`` the ratio to the baseline;
- ``turn_after_200_ms``: the 5-tool turn again after 200 earlier tool calls (history
  grows the projection), and its ratio to the fresh one;
- ``journal_bytes_200``: the SQLite database + WAL size after 200 tool calls
  (each a ``read_file`` of a 2 KiB file, results kept whole).

No timing here is asserted anywhere.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.agent.model_port import ModelToolCall, ModelTurn, ModelUsage  # noqa: E402
from clio_acp.paths import resolve_paths  # noqa: E402
from clio_acp.session.manager import SessionManager  # noqa: E402
from clio_acp.settings import Settings  # noqa: E402


class InstantModel:
    """A ChatModel that replays a queue of turns immediately."""

    name = "instant"
    context_window = 1_000_000

    def __init__(self) -> None:
        self.queue: list[ModelTurn] = []
        self.calls = 0

    async def stream(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        *,
        on_text=None,
        on_reasoning=None,
        max_tokens=None,
    ) -> ModelTurn:
        self.calls += 1
        turn = self.queue.pop(0)
        if on_text and turn.text:
            for piece in turn.text.split(" "):
                await on_text(piece + " ")
        return turn

    async def complete(self, system: str, user: str, *, max_tokens: int) -> str:
        return "summary"

    async def aclose(self) -> None:
        return None


def tool_turns(n: int, start: int = 0) -> list[ModelTurn]:
    calls = [
        ModelToolCall(
            id=f"c{start + i}",
            name="read_file",
            arguments=json.dumps({"path": f"f{(start + i) % 10}.txt"}),
        )
        for i in range(n)
    ]
    return [
        ModelTurn(tool_calls=calls, finish_reason="tool_calls", usage=ModelUsage(100, 10)),
        ModelTurn(text="done reading the files", finish_reason="stop", usage=ModelUsage(100, 5)),
    ]


async def one_run(workdir: Path) -> dict[str, float]:
    os.environ["CLIO_ACP_STATE_DIR"] = str(workdir / "state")
    os.environ["CLIO_ACP_DATA_DIR"] = str(workdir / "data")
    ws = workdir / "ws"
    ws.mkdir()
    for i in range(10):
        (ws / f"f{i}.txt").write_text(f"line of text {i}\n" * 128)  # ~2 KiB
    settings = Settings()
    model = InstantModel()
    paths = resolve_paths()
    manager = SessionManager(paths=paths, settings=lambda: settings, model_factory=lambda s: model)
    try:
        session = await manager.new_session(ws, mode="bypass")
        events: list[Any] = []
        session.subscribe(events.append)
        # warm-up
        model.queue += [ModelTurn(text="hi", finish_reason="stop")]
        await session.prompt("warm up")

        text_times: list[float] = []
        tool_times: list[float] = []
        done = 0
        for _ in range(5):
            model.queue += [ModelTurn(text="a short answer with a few words", finish_reason="stop")]
            t0 = time.perf_counter()
            await session.prompt("say something")
            text_times.append((time.perf_counter() - t0) * 1000)
            model.queue += tool_turns(5, start=done)
            t0 = time.perf_counter()
            await session.prompt("read five files")
            tool_times.append((time.perf_counter() - t0) * 1000)
            done += 5
        text_ms = statistics.median(text_times)
        tools_ms = statistics.median(tool_times)

        while done < 200:
            model.queue += tool_turns(5, start=done)
            await session.prompt("read more files")
            done += 5
        model.queue += tool_turns(5, start=done)
        t0 = time.perf_counter()
        await session.prompt("read five more")
        after_ms = (time.perf_counter() - t0) * 1000
        journal = await manager.journal()
        size = await journal.size_bytes()
    finally:
        await manager.aclose()
    return {
        "turn_text_ms": text_ms,
        "turn_5tools_ms": tools_ms,
        "per_tool_ms": (tools_ms - text_ms) / 5,
        "ratio_5tools": tools_ms / text_ms,
        "turn_after_200_ms": after_ms,
        "ratio_after_200": after_ms / tools_ms,
        "journal_bytes_200": float(size),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: list[dict[str, float]] = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(asyncio.run(one_run(Path(tmp))))
    median = {k: statistics.median(r[k] for r in results) for k in results[0]}
    if args.json:
        print(json.dumps({"runs": args.runs, "median": median}, indent=2))
    else:
        print(
            f"agent loop, median of {args.runs} runs (model time excluded: in-process instant model)"
        )
        for key, value in median.items():
            unit = (
                ""
                if key.startswith("ratio")
                else (" bytes" if key.endswith("bytes_200") else " ms")
            )
            print(f"  {key:<20} {value:12.2f}{unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
