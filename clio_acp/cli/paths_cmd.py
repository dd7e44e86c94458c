"""``clio-acp paths [--json]``: print the resolved data, state, config and cache roots."""

from __future__ import annotations

import argparse
import json

from clio_acp.paths import resolve_paths


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp paths [--json]`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "paths",
        help="print where clio-acp keeps its files",
        description="Print the data, state, config and cache folders (platformdirs, "
        "overridable by CLIO_ACP_DATA_DIR, CLIO_ACP_STATE_DIR, CLIO_ACP_CONFIG_DIR, "
        "CLIO_ACP_CACHE_DIR).",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the data, state, config and cache folders (one per line, or one JSON object). Exit
    0."""
    roots = resolve_paths().as_dict()
    if args.json:
        print(json.dumps(roots, indent=2))
    else:
        for key, value in roots.items():
            print(f"{key:7} {value}")
    return 0
