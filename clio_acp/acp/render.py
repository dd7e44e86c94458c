"""Plain-text rendering of the ``/memory`` board and ``/usage`` for the ACP chat.

Owns only presentation of the dicts the core returns (``Session.board()``); it must
not compute anything the board does not already say. Output is Markdown-ish text
that reads well in every ACP client (Zed, JetBrains, CodeCompanion, avante,
agent-shell render agent messages as Markdown or plain text).
"""

from __future__ import annotations

import re
from typing import Any


def _words(key: str) -> str:
    """``llmSteps`` → ``llm steps``, ``step_in_flight`` → ``step in flight``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r" \1", str(key)).replace("_", " ").lower()


def _fmt(value: Any) -> str:
    """A value as a person reads it: never JSON, never a Python repr."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        parts = [f"{_words(k)} {_fmt(v)}" for k, v in value.items() if v not in (None, "", [], {})]
        return ", ".join(parts) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(_fmt(v) for v in value) or "none"
    return str(value)


def _entries(bank: Any) -> list[str]:
    lines: list[str] = []
    if not isinstance(bank, dict):
        return lines
    for kind in ("knowledge", "procedural"):
        items = bank.get(kind) or []
        lines.append(f"**{kind}** ({len(items)})")
        for item in items:
            if isinstance(item, dict):
                lines.append(f"- `{item.get('id', '?')}` {item.get('content', '')}")
            else:
                lines.append(f"- {item}")
    return lines


def render_board(board: dict[str, Any]) -> str:
    """The ``/memory`` board: tier, last decision, bank (never status), activity, spend,
    and pending proposals when the board lists them."""
    lines = ["### Task memory"]
    for key, label in (("enabled", "enabled"), ("tier", "tier"), ("size", "entries")):
        if key in board:
            lines.append(f"- {label}: {_fmt(board[key])}")
    last = board.get("lastDecision", board.get("last_decision"))
    if isinstance(last, dict):
        lines.append(
            f"- last decision: {last.get('decision', '?')} ({last.get('reason', '?')}), "
            f"{last.get('tier', '?')} tier, {', '.join(last.get('triggerReasons') or []) or '-'}"
        )
    elif last is not None:
        lines.append(f"- last decision: {_fmt(last)}")
    in_flight = board.get("stepInFlight", board.get("step_in_flight"))
    if in_flight is not None:
        lines.append(f"- step in flight: {_fmt(in_flight)}")
    bank = board.get("bank")
    if bank:
        lines.append("")
        lines.extend(_entries(bank))
    activity = board.get("activity")
    if activity:
        lines.append("")
        lines.append("**activity**")
        for item in activity[:10] if isinstance(activity, list) else [activity]:
            line = item.get("line") if isinstance(item, dict) else None
            lines.append(f"- {line or _fmt(item)}")
    proposals = board.get("proposals")
    if proposals:
        lines.append("")
        lines.append(
            "**proposals** (approve with `/memory approve ID`, reject with `/memory reject ID`)"
        )
        for item in proposals:
            if isinstance(item, dict):
                lines.append(
                    f"- `{item.get('id', '?')}` [{item.get('scope', '?')}] {item.get('content', '')}"
                )
            else:
                lines.append(f"- {_fmt(item)}")
    spend_line = board.get("spendLine")
    spend = board.get("spend")
    if spend_line:
        lines.append("")
        lines.append(f"**spend** {spend_line}")
    elif spend is not None:
        lines.append("")
        lines.append(f"**spend** {_fmt(spend)}")
    return "\n".join(lines) + "\n"


def render_usage(report: dict[str, Any]) -> str:
    """``/usage``: ``commands.usage`` (chat tokens of this session's usage events as
    this connection saw them, and the memory plane's spend from the board)."""
    chat = report.get("session") or {}
    shown = {"spend": report.get("memory"), "spendLine": report.get("spendLine")}
    return _usage_lines(chat, shown)


def _usage_lines(chat: dict[str, Any], board: dict[str, Any]) -> str:
    lines = ["### Usage"]
    if chat.get("updates"):
        lines.append(
            f"- chat: {chat['updates']} model requests, {chat.get('inputTokens', 0)} input "
            f"tokens ({chat.get('cachedTokens', 0)} cached), "
            f"{chat.get('outputTokens', 0)} output tokens"
        )
    if chat.get("contextSize"):
        lines.append(
            f"- context: {chat.get('contextUsed', 0)} of {chat['contextSize']} tokens in use"
        )
    spend_line = board.get("spendLine")
    spend = board.get("spend")
    if spend_line:
        lines.append(f"- memory spend: {spend_line}")
    elif isinstance(spend, dict):
        for key in ("llmSteps", "inputTokens", "outputTokens", "totalTokens", "timeouts"):
            if key in spend:
                lines.append(f"- memory {key}: {spend[key]}")
    elif spend is not None:
        lines.append(f"- memory spend: {_fmt(spend)}")
    if len(lines) == 1:
        lines.append("- no usage recorded yet")
    return "\n".join(lines) + "\n"


def render_seed(result: Any) -> str:
    """``/memory seed``: ``Seeded N entries from SOURCE.`` (``Session.seed`` result)."""
    if isinstance(result, dict):
        count = result.get("count", result.get("seeded"))
        source = result.get("source")
        if count is not None:
            text = f"Seeded {count} entries" + (f" from {source}" if source else "") + ".\n"
            for why in result.get("rejected") or []:
                text += f"Left out (invalid): {why}\n"
            return text
    return f"Seeded: {result}\n"


def render_promotion(result: Any, entry_id: str, scope: str) -> str:
    """``/memory promote``: the acknowledgement request, or the proposed record id."""
    if result.status == "needs_acknowledgement":
        return (
            "Global scope applies to every repository: repeat with "
            f"`/memory promote {entry_id} global ack` to confirm.\n"
        )
    return (
        f"Proposed {result.record_id} ({scope}, unapproved). "
        f"Approve with /memory approve {result.record_id}.\n"
    )


def render_workspace(result: dict[str, Any]) -> str:
    """``/workspace``: a page of keys, or one value (``commands.workspace``)."""
    if "key" in result:
        return _render_value(result)
    values = result.get("values") or []
    if not values:
        return "No workspace values in this session.\n"
    more = result.get("nextCursor")
    lines = [f"Workspace values ({len(values)}{'+' if more else ''}):"]
    lines += [f"- {v['key']} ({v['chars']} chars, updated {v['updatedAt']})" for v in values]
    if more:
        lines.append(f"More: /workspace --cursor {more}")
    lines.append("Show one with /workspace KEY.")
    return "\n".join(lines) + "\n"


def _render_value(read: dict[str, Any]) -> str:
    head = f"{read['key']} ({read['totalChars']} chars)"
    end = read["nextOffset"] if read["nextOffset"] is not None else read["totalChars"]
    if read["offset"] or read["nextOffset"] is not None:
        head += f", chars {read['offset']}-{end}"
    text = f"{head}:\n\n{read['text']}\n"
    if read["nextOffset"] is not None:
        text += f"\nMore: /workspace {read['key']} --offset {read['nextOffset']}\n"
    return text


def render_event_proposal(result: dict[str, Any], event: str) -> str:
    """``/memory propose-event``: the acknowledgement request, or the proposed record."""
    if result.get("status") == "needs_acknowledgement":
        return (
            "Global scope applies to every repository: repeat with "
            f"`/memory propose-event {event} global ack` to confirm.\n"
        )
    verb = "Proposed" if result.get("created") else "Already proposed:"
    return (
        f"{verb} {result['recordId']} ({result['scope']}, unapproved) from "
        f"{result['evidenceRef']}: {result['lesson']}\n"
        f"Approve with /memory approve {result['recordId']}.\n"
    )
