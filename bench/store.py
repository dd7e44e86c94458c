"""Benchmark of the durable record store (MEMORY_SPEC §6) at its 500-record cap.

Run from the repository root:

    python bench/store.py              # median of 9 runs
    python bench/store.py --runs 15 --json

Measured on a records.json holding 500 records (499 for the insert):

- ``load``: ``MemoryStore.load()`` — read, ``json.loads``, full pydantic validation;
- ``insert``: ``add_if_absent()`` of the 500th record — lock, load, validate, sort,
  serialize, temp file + fsync + rename + folder fsync;
- ``approve``: ``approve()`` of one record at 500;
- ``prompt``: ``build_prompt_section()`` over 500 loaded records (eligibility, order,
  ≤ 5 items / 400 tokens).

Baselines measured in the same run: ``json.loads`` of the same file (for the reads)
and a plain ``json.dumps`` + ``write_text`` with no lock, validation or fsync (for
the writes); the ratio is what safety costs over them. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.memory.records import MemoryRecord  # noqa: E402
from clio_acp.memory.retrieval import ActiveIdentity, build_prompt_section  # noqa: E402
from clio_acp.memory.store import MemoryStore  # noqa: E402
from clio_acp.timestamps import format_timestamp  # noqa: E402

CAP = 500
BASE = datetime(2026, 11, 1, tzinfo=UTC)


def make_record(n: int, repo: str) -> MemoryRecord:
    scope = "repo" if n % 2 else "global"
    data: dict = {
        "id": f"mem-{n:016x}",
        "scope": scope,
        "key": f"promotion:task-bank-entry:sess-{n % 17}:tm-k-{n}",
        "lesson": f"Lesson {n}: run the whole suite before landing; the parser rejects "
        "trailing commas and single quotes, so fixtures must be strict JSON. " * 2,
        "evidenceRefs": [f"session:sess-{n % 17}"],
        "appliesWhen": [f"repository:canonical-path:{repo}"] if scope == "repo" else [],
        "avoidWhen": [],
        "confidence": 0.6,
        "createdAt": format_timestamp(BASE + timedelta(minutes=n)),
        "approved": n % 3 == 0,
        "provenance": {
            "sourceKind": "task-bank-entry",
            "sourceSessionId": f"sess-{n % 17}",
            "sourceEntryId": f"tm-k-{n}",
            "sourceEntryKind": "knowledge",
            "redaction": {
                "appliedBeforePersistence": True,
                "replacementCount": 0,
                "sourceFields": [],
            },
        },
    }
    if scope == "repo":
        data["repository"] = {"kind": "canonical-path", "key": repo}
    return MemoryRecord.model_validate(data)


def median_ms(func: Callable[[], object], runs: int, setup: Callable[[], None] | None = None):
    samples = []
    for _ in range(runs):
        if setup is not None:
            setup()
        start = time.perf_counter()
        func()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        repo = str(Path(tmp).resolve())
        path = Path(tmp) / "memory" / "records.json"
        store = MemoryStore(path)
        full = [make_record(n, repo) for n in range(CAP)]
        store.mutate(lambda _: (full, None))
        size = path.stat().st_size
        raw_payload = json.loads(path.read_text())

        def reset_to(records: list[MemoryRecord]) -> Callable[[], None]:
            return lambda: store.mutate(lambda _: (records, None))

        results = {
            "file_bytes": size,
            "load_ms": median_ms(store.load, args.runs),
            "baseline_json_loads_ms": median_ms(lambda: json.loads(path.read_text()), args.runs),
            "insert_500th_ms": median_ms(
                lambda: store.add_if_absent(full[-1]), args.runs, setup=reset_to(full[:-1])
            ),
            "approve_at_500_ms": median_ms(
                lambda: store.approve(full[1].id), args.runs, setup=reset_to(full)
            ),
            "baseline_plain_write_ms": median_ms(
                lambda: path.with_suffix(".plain").write_text(
                    json.dumps(raw_payload, indent=2) + "\n"
                ),
                args.runs,
            ),
        }
        records = store.load()
        active = ActiveIdentity(repository=repo)
        results["prompt_section_500_ms"] = median_ms(
            lambda: build_prompt_section(records, active), args.runs
        )
        results["load_vs_json_loads"] = results["load_ms"] / results["baseline_json_loads_ms"]
        results["insert_vs_plain_write"] = (
            results["insert_500th_ms"] / results["baseline_plain_write_ms"]
        )

    if args.json:
        print(json.dumps({"runs": args.runs, **results}, indent=2))
        return 0
    print(f"records.json at {CAP} records: {results['file_bytes']} bytes; median of {args.runs}")
    print(
        f"  load (validate 500)      {results['load_ms']:8.2f} ms   "
        f"json.loads baseline {results['baseline_json_loads_ms']:6.2f} ms   "
        f"x{results['load_vs_json_loads']:.1f}"
    )
    print(
        f"  insert 500th (locked)    {results['insert_500th_ms']:8.2f} ms   "
        f"plain write baseline {results['baseline_plain_write_ms']:5.2f} ms   "
        f"x{results['insert_vs_plain_write']:.1f}"
    )
    print(f"  approve at 500 (locked)  {results['approve_at_500_ms']:8.2f} ms")
    print(f"  prompt section over 500  {results['prompt_section_500_ms']:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
