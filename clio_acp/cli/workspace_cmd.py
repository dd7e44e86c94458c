"""``clio-acp workspace SESSION [KEY]``: the named text values a session kept (issue 19).

Argument parsing and printing only; the views are ``clio_acp.session.workspace_values``
over the session journal. Without KEY: one page of keys (``--cursor`` continues);
with KEY: the value (at most 32,768 characters from ``--offset``). Exit codes: 0 ok,
1 unknown session, key, offset or cursor; 2 usage error (ambiguous session prefix).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from clio_acp.cli.session_cmd import _AmbiguousPrefix, _open_journal, _resolve_id


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp workspace SESSION [KEY]`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "workspace",
        help="show the named text values a session kept",
        description="List the keys of a session's named text workspace (values the model "
        "kept with workspace_write), or print one value.",
    )
    parser.add_argument("session", help="session id (or a unique prefix)")
    parser.add_argument("key", nargs="?", help="print this value (default: list the keys)")
    parser.add_argument("--offset", type=int, default=0, help="first character of the value")
    parser.add_argument(
        "--max-chars",
        type=int,
        default=None,
        help="characters to print (default and most: the workspace read cap)",
    )
    parser.add_argument("--cursor", help="continue a key list from a previous page")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=_run)


async def _run_async(args: argparse.Namespace) -> int:
    from clio_acp.session import workspace_values as views

    journal = await _open_journal()
    if journal is None:
        print("clio-acp workspace: no sessions yet", file=sys.stderr)
        return 1
    try:
        try:
            session_id = await _resolve_id(journal, args.session)
        except _AmbiguousPrefix as exc:
            print(
                f"clio-acp workspace: session prefix {exc.prefix!r} is ambiguous "
                f"({len(exc.matches)} matches)",
                file=sys.stderr,
            )
            return 2
        if session_id is None:
            print(f"clio-acp workspace: session not found: {args.session}", file=sys.stderr)
            return 1
        try:
            if args.key is None:
                result = await views.list_values(journal, session_id, cursor=args.cursor)
                text = _listing(result)
            else:
                result = await views.read_value(
                    journal,
                    session_id,
                    args.key,
                    offset=args.offset,
                    **({} if args.max_chars is None else {"max_chars": args.max_chars}),
                )
                text = result["text"] + ("\n" if result["text"] else "")
                if result["nextOffset"] is not None:
                    print(f"more: --offset {result['nextOffset']}", file=sys.stderr)
        except views.WorkspaceViewError as exc:
            print(f"clio-acp workspace: {exc}", file=sys.stderr)
            return 1
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n" if args.json else text)
        return 0
    finally:
        await journal.aclose()


def _listing(result: dict) -> str:
    values = result["values"]
    if not values:
        return "no workspace values in this session\n"
    lines = [f"- {v['key']} ({v['chars']} chars, updated {v['updatedAt']})" for v in values]
    if result["nextCursor"]:
        print(f"more: --cursor {result['nextCursor']}", file=sys.stderr)
    return "\n".join(lines) + "\n"


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_run_async(args))
