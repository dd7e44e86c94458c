"""The prompt's text and our slash commands (``/memory``, ``/usage``, ``/handoff``,
``/compact``, ``/workspace``; advertised by ``available_commands_update``).

Owns parsing only: a prompt's content blocks become text, a slash command becomes a
call to ``clio_acp.session.commands`` (shared with the LSP face) whose result
``render`` turns into the reply text. It must not hold memory logic.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from clio_acp import session as core  # names resolve on first use: a fast initialize
from clio_acp.acp import render, updates

if TYPE_CHECKING:
    from clio_acp.paths import Paths
    from clio_acp.session import Session, UsageTotals


def prompt_text(blocks: list[Any]) -> str:
    """The user's prompt as text (``session/prompt`` ``prompt``): text blocks, embedded
    text resources (fenced with their URI) and resource links (as ``@uri``), in order.

    Attached content is not the user's typing: it is neutralised (MEMORY_SPEC §13.8,
    ``neutralize_untrusted``) and fenced with more backticks than it holds, so a file
    can neither close its fence nor pass for a ``Memory:`` line or a
    ``<system-reminder>`` block."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"@{_one_line_uri(block.uri)}")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            uri = _one_line_uri(res.uri)
            if text is not None:
                body = core.neutralize_untrusted(text)
                fence = core.fence_for(body + uri)
                parts.append(f"\n{fence}{uri}\n{body}\n{fence}\n")
            else:
                parts.append(f"@{uri}")
    return "\n".join(p for p in parts if p)


def _one_line_uri(uri: Any) -> str:
    return core.neutralize_untrusted(" ".join(str(uri).split()))


_SLASH = re.compile(r"^\s*/([a-z][a-z0-9_-]*)\b(.*)$", re.S)


def parse_slash(text: str) -> tuple[str, list[str]] | None:
    """``("memory", ["approve", "r1"])`` for ``/memory approve r1``; ``None`` when the
    prompt is not one of our slash commands (unknown ones go to the model)."""
    match = _SLASH.match(text)
    if match is None:
        return None
    name = match.group(1)
    if name not in {c.name for c in updates.SLASH_COMMANDS}:
        return None
    try:
        args = shlex.split(match.group(2))
    except ValueError:
        args = match.group(2).split()
    return name, args


PROMOTE_USAGE = "usage: /memory promote ENTRY_ID repo|global [ack]"
PROPOSE_EVENT_USAGE = "usage: /memory propose-event EVENT|SESSION:EVENT repo|global [ack] [TEXT…]"
WORKSPACE_USAGE = "usage: /workspace [KEY [--offset N]] [--cursor C]"
UNKNOWN_VERB = (
    "unknown verb {verb!r}; use seed, approve ID, reject ID, promote ENTRY repo|global "
    "or propose-event EVENT repo|global"
)


async def run_slash_command(
    session: Session, paths: Paths, name: str, args: list[str], *, usage: UsageTotals
) -> str:
    """Run slash command ``/name args`` against ``session``; the reply text.

    Raises ``ValueError`` for bad usage and ``core.commands.CommandError`` for what the
    verb refuses (unknown ids, memory off): the message is shown, the session goes on.
    """
    if name == "memory":
        return await _memory(session, paths, args)
    if name == "usage":
        return render.render_usage(core.commands.usage(session, usage))
    if name == "handoff":
        return f"Handoff written: {await core.commands.handoff(session)}\n"
    if name == "compact":
        await core.commands.compact(session)
        return "Compaction done.\n"
    if name == "workspace":
        key, offset, cursor = _workspace_args(args)
        result = await core.commands.workspace(session, key, offset=offset, cursor=cursor)
        return render.render_workspace(result)
    raise ValueError(f"unknown command /{name}")


async def _memory(session: Session, paths: Paths, args: list[str]) -> str:
    if not args:
        return render.render_board(await core.commands.memory_board(session, paths))
    verb, rest = args[0], args[1:]
    if verb == "seed":
        return render.render_seed(await core.commands.seed(session))
    if verb in ("approve", "reject"):
        if len(rest) != 1:
            raise ValueError(f"usage: /memory {verb} RECORD_ID")
        decide = core.commands.approve if verb == "approve" else core.commands.reject
        outcome = await decide(paths, rest[0])
        return f"{'Approved' if verb == 'approve' else 'Rejected'} {outcome.record_id}.\n"
    if verb == "promote":
        ack = rest[2:] == ["ack"]
        if (
            len(rest) not in (2, 3)
            or rest[1] not in ("repo", "global")
            or (len(rest) == 3 and not ack)
        ):
            raise ValueError(PROMOTE_USAGE)
        result = await core.commands.promote(
            session, paths, rest[0], rest[1], acknowledge_global=ack
        )
        return render.render_promotion(result, rest[0], rest[1])
    if verb == "propose-event":
        return await _propose_event(session, paths, rest)
    raise ValueError(UNKNOWN_VERB.format(verb=verb))


async def _propose_event(session: Session, paths: Paths, rest: list[str]) -> str:
    """``/memory propose-event EVENT repo|global [ack] [TEXT…]``."""
    if len(rest) < 2 or rest[1] not in ("repo", "global"):
        raise ValueError(PROPOSE_EVENT_USAGE)
    ack = rest[1] == "global" and rest[2:3] == ["ack"]
    words = rest[3:] if ack else rest[2:]
    result = await core.commands.propose_event(
        session,
        paths,
        rest[0],
        rest[1],
        acknowledge_global=ack,
        content=" ".join(words) or None,
    )
    return render.render_event_proposal(result, rest[0])


def _workspace_args(args: list[str]) -> tuple[str | None, int, str | None]:
    """(key, offset, cursor) of ``/workspace [KEY] [--offset N] [--cursor C]``."""
    key: str | None = None
    offset, cursor = 0, None
    words = iter(args)
    for word in words:
        if word in ("--offset", "--cursor"):
            value = next(words, None)
            if value is None:
                raise ValueError(WORKSPACE_USAGE)
            if word == "--cursor":
                cursor = value
            elif value.isdigit():
                offset = int(value)
            else:
                raise ValueError(WORKSPACE_USAGE)
        elif key is None:
            key = word
        else:
            raise ValueError(WORKSPACE_USAGE)
    return key, offset, cursor
