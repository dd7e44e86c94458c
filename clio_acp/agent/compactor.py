"""Compaction of a session's model view, orchestrated (seed ``004``; MEMORY_SPEC §12
items 6 and 10).

The pure decisions (when, where to cut, what to spill) live in
``context/compaction.py``; this module runs them against a live loop: it asks the
model for the summary (falling back to the previous summary plus the user requests
of the removed part), spills the tail's largest tool results when the view is still
above the retain share, journals the ``compaction`` row, tells the memory hooks
(post-compaction restore) and keeps the progress guard.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clio_acp.agent import history
from clio_acp.agent.memory_hooks import InjectReminder
from clio_acp.agent.model_port import ChatModel, ModelError
from clio_acp.agent.turn import ContextRules
from clio_acp.context import compaction as cmp
from clio_acp.context.spill import spill

if TYPE_CHECKING:
    from clio_acp.agent.loop import AgentLoop

log = logging.getLogger(__name__)

PROGRESS_REMINDER = (
    "Memory: the context was compacted twice in a row with no file change in between; "
    "progress so far ({progress}). Make concrete progress or change the approach."
)
"""MEMORY_SPEC §12 item 10: the reminder after two compactions without progress."""


async def maybe_compact(loop: AgentLoop, *, force: bool = False) -> bool:
    """Compact when the view reaches the trigger share of the window (or ``force``),
    unless this turn already compacted without reducing the view. Returns True when
    a compaction was journaled."""
    rules = loop.context_rules()
    window = loop.model.context_window
    before = loop.transcript.view_tokens(loop.system_text(), loop.tool_schemas())
    if not force and not cmp.should_compact(before, window, rules.trigger_ratio):
        return False
    if not loop.guard.may_compact():
        log.info("compaction skipped: the previous one this turn did not reduce the view")
        return False
    return await compact(loop, window=window, before=before, rules=rules)


async def compact(
    loop: AgentLoop,
    *,
    window: int | None = None,
    before: int | None = None,
    rules: ContextRules | None = None,
) -> bool:
    """Compact now: a summary of the removed part plus the retained tail. Returns False
    when no safe cut removes anything. A failed summary keeps the previous one (the
    row says ``summary_failed``). ``window`` and ``before`` are tokens (estimated)."""
    rules = rules or loop.context_rules()
    window = window or loop.model.context_window
    system, tools = loop.system_text(), loop.tool_schemas()
    rows = loop.transcript.rows
    pairs = loop.transcript.pairs()
    if before is None:
        before = cmp.view_tokens(system, [m for _, m in pairs], tools)
    plan = cmp.plan_compaction(
        pairs,
        window_tokens=window,
        retain_ratio=rules.retain_ratio,
        overhead_tokens=cmp.view_tokens(system, [], tools),
        has_summary=history.latest_compaction(rows) is not None,
        turn_prompt_seq=loop.turn_prompt_seq,
        next_seq=(rows[-1].seq if rows else 0) + 1,
    )
    if plan is None:
        return False
    summary, failed = await summarize(loop.model, loop.transcript.summary(), plan.removed, window)
    workspace_keys = await _workspace_keys(loop)
    summary_msg = {
        "role": "user",
        "content": cmp.SUMMARY_PREFIX + summary + history.workspace_note(workspace_keys),
    }
    tail, spilled = plan.tail, {}
    after = cmp.view_tokens(system, [summary_msg, *tail], tools)
    if cmp.exceeds_retain(after, window, rules.retain_ratio):
        spilled = await _spill_tail(loop, tail)
        if spilled:
            tail = cmp.with_tool_outputs(tail, spilled)
            after = cmp.view_tokens(system, [summary_msg, *tail], tools)
    await loop.transcript.add(
        history.ROW_COMPACTION,
        {
            "summary": summary,
            "first_kept_seq": plan.first_kept_seq,
            "tokens_before": before,
            "tokens_after": after,
            "removed_messages": len(plan.removed),
            "summary_failed": failed,
            "spilled": spilled,
            "workspace_keys": workspace_keys,
        },
    )
    await _after_compaction(loop, before, after, failed)
    return True


async def summarize(
    model: ChatModel, previous: str | None, removed: Sequence[dict[str, Any]], window: int
) -> tuple[str, bool]:
    """``(summary, failed)``: the model's summary of ``removed`` (with ``previous``
    folded in), or on a model error or an empty answer the fallback summary and
    ``failed=True``. Never raises ``ModelError``."""
    try:
        sys_text, user_text = cmp.summary_request(previous, removed, window)
        answer = await model.complete(sys_text, user_text, max_tokens=cmp.SUMMARY_MAX_TOKENS)
        summary = answer.strip()
        if not summary:
            raise ModelError("empty summary")
        return summary, False
    except ModelError as exc:
        log.warning("compaction summary failed: %s", exc)
        return cmp.fallback_summary(previous, removed), True


async def _spill_tail(loop: AgentLoop, tail: Sequence[dict[str, Any]]) -> dict[str, str]:
    """§12 item 10: the view could not get below the retain share: spill the tail's
    largest tool results (with read-back); returns tool_call_id → visible preview."""
    already = {
        r.data.get("tool_call_id")
        for r in loop.transcript.rows
        if r.type == history.ROW_TOOL_RESULT and r.data.get("spill_ref")
    }
    spilled: dict[str, str] = {}
    for call_id, text in cmp.tail_spill_candidates(tail, exclude=already):
        result = await spill(loop.spill_store, loop.session_id, call_id, text)
        spilled[call_id] = result.visible
    return spilled


async def _after_compaction(loop: AgentLoop, before: int, after: int, failed: bool) -> None:
    """Drop reminders that lost their authority, tell the memory hooks, keep the
    progress guard, and tell the user."""
    # §12.6: reminders buffered before the compaction lose their authority.
    loop.pending_reminders = [r for r in loop.pending_reminders if r.channel == "restore"]
    loop.queue_effects(
        loop.memory.on_compaction(
            loop.session_id,
            {"stage": "compaction", "tokensBefore": before, "tokensAfter": after},
        )
        or []
    )
    if loop.guard.record(before, after):
        status = loop.memory.bank_status()
        progress = f"status: {status}" if status else "no status recorded yet"
        loop.pending_reminders.append(
            InjectReminder(
                text=PROGRESS_REMINDER.format(progress=progress),
                trigger="compaction_without_progress",
            )
        )
    note = f"Context compacted: {before} → {after} estimated tokens"
    if failed:
        note += " (summary failed; the previous summary was kept)"
    await loop.notice("info", note)


async def _workspace_keys(loop: AgentLoop) -> list[str]:
    """The first keys of the named text workspace, named in the compaction summary
    so the model still knows what it kept (the values stay in the journal)."""
    if loop.values is None:
        return []
    try:
        rows = await loop.values.workspace_list(
            loop.session_id, limit=history.WORKSPACE_NOTE_KEYS + 1
        )
    except Exception:
        log.debug("workspace keys unavailable for the summary", exc_info=True)
        return []
    return [row[0] for row in rows]
