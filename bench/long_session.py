"""Benchmark of the agent loop's own cost per turn as a session grows (issue 18 item 2).

Run from the repository root:

    python bench/long_session.py                 # after 50, 500, 2000 and 5000 calls
    python bench/long_session.py --sizes 50 2000 --turns 5 --json

For each history size N, a session is given N earlier tool calls (the rows a real
5-call turn writes, cloned with fresh ids straight into the journal, then the session
is resumed so the history is loaded as it would be), and then ``--turns`` turns of
five ``read_file`` calls are timed with an in-process model that answers at once (no
network, no tokens): the figure is the loop itself — journal writes, the model view,
token estimates, events, permission gate, memory hooks and the tools. Printed: the
median ms per 5-call turn for each N and its ratio to the smallest N, measured in
the same run. Nothing here is asserted by any test.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from agent_loop import InstantModel, tool_turns  # noqa: E402

from clio_acp.paths import resolve_paths  # noqa: E402
from clio_acp.session.manager import SessionManager  # noqa: E402
from clio_acp.settings import Settings  # noqa: E402

CALLS_PER_TURN = 5


def _fresh_ids(rows: list[Any], turn: int) -> list[tuple[str, dict[str, Any]]]:
    """The rows of one recorded turn with new tool call, message and turn ids."""
    text = json.dumps([[r.type, r.data] for r in rows])
    ids: set[str] = set()
    for _type, data in json.loads(text):
        for key in ("tool_call_id", "message_id", "thought_id", "turn_id"):
            if isinstance(data.get(key), str):
                ids.add(data[key])
        for call in data.get("tool_calls") or ():
            ids.add(call["id"])
    for old in sorted(ids, key=len, reverse=True):
        text = text.replace(json.dumps(old), json.dumps(f"{old}-h{turn}"))
    return [(t, d) for t, d in json.loads(text)]


async def _grow(manager: SessionManager, session_id: str, template: list[Any], calls: int) -> None:
    journal = await manager.journal()
    for turn in range(calls // CALLS_PER_TURN):
        for type_, data in _fresh_ids(template, turn):
            await journal.append(session_id, type_, data)


async def _measure(workdir: Path, size: int, turns: int) -> float:
    os.environ["CLIO_ACP_STATE_DIR"] = str(workdir / "state")
    os.environ["CLIO_ACP_DATA_DIR"] = str(workdir / "data")
    ws = workdir / "ws"
    ws.mkdir()
    for i in range(10):
        (ws / f"f{i}.txt").write_text(f"a short file {i}\n")  # small: no compaction
    settings = Settings()
    model = InstantModel()
    manager = SessionManager(
        paths=resolve_paths(), settings=lambda: settings, model_factory=lambda s: model
    )
    try:
        session = await manager.new_session(ws, mode="bypass")
        before = len(session.transcript.rows)
        model.queue += tool_turns(CALLS_PER_TURN)
        await session.prompt("read five files")
        template = session.transcript.rows[before:]
        session_id = session.id
        await manager.close_session(session_id)
        await _grow(manager, session_id, template, size - CALLS_PER_TURN)
        session = await manager.resume_session(session_id)
        times = []
        for turn in range(turns):
            model.queue += tool_turns(CALLS_PER_TURN, start=10_000 + turn * CALLS_PER_TURN)
            started = time.perf_counter()
            await session.prompt("read five more files")
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await manager.aclose()
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 2000, 5000])
    parser.add_argument("--turns", type=int, default=5, help="timed turns per size (median)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result: dict[str, float] = {}
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            result[str(size)] = asyncio.run(_measure(Path(tmp), size, args.turns))
    base = result[str(args.sizes[0])]
    if args.json:
        print(json.dumps({"turn_ms": result, "ratio": {k: v / base for k, v in result.items()}}))
        return 0
    print(
        f"agent loop, one {CALLS_PER_TURN}-call turn (median of {args.turns}), model time excluded:"
    )
    for size, ms in result.items():
        print(f"  after {size:>5} tool calls: {ms:8.2f} ms  (×{ms / base:.2f} of {args.sizes[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
