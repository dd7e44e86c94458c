"""Hostile inputs at volume (issue 17 done-when): N generated inputs per framer and per
parser from a stated seed; reports crashes and unanswered requests. Not a CI test (the
CI suite runs the same generators through hypothesis with a small example count).

    python bench/hostile_inputs.py [--count 10000] [--seed 17] [--only acp,lsp,envelope] [--json]

Framers (``acp``, ``lsp``) run one real ``python -m clio_acp acp|lsp`` subprocess each:
every input is written to it, a probe request follows every 100 inputs, and at the end
every request id owed a reply must have one. A crash is the process exiting (it is
restarted and counted). Parsers run in-process: a crash is an exception their
contract does not allow (``tests/support/parser_fuzz.py``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.hostile import hostile_input, probe, start_peer
from tests.support.parser_fuzz import PARSERS

PROBE_EVERY = 100


def run_framer(face: str, count: int, seed: int, home: Path) -> dict[str, object]:
    rng = random.Random(seed)
    ids = itertools.count(1)
    peer = start_peer(face, home / f"{face}-0")
    owed: set[object] = set()
    crashes = unanswered = probes_failed = 0
    started = time.monotonic()
    for index in range(count):
        data, expected = hostile_input(face, rng, ids)
        if not peer.send(data) or not peer.alive():
            crashes += 1
            unanswered += len(peer.wait_for(owed, 1))
            peer.close()
            peer, owed = start_peer(face, home / f"{face}-{crashes}"), set()
            continue
        if expected is not None:
            owed.add(expected)
        if index % PROBE_EVERY == PROBE_EVERY - 1 and not probe(peer, f"probe-{index}"):
            probes_failed += 1
    unanswered += len(peer.wait_for(owed, 120))
    crashes += 0 if peer.alive() else 1
    peer.close()
    return {
        "inputs": count,
        "seed": seed,
        "requestsOwedAReply": next(ids) - 1,
        "unanswered": unanswered,
        "probesFailed": probes_failed,
        "crashes": crashes,
        "seconds": round(time.monotonic() - started, 1),
    }


def run_parser(name: str, count: int, seed: int, home: Path) -> dict[str, object]:
    generate, check = PARSERS[name]
    rng = random.Random(seed)
    crashes = 0
    first: str | None = None
    started = time.monotonic()
    for _ in range(count):
        value = generate(rng)
        try:
            check(value, home)
        except Exception as exc:  # the figure this script exists to count
            crashes += 1
            first = first or f"{type(exc).__name__}: {exc}"[:200]
    row: dict[str, object] = {"inputs": count, "seed": seed, "crashes": crashes}
    row["seconds"] = round(time.monotonic() - started, 1)
    if first:
        row["firstCrash"] = first
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--only", default="", help="comma-separated names (acp, lsp, parsers)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = ["acp", "lsp", *PARSERS]
    if args.only:
        names = [n for n in names if n in set(args.only.split(","))]
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for name in names:
            run = run_framer if name in ("acp", "lsp") else run_parser
            results[name] = run(name, args.count, args.seed, home)
            if not args.json:
                print(f"{name:34} {json.dumps(results[name])}", flush=True)
    if args.json:
        print(json.dumps(results))
    return 1 if any(r["crashes"] or r.get("unanswered") for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
