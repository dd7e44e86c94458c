"""Benchmark of process start: spawn → ``initialize`` answered, for ``clio-acp lsp``
and ``clio-acp acp`` (issue 10 item 3).

Run from the repository root:

    python bench/startup.py              # median of 5 runs
    python bench/startup.py --runs 9 --json

Figures (each the median over ``--runs`` cold starts, fresh data/state/config/cache
roots each time, no settings file):

- ``lsp_initialize_ms``: spawn ``python -m clio_acp lsp`` → ``initialize`` result
  received by a pygls client (VS Code capability set) — what an editor waits for.
- ``acp_initialize_ms``: spawn ``python -m clio_acp acp`` → ``initialize`` answered
  (``bench/acp_startup.py``'s measurement, reused).
- ``python_start_ms``: ``python -c pass`` spawn → exit, the baseline in the same run;
  ``*_vs_python`` ratios show what our imports and setup add.

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

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pytest_lsp import client_capabilities

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from acp_startup import _env, cold_and_warm, python_baseline_ms  # noqa: E402


async def lsp_initialize_ms(home: Path) -> float:
    """One cold ``clio-acp lsp``: spawn → initialize result, ms."""
    env = _env(home)
    workspace = home / "ws"
    workspace.mkdir(exist_ok=True)
    client = LanguageClient("clio-bench", "1")
    for method in (
        types.WINDOW_LOG_MESSAGE,
        types.WINDOW_SHOW_MESSAGE,
        types.PROGRESS,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        types.WINDOW_WORK_DONE_PROGRESS_CREATE,
    ):
        client.feature(method)(lambda params: None)
    client.feature(types.WORKSPACE_CONFIGURATION)(lambda params: [None for _ in params.items])
    start = time.perf_counter()
    await client.start_io(sys.executable, "-m", "clio_acp", "lsp", env=env, cwd=str(workspace))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    lsp, acp, base = [], [], []
    with tempfile.TemporaryDirectory(prefix="clio-bench-") as tmp:
        for i in range(args.runs):
            base.append(python_baseline_ms())
            lsp.append(asyncio.run(lsp_initialize_ms(Path(tmp) / f"lsp{i}")))
            acp.append(cold_and_warm(Path(tmp) / f"acp{i}", warm_rounds=1)[0])
    med = statistics.median
    result = {
        "runs": args.runs,
        "lsp_initialize_ms": round(med(lsp), 1),
        "acp_initialize_ms": round(med(acp), 1),
        "python_start_ms": round(med(base), 1),
        "lsp_vs_python": round(med(lsp) / med(base), 2),
        "acp_vs_python": round(med(acp) / med(base), 2),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:20} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
