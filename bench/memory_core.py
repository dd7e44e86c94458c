"""Benchmark of the task-memory core: envelope parser throughput, bank render at full
caps, and one whole policy step with a scripted answer.

Run from the repository root (``../shared`` beside it supplies real model answers):

    python bench/memory_core.py            # median of 7 runs
    python bench/memory_core.py --runs 11 --json

Each figure is the median over ``--runs`` runs. The parser is compared with a naive
baseline measured in the same run (first ``<operations>…</operations>`` regex +
``json.loads``), which does none of the §2 safety work; the ratio shows what the
tolerant parser costs relative to it. No timing here is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.memory.bank import TaskMemoryBank  # noqa: E402
from clio_acp.memory.envelope import parse_envelope  # noqa: E402
from clio_acp.memory.policy import (  # noqa: E402
    PolicyInput,
    ScriptedAnswerClient,
    run_task_memory_policy,
)
from tests.memory.vectors import VECTORS  # noqa: E402

SHARED = ROOT.parent / "shared" / "model-responses"


def corpus() -> tuple[list[str], int, int]:
    spec = [v["response"] for v in VECTORS]
    real = [
        p.read_bytes().decode("utf-8", errors="replace")
        for p in sorted(SHARED.glob("*-[0-9][0-9].txt"))
    ]
    return spec + real, len(spec), len(real)


_NAIVE = re.compile(r"<operations>(.*?)</operations>", re.DOTALL)


def naive_parse(text: str) -> object:
    match = _NAIVE.search(text)
    if match is None:
        return None
    try:
        return json.loads(match.group(1))
    except ValueError:
        return None


def per_second(func: Callable[[str], object], texts: list[str], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            func(text)
    elapsed = time.perf_counter() - start
    return repeat * len(texts) / elapsed


# Derailed, repetitive answers (~100-200 KB) that made the regex forms of §2 steps 2,
# 3 and 10 quadratic; the parser must stay linear on them.
DERAILED = {
    "repeated <think>": "<think>" * 20_000,
    "openers without '>'": "<operations>[]</operations>" + "<think " * 20_000,
    "token run at the end": "<|a|>" + " " * 50_000 + "<|a|>" * 2_000 + " x",
    "tag-less reminder": "<operations>[]</operations><context_for_action>"
    + "<a " * 20_000
    + "</context_for_action>",
}


def full_bank() -> TaskMemoryBank:
    clock_now = [datetime(2026, 1, 1, tzinfo=UTC)]

    def clock() -> datetime:
        clock_now[0] += timedelta(milliseconds=1)
        return clock_now[0]

    bank = TaskMemoryBank(clock=clock)
    bank.update_status("status " + "s" * 1190)
    for i in range(20):
        bank.save("knowledge", f"fact {i} " + "k" * 1190)
    for i in range(30):
        bank.save("procedural", f"attempt {i} " + "p" * 1185)
    return bank


def time_us(func: Callable[[], object], repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        func()
    return (time.perf_counter() - start) / repeat * 1e6


def policy_steps_per_second(answer: str, steps: int) -> float:
    async def go() -> float:
        bank = full_bank()
        client = ScriptedAnswerClient(answer)
        inputs = PolicyInput(task="Keep reminders visible.", max_tokens=2000)
        start = time.perf_counter()
        for _ in range(steps):
            await run_task_memory_policy(bank, inputs, client)
        return steps / (time.perf_counter() - start)

    return asyncio.run(go())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per figure (median)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    texts, n_spec, n_real = corpus()

    parser_rates, naive_rates, ratios = [], [], []
    render_us, render_all_us, restored_us, step_rates = [], [], [], []
    derailed_ms: dict[str, list[float]] = {name: [] for name in DERAILED}
    bank = full_bank()
    answer = (
        '<operations>[{"op":"update_status","content":"Tests pass."},'
        '{"op":"save_knowledge","content":"No new dependencies."}]</operations>\n'
        "<no_intervention/>"
    )
    for _ in range(args.runs):
        rate = per_second(parse_envelope, texts, 20)
        naive = per_second(naive_parse, texts, 20)
        parser_rates.append(rate)
        naive_rates.append(naive)
        ratios.append(naive / rate)
        render_us.append(time_us(lambda: bank.render(2000), 200))
        render_all_us.append(time_us(lambda: bank.render(10**9), 200))
        restored_us.append(time_us(lambda: bank.render_restored_state(2000), 200))
        step_rates.append(policy_steps_per_second(answer, 200))
        for name, text in DERAILED.items():
            derailed_ms[name].append(time_us(lambda text=text: parse_envelope(text), 3) / 1000)

    med = statistics.median
    figures = {
        "runs": args.runs,
        "corpus": {"spec_vectors": n_spec, "model_responses": n_real},
        "parser_envelopes_per_s": round(med(parser_rates)),
        "naive_baseline_envelopes_per_s": round(med(naive_rates)),
        "parser_cost_vs_naive": round(med(ratios), 2),
        "bank_render_2000_tokens_us": round(med(render_us), 1),
        "bank_render_unbounded_us": round(med(render_all_us), 1),
        "bank_render_restored_state_us": round(med(restored_us), 1),
        "policy_steps_per_s_full_bank": round(med(step_rates)),
        "derailed_parse_ms": {name: round(med(v), 2) for name, v in derailed_ms.items()},
    }
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"corpus: {n_spec} spec vectors + {n_real} real model answers; median of {args.runs} runs"
    )
    print(f"envelope parser       {figures['parser_envelopes_per_s']:>10,} envelopes/s")
    print(f"naive regex+json      {figures['naive_baseline_envelopes_per_s']:>10,} envelopes/s")
    print(f"parser cost vs naive  {figures['parser_cost_vs_naive']:>10}x")
    print("bank at full caps (20 knowledge + 30 procedural, 1200-char entries):")
    print(f"  render(2000 tokens)        {figures['bank_render_2000_tokens_us']:>10} µs")
    print(f"  render(unbounded)          {figures['bank_render_unbounded_us']:>10} µs")
    print(f"  render_restored_state(2000){figures['bank_render_restored_state_us']:>10} µs")
    print(
        f"policy step (scripted answer, full bank) {figures['policy_steps_per_s_full_bank']:,} steps/s"
    )
    print("derailed answers (parse time, ms):")
    for name, ms in figures["derailed_parse_ms"].items():
        print(f"  {name:<26}{ms:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
