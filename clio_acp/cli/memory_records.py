"""``clio-acp memory list|approve|reject|prune|promote``: the durable-record verbs (MEMORY_SPEC §6).

Argument parsing and printing only; the work is done by ``clio_acp.memory.store``,
``promotion`` and ``handoff``. Results go to stdout, errors to stderr. Exit codes:
0 ok, 1 runtime error (corrupt store, unknown id, invalid handoff, refused scope),
2 usage error (missing or mismatched flags).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from clio_acp.memory.handoff import HANDOFF_MAX_BYTES, parse_handoff_snapshot
from clio_acp.memory.identity import canonical_repository_identity
from clio_acp.memory.promotion import (
    PromotionError,
    PromotionSource,
    ScopeSelection,
    record_from_promotion,
)
from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.store import MemoryStore, MemoryStoreError
from clio_acp.paths import resolve_paths


class _Failure(Exception):
    """A runtime error: printed on stderr, exit code 1."""


def _store() -> MemoryStore:
    return MemoryStore(resolve_paths().records_file)


def _fail(message: str) -> int:
    print(f"clio-acp: {message}", file=sys.stderr)
    return 1


def _guard(run):
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (MemoryStoreError, PromotionError, _Failure) as exc:
            return _fail(str(exc))

    return wrapped


def register(verbs: argparse._SubParsersAction) -> None:
    """Add list, approve, reject, prune and promote to ``clio-acp memory``."""
    p = verbs.add_parser(
        "list",
        help="list durable memory records",
        description="Print every durable memory record of <data>/memory/records.json: id, "
        "status (proposed, approved, rejected), scope, confidence, evidence, key and lesson.",
    )
    p.add_argument("--json", action="store_true", help="print the records as one JSON array")
    p.add_argument(
        "--status",
        choices=["proposed", "approved", "rejected"],
        help="only records with this status",
    )
    p.set_defaults(func=_guard(_run_list))

    for verb, text in (
        ("approve", "approve a proposed record so it may reach prompts"),
        ("reject", "reject a record (it never reaches prompts)"),
    ):
        p = verbs.add_parser(verb, help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("id", metavar="ID", help="record id (mem-<16 hex>)")
        p.set_defaults(func=_guard(_run_approve if verb == "approve" else _run_reject))

    p = verbs.add_parser(
        "prune",
        help="remove stale records",
        description="Remove stale records: approved records 180 days after their last "
        "verification (or creation), others 30 days after creation.",
    )
    p.add_argument("--stale", action="store_true", required=True, help="remove stale records")
    p.set_defaults(func=_guard(_run_prune))

    p = verbs.add_parser(
        "promote",
        help="propose durable records from a v2 handoff file",
        description="Propose (unapproved) durable records from the task-memory snapshot of a "
        "v2 handoff file. Each scope takes only its own identity flag: --scope repo "
        "--repository PATH (canonical) | --scope global --acknowledge-global | --scope "
        "runtime --runtime ID | --scope agent --agent ID.",
    )
    p.add_argument("--from-handoff", required=True, metavar="PATH", type=Path)
    p.add_argument(
        "--entry",
        action="append",
        default=[],
        metavar="ID",
        help="entry id to promote (repeatable; default: every entry)",
    )
    p.add_argument("--scope", required=True, choices=["repo", "global", "runtime", "agent"])
    p.add_argument(
        "--repository",
        metavar="PATH",
        help="canonical repository path (repo scope; default: the repository of the current folder)",
    )
    p.add_argument(
        "--acknowledge-global",
        action="store_true",
        help="confirm that the lesson applies in every repository (global scope)",
    )
    p.add_argument("--runtime", metavar="ID", help="runtime identity carried by the handoff")
    p.add_argument("--agent", metavar="ID", help="agent identity carried by the handoff")
    p.set_defaults(func=_guard(_run_promote), _parser=p)


def _describe(record: MemoryRecord) -> list[str]:
    lines = [
        f"{record.id}  {record.status}  {record.scope}  confidence={record.confidence:g}  "
        f"evidence={', '.join(record.evidence_refs)}",
        f"  key: {record.key}",
        f"  lesson: {record.lesson}",
    ]
    identity = record.repository or record.runtime or record.agent
    if identity is not None:
        lines.insert(
            1, f"  {record.scope if record.scope != 'repo' else 'repository'}: {identity.key}"
        )
    return lines


def _run_list(args: argparse.Namespace) -> int:
    records = _store().load()
    if args.status:
        records = [r for r in records if r.status == args.status]
    if args.json:
        print(json.dumps([r.to_json_dict() for r in records], indent=2, ensure_ascii=False))
        return 0
    print(f"{len(records)} memory record(s)")
    for record in records:
        print("\n".join(_describe(record)))
    return 0


def _run_approve(args: argparse.Namespace) -> int:
    record = _store().approve(args.id)
    print(f"approved {record.id}")
    return 0


def _run_reject(args: argparse.Namespace) -> int:
    record = _store().reject(args.id)
    print(f"rejected {record.id}")
    return 0


def _run_prune(args: argparse.Namespace) -> int:
    removed = _store().prune_stale()
    print(f"pruned {len(removed)} stale memory record(s)")
    for record in removed:
        print(f"  {record.id}  {record.status}  {record.key}")
    return 0


def current_repository(cwd: Path) -> str | None:
    """The canonical identity (MEMORY_SPEC §6) of the repository holding ``cwd``: the
    nearest folder up with a ``.git`` entry, else ``cwd`` itself."""
    start = cwd.absolute()
    root = next((d for d in (start, *start.parents) if (d / ".git").exists()), start)
    return canonical_repository_identity(str(root))


_SCOPE_FLAGS = {
    "repo": "repository",
    "global": "acknowledge_global",
    "runtime": "runtime",
    "agent": "agent",
}


def _selection(args: argparse.Namespace) -> ScopeSelection:
    parser: argparse.ArgumentParser = args._parser
    own = _SCOPE_FLAGS[args.scope]
    for scope, flag in _SCOPE_FLAGS.items():
        if scope != args.scope and getattr(args, flag):
            parser.error(f"--{flag.replace('_', '-')} does not belong to --scope {args.scope}")
    if args.scope == "repo" and not args.repository:
        args.repository = current_repository(Path.cwd())
        print(f"clio-acp memory: --scope repo: the current repository, {args.repository}",
              file=sys.stderr)  # fmt: skip
    if not getattr(args, own):
        parser.error(f"--scope {args.scope} needs --{own.replace('_', '-')}")
    if args.scope == "repo":
        return ScopeSelection.repo(args.repository)
    if args.scope == "global":
        return ScopeSelection.global_(acknowledge_global=args.acknowledge_global)
    if args.scope == "runtime":
        return ScopeSelection.runtime(args.runtime)
    return ScopeSelection.agent(args.agent)


def _run_promote(args: argparse.Namespace) -> int:
    selection = _selection(args)
    path: Path = args.from_handoff
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise _Failure(f"{path} is not a regular file")
        if size > HANDOFF_MAX_BYTES:
            raise _Failure(f"{path} is larger than {HANDOFF_MAX_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _Failure(f"cannot read handoff {path}: {exc}") from exc
    snapshot = parse_handoff_snapshot(text)
    if snapshot is None:
        raise _Failure(f"{path} holds no valid task-memory snapshot")
    if snapshot.version != 2 or snapshot.source is None:
        raise _Failure(f"{path} holds a v1 snapshot: it can seed a session but has no provenance")
    entries = [("knowledge", e) for e in snapshot.knowledge]
    entries += [("procedural", e) for e in snapshot.procedural]
    if args.entry:
        known = {entry.id for _, entry in entries}
        unknown = [i for i in args.entry if i not in known]
        if unknown:
            raise _Failure(f"unknown entry id(s) in {path.name}: {', '.join(unknown)}")
        wanted = set(args.entry)
        entries = [(kind, e) for kind, e in entries if e.id in wanted]
    source = snapshot.source
    records = [
        record_from_promotion(
            PromotionSource(
                kind="handoff-snapshot",
                session_id=source.session_id,
                evidence_refs=source.evidence_refs,
                entry=entry.as_bank_entry(kind),
                runtime_ids=source.runtime_ids,
                agent_ids=source.agent_ids,
                redaction=snapshot.redaction,
            ),
            selection,
        )
        for kind, entry in entries
    ]

    def add_all(current: list[MemoryRecord]):
        present = {r.id for r in current}
        fresh = []
        for record in records:
            if record.id not in present:
                fresh.append(record)
                present.add(record.id)
        if not fresh:
            return current, set()
        return [*current, *fresh], {r.id for r in fresh}

    created = _store().mutate(add_all)
    for record in records:
        state = "proposed" if record.id in created else "exists  "
        print(f"{state} {record.id}  {record.scope}  {record.key}")
    print(
        f"{len(created)} new proposal(s), {len(records) - len(created)} already present; "
        "approve with: clio-acp memory approve ID"
    )
    return 0
