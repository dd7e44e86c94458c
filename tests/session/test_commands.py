"""The protocol-neutral verbs both faces call (``clio_acp.session.commands``): one
definition of pending, one promotion path, one error text per refusal, usage counted
once."""

from __future__ import annotations

import pytest

from clio_acp.paths import resolve_paths
from clio_acp.session import CommandError, UsageTotals, UsageUpdate, commands


async def test_promote_refuses_an_unknown_entry_with_one_message(manager, workspace):
    session = await manager.new_session(workspace)
    with pytest.raises(CommandError) as caught:
        await commands.promote(session, resolve_paths(), "k-nope", "global")
    assert str(caught.value) == "no knowledge or procedural entry 'k-nope' in this session's bank"


async def test_promote_refuses_a_bad_scope_before_touching_the_bank(manager, workspace):
    session = await manager.new_session(workspace)
    entry = session.memory.task_bank().save("knowledge", "tests run with -p no:cacheprovider")
    with pytest.raises(CommandError, match="scope must be repo or global"):
        await commands.promote(session, resolve_paths(), entry.id, "team")


async def test_global_promotion_needs_acknowledgement_then_is_pending_until_approved(
    manager, workspace
):
    paths = resolve_paths()
    session = await manager.new_session(workspace)
    entry = session.memory.task_bank().save("procedural", "run pytest with -x first")

    asked = await commands.promote(session, paths, entry.id, "global")
    assert asked.to_wire() == {"status": "needs_acknowledgement"}
    assert await commands.pending_proposals(paths) == []

    done = await commands.promote(session, paths, entry.id, "global", acknowledge_global=True)
    assert done.status == "proposed" and done.created
    pending = await commands.pending_proposals(paths)
    assert [(p.record_id, p.entry_id, p.session_id) for p in pending] == [
        (done.record_id, entry.id, session.id)
    ]
    board = await commands.memory_board(session, paths)
    assert board["proposals"] == [
        {"id": done.record_id, "scope": "global", "content": pending[0].content}
    ]

    outcome = await commands.approve(paths, done.record_id)
    assert (outcome.record_id, outcome.status) == (done.record_id, "approved")
    assert await commands.pending_proposals(paths) == []


async def test_approve_and_reject_of_an_unknown_record_say_so(manager, workspace):
    for verb in (commands.approve, commands.reject):
        with pytest.raises(CommandError) as caught:
            await verb(resolve_paths(), "mem-nope")
        assert str(caught.value) == "no durable memory record 'mem-nope'"


async def test_an_unreadable_records_file_is_shown_on_the_board_not_raised(manager, workspace):
    paths = resolve_paths()
    paths.records_file.parent.mkdir(parents=True, exist_ok=True)
    paths.records_file.write_text("{not json", encoding="utf-8")
    session = await manager.new_session(workspace)
    with pytest.raises(CommandError, match="unreadable"):
        await commands.pending_proposals(paths)
    board = await commands.memory_board(session, paths)
    assert board["proposals"][0]["id"] == "?"
    assert board["proposals"][0]["content"].startswith("unreadable:")


async def test_usage_counts_each_update_once_and_keeps_the_latest_context(manager, workspace):
    session = await manager.new_session(workspace)
    totals = UsageTotals()
    totals.add(
        UsageUpdate(session_id=session.id, input_tokens=10, output_tokens=2, context_size=100)
    )
    totals.add(UsageUpdate(session_id=session.id, input_tokens=5, cached_tokens=3, context_used=40))
    report = commands.usage(session, totals)
    assert report["sessionId"] == session.id
    assert report["session"] == {
        "inputTokens": 15,
        "outputTokens": 2,
        "cachedTokens": 3,
        "contextUsed": 40,
        "contextSize": 100,
        "updates": 2,
    }
    assert commands.usage(None, UsageTotals())["sessionId"] is None


async def test_handoff_writes_the_artifact_in_the_workspace(manager, workspace):
    session = await manager.new_session(workspace)
    session.memory.task_bank().save("knowledge", "the API lives in src/api.py")
    path = await commands.handoff(session)
    assert path.parent == workspace / ".clio-coder" / "handoffs"
    assert "the API lives in src/api.py" in path.read_text(encoding="utf-8")
