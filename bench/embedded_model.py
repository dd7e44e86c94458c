"""Benchmark of a memory step on the embedded model (SmolLM2-135M on llama.cpp's server).

Runs the real memory-policy prompt (``POLICY_SYSTEM_PROMPT`` + ``build_user_prompt``)
through ``Router.memory_complete`` on the embedded runtime, with the envelope grammar
(what a memory step sends). Each of ``--runs`` sessions makes two steps:

- step 1: a one-entry bank and a six-step trajectory in which one command fails twice;
- step 2 (the *warm prefix*): the same task, the bank after step 1's write, two more
  trajectory steps. The system prompt and the task are byte-identical, so with
  ``cache_prompt: true`` (what llama.cpp routes get, MEMORY_SPEC §14.4) the server
  re-reads only the tail;
- step 2 again with ``cache_prompt: false`` (the *cold* baseline, same run, same
  prompt, same seed): the whole prompt is read.

Reported (medians): latency of each, input tokens per step (``prompt_tokens``), the
prompt tokens the server took from its cache (``cache_n``) on the warm step, output
tokens, the warm/cold ratio, and how many answers the envelope parser could not use.
The server's generation and prompt threads are reported too (on a 1–2 CPU machine they
depend on how busy it is at start: ``models.local.default_threads``). Seeds ``1000+i``,
temperature 0.7, completion budget ``--max-tokens`` (400).
``--free`` adds the unconstrained baseline of the older benchmark (no grammar).

    clio-acp local install                      # once
    python bench/embedded_model.py --runs 5
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
from typing import Any

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
KEY_ENV = "CLIO_BENCH_EMBEDDED_KEY"


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


CLICK = "exit 2: ModuleNotFoundError: No module named 'click'"
TRAJECTORY = [
    _step(1, "read_file", "read_file src/cli.py", "ok", "120 lines, argparse parser"),
    _step(2, "run_command", "pytest -q", "ok", "14 passed in 0.8s"),
    _step(3, "edit_file", "edit_file src/cli.py", "ok", "added --verbose store_true"),
    _step(4, "run_command", "pytest -q tests/test_cli.py", "error", CLICK),
    _step(5, "run_command", "pytest -q tests/test_cli.py", "error", CLICK),
    _step(6, "read_file", "read_file tests/test_cli.py", "ok", "line 3: from click.testing"),
]
LATER = [
    _step(7, "edit_file", "edit_file tests/test_cli.py", "ok", "uses argparse directly"),
    _step(8, "run_command", "pytest -q tests/test_cli.py", "ok", "3 passed in 0.2s"),
]


def _prompts() -> tuple[str, str]:
    """The user prompts of step 1 and step 2 of one session."""
    bank = TaskMemoryBank()
    bank.save("knowledge", "The user forbids new dependencies; keep Python 3.9 compatible.")
    first = build_user_prompt(TASK, bank, 2000, TRAJECTORY)
    bank.save("procedural", "pytest -q tests/test_cli.py failed twice: click is not installed.")
    second = build_user_prompt(TASK, bank, 2000, TRAJECTORY + LATER)
    return first, second


async def _one(
    router: Router, user: str, max_tokens: int, extra: dict[str, Any]
) -> dict[str, object]:
    started = time.perf_counter()
    answer = await router.memory_complete(
        POLICY_SYSTEM_PROMPT, user, max_tokens, timeout_ms=600_000, extra=extra
    )
    usage = answer.usage
    return {
        "latencyMs": (time.perf_counter() - started) * 1000,
        "inputTokens": usage.input_tokens if usage else None,
        "cachedTokens": usage.cached_tokens if usage else None,
        "outputTokens": usage.output_tokens if usage else None,
        "failure": parse_envelope(answer.text, reference_text=user).failure,
    }


async def _sessions(router: Router, runs: int, max_tokens: int) -> dict[str, list]:
    first, second = _prompts()
    rows: dict[str, list] = {"step1": [], "warm": [], "cold": []}
    for i in range(runs):
        seed = {"seed": 1000 + i, "temperature": 0.7}
        rows["step1"].append(await _one(router, first, max_tokens, seed))
        rows["warm"].append(await _one(router, second, max_tokens, seed))
        rows["cold"].append(await _one(router, second, max_tokens, {**seed, "cache_prompt": False}))
    return rows


def _median(rows: list[dict[str, object]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) is not None]  # type: ignore[arg-type]
    return round(statistics.median(values), 1) if values else None


def _summary(rows: list[dict[str, object]]) -> dict[str, object]:
    return {
        "runs": len(rows),
        "medianLatencyMs": _median(rows, "latencyMs"),
        "medianInputTokens": _median(rows, "inputTokens"),
        "medianCachedTokens": _median(rows, "cachedTokens"),
        "medianOutputTokens": _median(rows, "outputTokens"),
        "malformed": sum(1 for r in rows if r["failure"] is not None),
    }


def _settings(url: str, constrained: bool) -> Settings:
    target = {"id": "embedded", "runtime": "embedded", "url": url, "apiKeyEnv": KEY_ENV}
    return Settings.model_validate(
        {
            "targets": [target],
            "chat": {"target": "embedded"},
            "context": {"memory": {"target": "embedded", "constrainedDecoding": constrained}},
        }
    )


async def main(runs: int, max_tokens: int, free: bool) -> dict[str, object]:
    real = resolve_paths()
    if not local_status(real).installed:
        raise SystemExit("embedded model not installed: run `clio-acp local install` first")
    results: dict[str, object] = {"loadAverageBefore": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        paths = replace(real, state=Path(tmp))
        server = EmbeddedServer(paths)
        url = await server.start()
        results["threads"] = {"generation": server.threads, "prompt": server.batch_threads}
        os.environ[KEY_ENV] = server.api_key  # the server wants its key
        try:
            router = Router(_settings(url, True), paths=paths)
            try:
                await _one(router, _prompts()[0], max_tokens, {"seed": 999})  # warm-up
                rows = await _sessions(router, runs, max_tokens)
            finally:
                await router.aclose()
            for label, items in rows.items():
                results[label] = _summary(items)
            if free:
                router = Router(_settings(url, False), paths=paths)
                try:
                    extra = {"cache_prompt": False, "temperature": 0.7}
                    items = [
                        await _one(router, _prompts()[0], max_tokens, {**extra, "seed": 1000 + i})
                        for i in range(runs)
                    ]
                    results["free"] = _summary(items)
                finally:
                    await router.aclose()
        finally:
            await server.stop()
    warm, cold = results["warm"], results["cold"]
    results["warmToColdLatencyRatio"] = round(
        float(warm["medianLatencyMs"]) / float(cold["medianLatencyMs"]),
        2,  # type: ignore[index]
    )
    results["loadAverageAfter"] = os.getloadavg()[0]
    return results


def _print(report: dict[str, Any], runs: int) -> None:
    print(f"memory step on the embedded model, {runs} sessions of two steps (medians)")
    for label, name in (
        ("step1", "step 1            "),
        ("warm", "step 2, warm prefix"),
        ("cold", "step 2, cache off  "),
        ("free", "step 1, no grammar "),
    ):
        row = report.get(label)
        if row is None:
            continue
        print(
            f"  {name}: {row['medianLatencyMs']} ms, input {row['medianInputTokens']} tokens "
            f"({row['medianCachedTokens']} cached), output {row['medianOutputTokens']}, "
            f"malformed {row['malformed']}/{row['runs']}"
        )
    print(f"  warm/cold latency ratio: {report['warmToColdLatencyRatio']}")
    print(f"  server threads: {report['threads']}")
    print(
        f"  load average: {report['loadAverageBefore']:.2f} before, "
        f"{report['loadAverageAfter']:.2f} after"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--free", action="store_true", help="also run without the grammar")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(main(args.runs, args.max_tokens, args.free))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report, args.runs)
