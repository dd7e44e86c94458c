"""``clio-acp memory propose --from-evidence SESSION:EVENT --scope repo|global``
(MEMORY_SPEC §6 CLI; issue 19 item 3).

Argument parsing and printing only; ``clio_acp.session.evidence`` finds the event and
``clio_acp.memory.evidence`` applies the promotion rules. SESSION may be a unique
prefix of a session id; EVENT is the seq ``clio-acp events`` prints. Exit codes: 0
proposed (or already present), 1 runtime error (unknown session or event, refused
scope, corrupt store), 2 usage error (malformed reference, global scope without
``--acknowledge-global``, ambiguous prefix).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from clio_acp.cli.session_cmd import _AmbiguousPrefix, _open_journal, _resolve_id


def register(verbs: argparse._SubParsersAction) -> None:
    """Add ``propose`` to ``clio-acp memory``."""
    p = verbs.add_parser(
        "propose",
        help="propose a durable record from a journal event",
        description="Propose an unapproved durable memory record whose evidence is one "
        "journal event (a tool result, a failure, a user message; see `clio-acp events "
        "SESSION`). The lesson is --content, else the event's own text, redacted. Repo "
        "scope applies to the session's repository; global scope needs "
        "--acknowledge-global. Approve with `clio-acp memory approve ID`.",
    )
    p.add_argument(
        "--from-evidence",
        required=True,
        metavar="SESSION:EVENT",
        help="the event: session id (or unique prefix), a colon, the event seq",
    )
    p.add_argument("--scope", required=True, choices=["repo", "global"])
    p.add_argument(
        "--acknowledge-global",
        action="store_true",
        help="confirm that the lesson applies in every repository (global scope)",
    )
    p.add_argument("--content", metavar="TEXT", help="the lesson in your words")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=_run, _parser=p)


async def _propose(args: argparse.Namespace) -> int:
    from clio_acp.memory.promotion import PromotionError
    from clio_acp.memory.store import MemoryStoreError
    from clio_acp.paths import resolve_paths
    from clio_acp.session.evidence import EvidenceNotFound, parse_event_ref, propose_event

    parser: argparse.ArgumentParser = args._parser
    try:
        prefix, seq = parse_event_ref(args.from_evidence)
    except ValueError as exc:
        parser.error(str(exc))
    if args.scope == "global" and not args.acknowledge_global:
        parser.error(
            "--scope global needs --acknowledge-global (the lesson reaches every repository)"
        )
    if args.scope != "global" and args.acknowledge_global:
        parser.error("--acknowledge-global belongs to --scope global")
    journal = await _open_journal()
    if journal is None:
        print("clio-acp: no sessions yet", file=sys.stderr)
        return 1
    try:
        try:
            session_id = await _resolve_id(journal, prefix)
        except _AmbiguousPrefix as exc:
            parser.error(f"session prefix {exc.prefix!r} is ambiguous ({len(exc.matches)} matches)")
        if session_id is None:
            print(f"clio-acp: session not found: {prefix}", file=sys.stderr)
            return 1
        try:
            result = await propose_event(
                journal,
                resolve_paths(),
                f"{session_id}:{seq}",
                args.scope,
                acknowledge_global=args.acknowledge_global,
                content=args.content,
            )
        except (EvidenceNotFound, PromotionError, MemoryStoreError) as exc:
            print(f"clio-acp: {exc}", file=sys.stderr)
            return 1
    finally:
        await journal.aclose()
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    state = "proposed" if result["created"] else "exists  "
    print(f"{state} {result['recordId']}  {result['scope']}  evidence={result['evidenceRef']}")
    print(f"  lesson: {result['lesson']}")
    print(f"approve with: clio-acp memory approve {result['recordId']}")
    return 0


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_propose(args))
