"""Redaction cost (issue 17): the full redactor (MEMORY_SPEC §8 shapes + vendored
gitleaks rules + extra shapes) on the texts memory redacts, against two baselines in
the same run: the §8 shapes alone (what the redactor was before) and the vendored
rules run without gitleaks' keyword prefilter (what the prefilter saves).

    python bench/redaction.py [--runs 7] [--json]

Inputs: a one-line tool digest (~90 chars), a full bank entry (1,200 chars), a trace
string (8,000 chars) and a 53 KB Python file (this repository's middleware sources).
Prints the median milliseconds per call and the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clio_acp.memory import redact
from clio_acp.memory.secret_rules import load_ruleset

ROOT = Path(__file__).resolve().parents[1]


def _inputs() -> dict[str, str]:
    sources = "".join(
        p.read_text(encoding="utf-8") for p in sorted((ROOT / "clio_acp/memory").glob("*.py"))
    )[:53_000]
    digest = (
        "pytest failed: AssertionError in test_token_refresh at line 42, the api key was missing"
    )
    entry = (
        "The API client reads API_KEY=super-secret-value-123 from .env; run pytest -x "
        "tests/test_auth.py after editing src/auth/token.py. "
    ) * 20
    return {
        "digest": digest,
        "bank entry": entry[:1200],
        "trace string": (entry * 7)[:8000],
        "53 KB source": sources,
    }


def _spec_only(text: str) -> str:
    for kind, pattern in redact._SPEC_SHAPES:
        text = pattern.sub(f"[redacted:{kind}]", text)
    return redact._ASSIGNMENT.sub(lambda m: m.group(1) + "[redacted:assignment]", text)


def _vendored_without_prefilter(text: str) -> str:
    ruleset = load_ruleset()
    for rule in ruleset.rules:
        if rule.pattern is not None:
            for _span in ruleset.secret_spans(rule, text):
                pass
    return text


def _median_ms(fn, text: str, runs: int) -> float:
    fn(text)  # warm: lazy compiles
    reps = max(1, int(20_000 / max(len(text), 100)))
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(reps):
            fn(text)
        samples.append((time.perf_counter() - started) / reps * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {}
    for name, text in _inputs().items():
        full = _median_ms(redact.redact_secrets_text, text, args.runs)
        spec = _median_ms(_spec_only, text, args.runs)
        unfiltered = _median_ms(_vendored_without_prefilter, text, max(3, args.runs // 2))
        rows[name] = {
            "chars": len(text),
            "fullMs": round(full, 3),
            "specOnlyMs": round(spec, 3),
            "vendoredNoPrefilterMs": round(unfiltered, 3),
            "fullVsSpecOnly": round(full / spec, 1),
            "noPrefilterVsFull": round(unfiltered / full, 1),
        }
    if args.json:
        print(json.dumps(rows))
    else:
        for name, row in rows.items():
            print(f"{name:14} {json.dumps(row)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
