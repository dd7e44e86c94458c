"""``clio-acp usage report [--json]``: fold the memory step ledger and the background
usage rows into a table (work in ``clio_acp.memory.usage_report``; read-only)."""

from __future__ import annotations

import argparse
import json

from clio_acp.memory.usage_report import build_usage_report, format_usage_report
from clio_acp.paths import resolve_paths


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp usage report [--json]`` to ``subparsers`` (no verb: help, exit 2)."""
    parser = subparsers.add_parser(
        "usage",
        help="what the memory plane cost (steps, tokens, model time, hit rate)",
        description="Reports over <state>/memory/steps.jsonl and <state>/usage/out-of-turn.jsonl.",
    )
    verbs = parser.add_subparsers(dest="usage_verb", metavar="VERB")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    report = verbs.add_parser(
        "report",
        help="per-route table of memory steps, tokens, model time, hit rate, busy skips",
        description="Fold the memory step telemetry (steps.jsonl and its rotated .1) and the "
        "out-of-turn usage rows into a table: per route (target/model) the llm steps that "
        "reached the model, injections, hit rate, tokens, model time, slowest step and "
        "endpoint-busy skips; the rules tier's steps; background usage totals. Unreadable "
        "lines are counted and skipped.",
    )
    report.add_argument("--json", action="store_true", help="print one JSON object")
    report.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    """Print the usage report (a table, or one JSON object). Read-only; exit 0."""
    result = build_usage_report(resolve_paths())
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_usage_report(result))
    return 0
