"""Benchmark of a memory step on the embedded model (SmolLM2-135M on llama-server).

Runs the real memory-policy prompt (``POLICY_SYSTEM_PROMPT`` + ``build_user_prompt``
with a one-entry bank and a six-step trajectory in which one command fails twice)
through ``Router.memory_complete`` on the embedded runtime, ``--runs`` times with
the envelope grammar and ``--runs`` times without it (the baseline, same run, same
seeds). Reports the median step latency of each, the ratio, and how many answers
the envelope parser could not use (``malformed``: ``unparseable`` or
``all_operations_invalid``). Repeatable: seed ``1000+i`` and ``cache_prompt: false``
per request, temperature 0.7, completion budget ``--max-tokens`` (400).

    clio-acp local install                      # once
    python bench/embedded_model.py              # 20 + 20 steps
    python bench/embedded_model.py --runs 5 --json

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
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.memory.bank import TaskMemoryBank  # noqa: E402
from clio_acp.memory.envelope import parse_envelope  # noqa: E402
from clio_acp.memory.prompts import POLICY_SYSTEM_PROMPT, build_user_prompt  # noqa: E402
from clio_acp.models.local import EmbeddedServer, local_status  # noqa: E402
from clio_acp.models.routing import Router  # noqa: E402
from clio_acp.paths import resolve_paths  # noqa: E402
from clio_acp.settings import Settings  # noqa: E402

TASK = (
    "Add a --verbose flag to the command-line interface in src/cli.py. Do not add any "
    "new dependency; the code must stay compatible with Python 3.9."
)


def _step(n: int, tool: str, call: str, outcome: str, digest: str) -> dict[str, object]:
    return {
        "step": n,
        "toolName": tool,
        "operationFingerprint": f"{tool}:{call}",
        "callDescription": call,
        "outcome": outcome,
        "resultDigest": digest,
        "resultDigestProvenance": "legacy",
    }


TRAJECTORY = [
    _step(1, "read_file", "read_file src/cli.py", "ok", "120 lines, argparse parser"),
    _step(2, "run_command", "pytest -q", "ok", "14 passed in 0.8s"),
    _step(3, "edit_file", "edit_file src/cli.py", "ok", "added --verbose store_true"),
    _step(
        4,
        "run_command",
        "pytest -q tests/test_cli.py",
        "error",
        "exit 2: ModuleNotFoundError: No module named 'click'",
    ),
    _step(
        5,
        "run_command",
        "pytest -q tests/test_cli.py",
        "error",
        "exit 2: ModuleNotFoundError: No module named 'click'",
    ),
    _step(
        6,
        "read_file",
        "read_file tests/test_cli.py",
        "ok",
        "line 3: from click.testing import CliRunner",
    ),
]


async def _steps(router: Router, user: str, runs: int, max_tokens: int) -> list[dict[str, object]]:
    out = []
    for i in range(runs):
        extra = {"seed": 1000 + i, "cache_prompt": False, "temperature": 0.7}
        started = time.perf_counter()
        answer = await router.memory_complete(
            POLICY_SYSTEM_PROMPT, user, max_tokens, timeout_ms=300_000, extra=extra
        )
        latency_ms = (time.perf_counter() - started) * 1000
        parsed = parse_envelope(answer.text, reference_text=user)
        out.append(
            {
                "latencyMs": latency_ms,
                "constrained": answer.constrained,
                "failure": parsed.failure,
                "outputTokens": answer.usage.output_tokens if answer.usage else None,
            }
        )
    return out


def _summary(rows: list[dict[str, object]]) -> dict[str, object]:
    malformed = sum(1 for r in rows if r["failure"] is not None)
    return {
        "runs": len(rows),
        "medianLatencyMs": round(statistics.median(float(r["latencyMs"]) for r in rows), 1),
        "malformed": malformed,
        "malformedRate": round(malformed / len(rows), 3),
        "medianOutputTokens": statistics.median(int(r["outputTokens"] or 0) for r in rows),
    }


async def main(runs: int, max_tokens: int) -> dict[str, object]:
    real = resolve_paths()
    if not local_status(real).installed:
        raise SystemExit("embedded model not installed: run `clio-acp local install` first")
    with tempfile.TemporaryDirectory() as tmp:
        paths = replace(real, state=Path(tmp))
        server = EmbeddedServer(paths)
        url = await server.start()
        os.environ["CLIO_BENCH_EMBEDDED_KEY"] = server.api_key  # the server wants its key
        bank = TaskMemoryBank()
        bank.save("knowledge", "The user forbids new dependencies; keep Python 3.9 compatible.")
        user = build_user_prompt(TASK, bank, 2000, TRAJECTORY)
        results = {}
        try:
            for label, constrained in (("grammar", True), ("free", False)):
                settings = Settings.model_validate(
                    {
                        "targets": [
                            {
                                "id": "embedded",
                                "runtime": "embedded",
                                "url": url,
                                "apiKeyEnv": "CLIO_BENCH_EMBEDDED_KEY",
                            }
                        ],
                        "chat": {"target": "embedded"},
                        "context": {
                            "memory": {"target": "embedded", "constrainedDecoding": constrained}
                        },
                    }
                )
                router = Router(settings, paths=paths)
                try:
                    await _steps(router, user, 1, max_tokens)  # warm-up, not counted
                    results[label] = _summary(await _steps(router, user, runs, max_tokens))
                finally:
                    await router.aclose()
        finally:
            await server.stop()
    results["latencyRatioGrammarToFree"] = round(
        float(results["grammar"]["medianLatencyMs"]) / float(results["free"]["medianLatencyMs"]), 2
    )
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(main(args.runs, args.max_tokens))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        g, f = report["grammar"], report["free"]
        print(f"memory step on the embedded model, {args.runs} runs each (median)")
        print(
            f"  with grammar   : {g['medianLatencyMs']} ms, malformed {g['malformed']}/{g['runs']}"
            f", {g['medianOutputTokens']} output tokens"
        )
        print(
            f"  without grammar: {f['medianLatencyMs']} ms, malformed {f['malformed']}/{f['runs']}"
            f", {f['medianOutputTokens']} output tokens"
        )
        print(f"  latency ratio grammar/free: {report['latencyRatioGrammarToFree']}")
