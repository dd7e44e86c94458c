"""``clio-acp run``, ``clio-acp events`` and ``clio-acp sessions`` (issue 6 item 8).

Argument parsing and printing only: ``run`` drives one turn through the session core
(``SessionManager``) and prints its event stream (readable text, or one JSON object
per line with ``--json``); ``events`` prints a session's journal rows; ``sessions``
lists stored sessions. Without a terminal to ask, ``ask`` mode denies edits and
commands and says so. Output goes to stdout; diagnostics to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from clio_acp.agent.history import ROW_TYPES
from clio_acp.cli.argtypes import positive_int
from clio_acp.paths import resolve_paths
from clio_acp.session import PERMISSION_MODES, PermissionDecision, PermissionRequest
from clio_acp.settings import MAX_TURN_REQUESTS_DEFAULT

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp run``, ``events`` and ``sessions`` to ``subparsers``."""
    run = subparsers.add_parser(
        "run",
        help="run one agent turn headless and print its events",
        description="Run one prompt turn in a workspace and print the event stream.",
    )
    run.add_argument("prompt", help="the prompt text ('-' reads it from stdin)")
    run.add_argument(
        "--workspace", "-w", type=Path, default=None, help="workspace folder (default: cwd)"
    )
    run.add_argument("--target", help="target id for the chat route (overrides chat.target)")
    run.add_argument("--model", help="model name (overrides chat.model)")
    run.add_argument(
        "--mode",
        choices=PERMISSION_MODES,
        default=None,
        help="permission mode (default: settings, ask)",
    )
    run.add_argument("--session", help="continue this stored session instead of starting a new one")
    run.add_argument("--json", action="store_true", help="print one JSON event per line")
    run.add_argument(
        "--max-requests",
        type=int,
        default=MAX_TURN_REQUESTS_DEFAULT,
        help="model requests allowed in the turn",
    )
    run.set_defaults(func=_run)

    events = subparsers.add_parser(
        "events",
        help="print a session's journal",
        description="Print the journal rows of a session (prompt, assistant, tool_call, "
        "tool_result, reminder, compaction, notice, turn_ended, memory_step, mode).",
    )
    events.add_argument("session", help="session id (or a unique prefix)")
    events.add_argument("--after", type=int, default=0, help="only rows with seq > N")
    events.add_argument(
        "--type",
        action="append",
        dest="types",
        default=[],
        choices=ROW_TYPES,
        metavar="TYPE",
        help="only this row type (repeatable): " + ", ".join(ROW_TYPES),
    )
    events.add_argument("--limit", type=positive_int, default=None, help="at most N rows")
    events.add_argument("--json", action="store_true", help="one JSON object per line")
    events.set_defaults(func=_events)

    sessions = subparsers.add_parser(
        "sessions", help="list stored sessions", description="List stored sessions, newest first."
    )
    sessions.add_argument("--cwd", type=Path, default=None, help="only sessions of this workspace")
    sessions.add_argument("--limit", type=positive_int, default=50, help="at most N sessions")
    sessions.add_argument("--cursor", default=None, help="continue from a previous page")
    sessions.add_argument("--json", action="store_true", help="one JSON object")
    sessions.set_defaults(func=_sessions)


# --------------------------------------------------------------------------- run


RESULT_LINES_SHOWN = 12
"""Lines of a tool result `run` prints (the model sees all of it)."""


class _Printer:
    """Readable rendering of session events on stdout."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.in_text = False
        self.errors = 0
        self.session_id = "<session>"  # set once the session exists (hints name it)

    def _line(self, text: str) -> None:
        if self.in_text:
            sys.stdout.write("\n")
            self.in_text = False
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def __call__(self, event: Any) -> None:
        if event.type == "notice" and event.level == "error":
            self.errors += 1
        if self.as_json:
            sys.stdout.write(event.model_dump_json() + "\n")
            sys.stdout.flush()
            return
        kind = event.type
        if kind == "message_chunk":
            sys.stdout.write(event.text)
            sys.stdout.flush()
            self.in_text = True
        elif kind == "thought_chunk":
            pass  # reasoning is journaled; `clio-acp events --type assistant` shows it
        elif kind == "tool_call_started":
            self._line(f"→ {event.title}")
        elif kind == "tool_call_finished":
            mark = "✓" if event.status == "completed" else "✗"
            lines = [ln for ln in event.output.splitlines() if ln.strip()]
            extra = f" (exit {event.exit_code})" if event.exit_code is not None else ""
            self._line(f"  {mark}{extra} {(lines[0] if lines else '')[:160]}")
            for line in lines[1:RESULT_LINES_SHOWN]:
                self._line(f"    {line[:160]}")
            if len(lines) > RESULT_LINES_SHOWN:
                more = len(lines) - RESULT_LINES_SHOWN
                self._line(
                    f"    … {more} more line(s): "
                    f"clio-acp events {self.session_id} --type tool_result --json"
                )
        elif kind == "memory_reminder":
            self._line(f"[memory/{event.channel}] {event.text}")
        elif kind == "notice":
            self._line(f"[{event.level}] {event.text}")
        elif kind == "handoff_offer":
            self._line(
                f"[handoff] {event.source} ({event.count} entries): run /memory seed to import"
            )
        elif kind == "turn_ended":
            self._line(f"[stop: {event.stop_reason}]")


def _settings_store():
    from clio_acp.cli.settings_cmd import load_for_cli

    return load_for_cli()


def _known_targets(settings, paths) -> list[str]:
    """Target ids the router would know for ``settings`` (configured plus embedded)."""
    from clio_acp.models.local import embedded_installed
    from clio_acp.models.routing import resolve_routes

    table = resolve_routes(settings, embedded_installed=embedded_installed(paths))
    return list(table.targets)


async def _run_async(args: argparse.Namespace) -> int:
    from clio_acp.agent.model_port import resolve_chat_model
    from clio_acp.session import SessionManager, SessionNotFound

    paths, store = _settings_store()
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        print("clio-acp run: empty prompt", file=sys.stderr)
        return EXIT_USAGE
    workspace = (args.workspace or Path.cwd()).expanduser().absolute()
    if not workspace.is_dir():
        print(f"clio-acp run: workspace is not a folder: {workspace}", file=sys.stderr)
        return EXIT_USAGE
    if args.target is not None:
        known = _known_targets(store(), paths)
        if args.target not in known:
            listed = ", ".join(known) or "none"
            print(f"clio-acp run: no target {args.target!r} (known: {listed})", file=sys.stderr)
            return EXIT_USAGE
    manager = SessionManager(
        paths=paths,
        settings=store,
        delivers_reminders=False,  # MEMORY_SPEC §10: headless has no reminder consumer
        model_factory=lambda s: resolve_chat_model(
            s, paths=paths, target=args.target, model=args.model
        ),
        max_turn_requests=max(1, args.max_requests),
    )
    printer = _Printer(args.json)
    try:
        if args.session:
            try:
                session = await manager.resume_session(args.session)
            except SessionNotFound as exc:
                print(f"clio-acp run: {exc}", file=sys.stderr)
                return EXIT_ERROR
            if args.mode:
                session.set_mode(args.mode)
        else:
            session = await manager.new_session(workspace, mode=args.mode)
        printer.session_id = session.id
        session.subscribe(printer)
        if session.mode == "ask" and sys.stdin.isatty() and not args.json and args.prompt != "-":
            session.set_permission_handler(functools.partial(_ask_on_terminal, session.cwd))
        if not args.json:
            print(f"[session {session.id} · {session.mode} · {session.cwd}]", file=sys.stderr)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(session.prompt(prompt))
        loop.add_signal_handler(signal.SIGINT, lambda: loop.create_task(session.cancel()))
        try:
            stop = await task
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        if args.json:
            sys.stdout.write(
                json.dumps({"type": "session", "session_id": session.id, "stop_reason": stop})
                + "\n"
            )
        if stop == "cancelled":
            return EXIT_CANCELLED
        return EXIT_ERROR if printer.errors else EXIT_OK
    finally:
        await manager.aclose()


async def _ask_on_terminal(workspace: Path, request: PermissionRequest) -> PermissionDecision:
    from clio_acp.cli.approval import approval_preview

    preview = approval_preview(request.tool_name, request.arguments, Path(workspace))

    def ask() -> str:
        if preview:
            print(f"\n{preview}", file=sys.stderr)
        print(
            f"\nAllow {request.title}? [y]es / [a]lways / [n]o / ne[v]er: ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        return sys.stdin.readline().strip().lower()

    answer = await asyncio.to_thread(ask)
    outcome = {
        "y": "allow_once",
        "yes": "allow_once",
        "a": "allow_always",
        "v": "reject_always",
    }.get(answer, "reject_once")
    return PermissionDecision(outcome=outcome)  # type: ignore[arg-type]


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_run_async(args))


# --------------------------------------------------------------------------- events


async def _open_journal():
    from clio_acp.session.journal import Journal

    paths = resolve_paths()
    if not paths.journal_file.exists():
        return None
    return await Journal.open(paths.journal_file)


async def _resolve_id(journal, wanted: str) -> str | None:
    """The session id ``wanted`` names (an id or a unique prefix), else None.

    Raises ``_AmbiguousPrefix`` when the prefix matches several sessions."""
    record = await journal.get_session(wanted)
    if record is not None:
        return record.id
    matches: list[str] = []
    cursor = None
    while True:
        page, cursor = await journal.list_sessions(cursor=cursor, limit=500)
        matches += [r.id for r in page if r.id.startswith(wanted)]
        if cursor is None:
            break
    if len(matches) > 1:
        raise _AmbiguousPrefix(wanted, matches)
    return matches[0] if matches else None


class _AmbiguousPrefix(Exception):
    def __init__(self, prefix: str, matches: list[str]) -> None:
        super().__init__(prefix)
        self.prefix, self.matches = prefix, matches


def _summary(row) -> str:
    data = row.data
    t = row.type
    if t in ("prompt",):
        return _clip(data.get("text", ""))
    if t == "assistant":
        calls = ", ".join(c.get("name", "?") for c in data.get("tool_calls") or [])
        usage = data.get("usage") or {}
        parts = [_clip(data.get("text", "")) if data.get("text") else ""]
        if calls:
            parts.append(f"calls: {calls}")
        parts.append(f"usage {usage.get('input_tokens', 0)}/{usage.get('output_tokens', 0)}")
        return " · ".join(p for p in parts if p)
    if t == "tool_call":
        return f"{data.get('tool_call_id')} {data.get('title') or data.get('name')}"
    if t == "tool_result":
        ref = f" spill={data['spill_ref']}" if data.get("spill_ref") else ""
        code = f" exit={data['exit_code']}" if data.get("exit_code") is not None else ""
        return f"{data.get('tool_call_id')} {data.get('status')}{code}{ref} {_clip(data.get('output', ''))}"
    if t == "reminder":
        return f"[{data.get('channel')}] {_clip(data.get('text', ''))}"
    if t == "compaction":
        return f"{data.get('tokens_before')} → {data.get('tokens_after')} tokens, kept from seq {data.get('first_kept_seq')}"
    if t == "notice":
        return f"[{data.get('level')}] {_clip(data.get('text', ''))}"
    if t == "turn_ended":
        return str(data.get("stop_reason"))
    if t == "memory_step":
        return _memory_step(data)
    if t == "mode":
        return f"mode {data.get('mode') or data.get('mode_id') or _fields(data)}"
    return _fields(data)


def _memory_step(data: dict) -> str:
    """A memory step as a person reads it: tier, decision, why, triggers, citations."""
    triggers = ", ".join(str(t) for t in data.get("triggerReasons") or []) or "-"
    parts = [
        f"{data.get('tier') or '?'} tier",
        str(data.get("decision") or "no decision"),
        f"({data.get('reason')})" if data.get("reason") else "",
        f"triggers: {triggers}",
    ]
    cited = data.get("citedEntries") or []
    if cited:
        parts.append(f"cites {', '.join(str(c) for c in cited[:3])}")
    writes = data.get("bankWrites")
    if writes:
        parts.append(f"{len(writes) if isinstance(writes, list) else writes} bank write(s)")
    if isinstance(data.get("latencyMs"), (int, float)):
        parts.append(f"{data['latencyMs']:.0f} ms")
    return " ".join(p for p in parts if p)


def _fields(data: dict) -> str:
    """Any other row as ``key: value`` pairs (lists counted, mappings one level deep),
    never a JSON blob."""
    parts: list[str] = []
    for key, value in data.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            inner = ", ".join(
                f"{k} {v}" for k, v in value.items() if isinstance(v, (str, int, float, bool))
            )
            parts.append(f"{key}: {inner or f'{len(value)} field(s)'}")
        elif isinstance(value, list):
            parts.append(f"{key}: {len(value)} item(s)")
        else:
            parts.append(f"{key}: {value}")
    return _clip(" · ".join(parts)) or "(empty)"


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _events_async(args: argparse.Namespace) -> int:
    journal = await _open_journal()
    if journal is None:
        print("clio-acp events: no sessions yet", file=sys.stderr)
        return EXIT_ERROR
    try:
        try:
            session_id = await _resolve_id(journal, args.session)
        except _AmbiguousPrefix as exc:
            shown = ", ".join(exc.matches[:10]) + (" ..." if len(exc.matches) > 10 else "")
            print(
                f"clio-acp events: session prefix {exc.prefix!r} is ambiguous "
                f"({len(exc.matches)} matches): {shown}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if session_id is None:
            print(f"clio-acp events: session not found: {args.session}", file=sys.stderr)
            return EXIT_ERROR
        rows = await journal.events(
            session_id, after=args.after, types=args.types or None, limit=args.limit
        )
        for row in rows:
            if args.json:
                sys.stdout.write(row.model_dump_json() + "\n")
            else:
                sys.stdout.write(f"{row.seq:>5}  {row.at}  {row.type:<12} {_summary(row)}\n")
        if not rows and not args.json:
            print(f"clio-acp events: no matching events in {session_id}", file=sys.stderr)
        return EXIT_OK
    finally:
        await journal.aclose()


def _events(args: argparse.Namespace) -> int:
    return asyncio.run(_events_async(args))


# --------------------------------------------------------------------------- sessions


async def _sessions_async(args: argparse.Namespace) -> int:
    journal = await _open_journal()
    if journal is None:
        if args.json:
            print(json.dumps({"sessions": [], "nextCursor": None}))
        else:
            print(_NO_SESSIONS, file=sys.stderr)
        return EXIT_OK
    try:
        cwd = _norm_cwd(args.cwd)
        try:
            records, cursor = await journal.list_sessions(
                cwd=cwd, cursor=args.cursor, limit=args.limit
            )
        except ValueError as exc:
            print(f"clio-acp sessions: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.json:
            print(
                json.dumps(
                    {"sessions": [r.model_dump() for r in records], "nextCursor": cursor}, indent=2
                )
            )
        else:
            if not records:
                where = f" for {cwd}" if cwd else ""
                print(_NO_SESSIONS.replace("no sessions", f"no sessions{where}"), file=sys.stderr)
            for r in records:
                title = _clip(r.title or "(untitled)", 60)
                print(f"{r.id}  {r.updated_at}  {r.mode:<12} {r.cwd}  {title}")
            if cursor:
                print(f"more: --cursor {cursor}", file=sys.stderr)
        return EXIT_OK
    finally:
        await journal.aclose()


_NO_SESSIONS = (
    'clio-acp sessions: no sessions yet (start one: clio-acp run "…", or from your editor)'
)


def _norm_cwd(cwd: Path | None) -> str | None:
    return os.path.normpath(str(cwd.expanduser().absolute())) if cwd else None


def _sessions(args: argparse.Namespace) -> int:
    return asyncio.run(_sessions_async(args))
