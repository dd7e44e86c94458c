"""Benchmark of the named text workspace and of continuation replay (issue 19).

Run from the repository root:

    python bench/text_workspace.py              # median of 9 runs
    python bench/text_workspace.py --runs 15 --json

Measured:

- ``write``: the ``workspace_write`` tool on a 32,768-character value (redaction with
  markers preserved, then one SQLite transaction in the journal's worker thread) vs the
  journal's plain ``put_spill`` of the same text (baseline, same run): what redaction and
  the replace/cap check cost;
- ``read``: ``workspace_read`` of that value (one 32,768-character slice) vs
  ``get_spill`` (baseline);
- ``list``: one ``workspace_list`` page of 100 keys in a session holding 1,000 values;
- ``body``: ``ModelClient.build_body`` for a 400-message view whose 200 assistant
  messages each carry a 2,000-character reasoning state, replay on (the state merged
  back) vs replay off (stripped only; baseline), with the body sizes.

No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.agent.tools import (  # noqa: E402
    WORKSPACE_TOOLS,
    LocalToolHost,
    ToolContext,
    ToolRegistry,
    Workspace,
)
from clio_acp.models.client import ChatRequest, ModelClient  # noqa: E402
from clio_acp.models.continuation import CONTINUATION_KEY, Continuation, RouteIdentity  # noqa: E402
from clio_acp.models.targets import Target  # noqa: E402
from clio_acp.session.journal import Journal  # noqa: E402

SID = "sess_bench"
VALUE = ("Finding: the parser rejects trailing commas; fixtures must be strict JSON. " * 500)[
    :32_768
]


async def median_ms(func: Callable[[], Awaitable[object]], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await func()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def median_sync_ms(func: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def workspace_figures(runs: int, folder: Path) -> dict[str, float]:
    journal = await Journal.open(folder / "sessions.sqlite")
    registry = ToolRegistry(WORKSPACE_TOOLS)
    ctx = ToolContext(
        workspace=Workspace.create(folder),
        host=LocalToolHost(),
        session_id=SID,
        spill_store=journal,
        values=journal,
    )

    async def tool(name: str, **arguments: object) -> None:
        result = await registry.execute(name, registry.parse_args(name, arguments), ctx)
        assert result.disposition.ok, result.output

    try:
        for i in range(999):
            await journal.workspace_put(SID, f"note-{i:04d}", f"value {i}", max_entries=1000)
        figures = {
            "write_ms": await median_ms(
                lambda: tool("workspace_write", key="big", value=VALUE), runs
            ),
            "put_spill_ms": await median_ms(lambda: journal.put_spill(SID, "spill-x", VALUE), runs),
            "read_ms": await median_ms(lambda: tool("workspace_read", key="big"), runs),
            "get_spill_ms": await median_ms(lambda: journal.get_spill(SID, "spill-x"), runs),
            "list_page_ms": await median_ms(lambda: tool("workspace_list"), runs),
        }
    finally:
        await journal.aclose()
    figures["write_ratio"] = figures["write_ms"] / figures["put_spill_ms"]
    figures["read_ratio"] = figures["read_ms"] / figures["get_spill_ms"]
    return figures


def body_figures(runs: int) -> dict[str, float]:
    identity = RouteIdentity("box", "llamacpp", "model-a")
    state = Continuation(identity, {"reasoning_content": "r" * 2000}).to_json()
    messages: list[dict] = [{"role": "system", "content": "system"}]
    for i in range(200):
        messages.append({"role": "user", "content": f"question {i} " * 20})
        messages.append({"role": "assistant", "content": f"answer {i}", CONTINUATION_KEY: state})
    request = ChatRequest(messages)

    def client(replay: bool) -> ModelClient:
        target = Target(
            id="box",
            runtime="llamacpp",
            base_url="http://127.0.0.1:9/v1",
            default_model="model-a",
            continuation_replay=replay,
        )
        return ModelClient(target)

    on, off = client(True), client(False)
    size_on = len(json.dumps(on.build_body(request, stream=True)[0]))
    size_off = len(json.dumps(off.build_body(request, stream=True)[0]))
    figures = {
        "body_replay_ms": median_sync_ms(lambda: on.build_body(request, stream=True), runs),
        "body_plain_ms": median_sync_ms(lambda: off.build_body(request, stream=True), runs),
        "body_replay_bytes": size_on,
        "body_plain_bytes": size_off,
    }
    figures["body_ratio"] = figures["body_replay_ms"] / figures["body_plain_ms"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = asyncio.run(workspace_figures(args.runs, Path(tmp)))
    figures.update(body_figures(args.runs))
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in figures.items()}))
        return 0
    print(f"median of {args.runs} runs")
    print(
        f"workspace_write 32768 chars  {figures['write_ms']:8.2f} ms   "
        f"put_spill baseline {figures['put_spill_ms']:6.2f} ms   ratio {figures['write_ratio']:.1f}"
    )
    print(
        f"workspace_read 32768 chars   {figures['read_ms']:8.2f} ms   "
        f"get_spill baseline {figures['get_spill_ms']:6.2f} ms   ratio {figures['read_ratio']:.1f}"
    )
    print(f"workspace_list 100 of 1000   {figures['list_page_ms']:8.2f} ms")
    print(
        f"build_body 400 msgs replay   {figures['body_replay_ms']:8.2f} ms   "
        f"plain baseline {figures['body_plain_ms']:6.2f} ms   ratio {figures['body_ratio']:.2f}   "
        f"bytes {int(figures['body_replay_bytes'])} vs {int(figures['body_plain_bytes'])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
