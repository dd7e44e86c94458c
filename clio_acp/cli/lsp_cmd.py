"""``clio-acp lsp``: run the language server (LSP over stdio) for editors.

Argument parsing only; the server lives in ``clio_acp.lsp``. Exit code 0 after the
client's ``shutdown`` + ``exit``, 1 when the client exits without ``shutdown``, closes
the pipe, or its process (``initialize.processId``) dies (LSP 3.17 "exit").
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp lsp [--stdio]`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "lsp",
        help="run the language server over stdio (VS Code, Neovim, Helix, eglot, …)",
        description="Serve the Language Server Protocol on stdin/stdout. Logs go to stderr. "
        "See docs/editors/lsp.md for commands, notifications and initializationOptions.",
    )
    parser.add_argument(
        "--stdio", action="store_true", help="accepted for editors that pass it (default)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Serve LSP on stdin/stdout; returns the exit code (0 after ``shutdown`` + ``exit``, 1
    otherwise; see the module docstring)."""
    from clio_acp.lsp.server import SERVER
    from clio_acp.lsp.stdio import serve_stdio

    return serve_stdio(SERVER)
