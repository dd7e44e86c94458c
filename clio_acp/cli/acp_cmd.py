"""``clio-acp acp``: run the Agent Client Protocol agent on stdio (for editors)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp acp`` to ``subparsers`` (the root parser's argparse sub-parsers)."""
    parser = subparsers.add_parser(
        "acp",
        help="run the ACP agent on stdin/stdout (Zed, JetBrains, Neovim, Emacs)",
        description="Speak ACP v1 (newline-delimited JSON-RPC) on stdin/stdout. "
        "stdout carries protocol messages only; logs go to stderr. See docs/editors/acp.md.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Serve ACP v1 on stdin/stdout until the client closes the pipe; stdout is kept for
    protocol messages before anything else is imported. Returns the process exit code (0 on
    a clean end of input)."""
    from clio_acp.acp.transport import protect_stdio  # standard library only

    fds = protect_stdio()  # before the SDK and the session core are imported
    from clio_acp.acp.stdio import main

    return main(fds)
