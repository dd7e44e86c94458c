"""``clio-acp``: argument parsing only; every command calls into the floors below.

Each command group lives in its own module exposing ``register(subparsers)``, which
adds its parser(s) and sets ``func`` (``(args) -> int`` exit code). Exit codes: 0 ok,
1 runtime error, 2 usage error; messages go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys

from clio_acp import __version__

# Command name -> the module that registers it. Modules are imported only for the
# command being run (the whole set only for help or an unknown command): importing
# every command pulled the agent, models and memory layers into `clio-acp acp`'s
# cold start. One line per command; keep alphabetical to make merges trivial.
_COMMANDS = {
    "acp": "acp_cmd",
    "doctor": "doctor_cmd",
    "eval": "eval_cmd",
    "events": "session_cmd",
    "local": "local_cmd",
    "lsp": "lsp_cmd",
    "memory": "memory_cmd",
    "models": "targets_cmd",
    "paths": "paths_cmd",
    "replay": "replay_cmd",
    "run": "session_cmd",
    "sessions": "session_cmd",
    "settings": "settings_cmd",
    "targets": "targets_cmd",
    "usage": "usage_cmd",
    "workspace": "workspace_cmd",
}


def _requested_command(argv: list[str]) -> str | None:
    """The command word in ``argv`` (skipping global options and their values)."""
    skip_next = False
    for token in argv:
        if skip_next:
            skip_next = False
        elif token == "--log-level":
            skip_next = True
        elif not token.startswith("-"):
            return token
    return None


def _command_modules(command: str | None) -> list:
    names = [_COMMANDS[command]] if command in _COMMANDS else sorted(set(_COMMANDS.values()))
    return [importlib.import_module(f"clio_acp.cli.{name}") for name in names]


class CliError(Exception):
    """A runtime failure a command reports on stderr with exit code 1."""


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""Accepted ``--log-level`` values (case-insensitive; Python ``logging`` level names)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``clio-acp`` parser: every command, or only ``command``'s module when given."""
    parser = argparse.ArgumentParser(
        prog="clio-acp",
        description="Coding-agent backend for editors (ACP and LSP) with proactive task memory.",
    )
    parser.add_argument("--version", action="version", version=f"clio-acp {__version__}")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=LOG_LEVELS,
        help="stderr log level (" + ", ".join(LOG_LEVELS) + ")",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules(command):
        module.register(subparsers)
    _log_level_everywhere(subparsers)
    return parser


def _log_level_everywhere(subparsers: argparse._SubParsersAction) -> None:
    """Accept ``--log-level`` after any (sub)command too (Zed starts agents with
    ``args: ["acp", "--log-level", "INFO"]``); it then overrides the global one."""
    for sub in subparsers.choices.values():
        try:
            sub.add_argument(
                "--log-level",
                default=argparse.SUPPRESS,
                type=str.upper,
                choices=LOG_LEVELS,
                help="stderr log level (as before the command)",
            )
        except argparse.ArgumentError:
            pass  # the command defines its own
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                _log_level_everywhere(action)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_requested_command(argv))
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
    except BrokenPipeError:
        return _closed_pipe()


EXIT_CLOSED_PIPE = 141
"""Exit code when the reader of stdout went away (``| head``): 128 + SIGPIPE, as a
shell reports a process killed by it."""


def _closed_pipe() -> int:
    """The reader of stdout closed it: stop quietly. stdout is pointed at /dev/null so
    the interpreter's final flush does not print "Exception ignored ..." either."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return EXIT_CLOSED_PIPE
