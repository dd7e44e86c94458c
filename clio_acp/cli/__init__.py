"""``clio-acp``: argument parsing only; every command calls into the floors below.

Each command group lives in its own module exposing ``register(subparsers)``, which
adds its parser(s) and sets ``func`` (``(args) -> int`` exit code). Exit codes: 0 ok,
1 runtime error, 2 usage error; messages go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys

from clio_acp import __version__
from clio_acp.cli import (
    acp_cmd,
    doctor_cmd,
    eval_cmd,
    local_cmd,
    lsp_cmd,
    memory_cmd,
    paths_cmd,
    replay_cmd,
    session_cmd,
    settings_cmd,
    targets_cmd,
    usage_cmd,
)

# One line per command module; keep alphabetical to make merges trivial.
_COMMAND_MODULES = [
    acp_cmd,
    doctor_cmd,
    eval_cmd,
    local_cmd,
    lsp_cmd,
    memory_cmd,
    paths_cmd,
    replay_cmd,
    session_cmd,
    settings_cmd,
    targets_cmd,
    usage_cmd,
]


class CliError(Exception):
    """A runtime failure a command reports on stderr with exit code 1."""


def build_parser() -> argparse.ArgumentParser:
    """The full ``clio-acp`` parser."""
    parser = argparse.ArgumentParser(
        prog="clio-acp",
        description="Coding-agent backend for editors (ACP and LSP) with proactive task memory.",
    )
    parser.add_argument("--version", action="version", version=f"clio-acp {__version__}")
    parser.add_argument(
        "--log-level", default="WARNING", help="stderr log level (DEBUG, INFO, WARNING, ERROR)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
    except CliError as exc:
        print(f"clio-acp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
