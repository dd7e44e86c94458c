"""Memory wiring of sessions: banks saved per session and restored on load/resume,
fork starts empty, handoff artifact and seed, the handoff offer after resume."""

from __future__ import annotations

from clio_acp.paths import resolve_paths
from clio_acp.session.manager import SessionManager
from tests.support.model_server import Reply


async def test_load_resume_fork_keep_banks_separate(
    manager, workspace, model_server, settings_getter
):
    a = await manager.new_session(workspace)
    b = await manager.new_session(workspace)
    a_entry = a.memory.task_bank().save("knowledge", "A: the API lives in src/api.py")
    b.memory.task_bank().save("knowledge", "B: use pytest -x")
    await a.save_bank()
    await b.save_bank()
    a_id, b_id = a.id, b.id
    await manager.aclose()

    other = SessionManager(paths=resolve_paths(), settings=settings_getter)
    try:
        resumed_a = await other.resume_session(a_id)
        loaded_b, _events = await other.load_session(b_id)
        fork_a = await other.fork_session(a_id)
        contents = lambda s: [e.content for e in s.memory.task_bank().knowledge]  # noqa: E731
        assert contents(resumed_a) == ["A: the API lives in src/api.py"]
        assert contents(loaded_b) == ["B: use pytest -x"]
        assert contents(fork_a) == []
        # Same ids after restore (MEMORY_SPEC §12 item 7).
        assert resumed_a.memory.task_bank().knowledge[0].id == a_entry.id
        # The restored bank reaches the model once, as a restore reminder.
        model_server.push(Reply(text="ok"))
        await resumed_a.prompt("continue")
        sent = model_server.bodies[-1]["messages"]
        reminders = [
            m for m in sent if m["role"] == "user" and m["content"].startswith("<system-reminder>")
        ]
        assert len(reminders) == 1 and "A: the API lives in src/api.py" in reminders[0]["content"]
        assert "B: use pytest" not in str(sent)
    finally:
        await other.aclose()


async def test_handoff_then_resume_offers_it_and_seed_imports(
    manager, workspace, model_server, recorder
):
    a = await manager.new_session(workspace)
    model_server.push(Reply(text="working"))
    await a.prompt("fix the flaky test")
    a.memory.task_bank().save("procedural", "run tests with -p no:cacheprovider")
    path = await a.handoff()
    assert path.parent == workspace / ".clio-coder" / "handoffs" and path.name.startswith(
        "handoff-"
    )
    text = path.read_text()
    assert "fix the flaky test" in text and "run tests with -p no:cacheprovider" in text

    b = await manager.new_session(workspace)
    await b.save_bank()
    await manager.close_session(b.id)
    resumed = await manager.resume_session(b.id)
    resumed.subscribe(recorder)

    offer = await recorder.wait_for("handoff_offer")
    assert offer and offer[0].source == path.name and offer[0].count == 1
    result = await resumed.seed()
    assert result == {"status": "seeded", "seeded": 1, "skipped": 0, "source": path.name}
    assert await resumed.seed() == {
        "status": "seeded",
        "seeded": 0,
        "skipped": 1,
        "source": path.name,
    }


async def test_the_handoff_offer_counts_only_what_seeding_would_add(manager, workspace):
    """Issue 21 item 5: reopening the session that wrote the handoff (its bank already
    holds the entries) offers nothing; another session is offered only the new ones."""
    a = await manager.new_session(workspace)
    bank = a.memory.task_bank()
    bank.save("procedural", "run tests with -p no:cacheprovider")
    bank.save("knowledge", "the API lives in src/api.py")
    await a.handoff()
    await a.save_bank()
    b = await manager.new_session(workspace)
    b.memory.task_bank().save("knowledge", "the API lives in src/api.py")
    await b.save_bank()
    for session in (a, b):
        await manager.close_session(session.id)

    _same, same_events = await manager.load_session(a.id)
    _other, other_events = await manager.load_session(b.id)
    assert [e for e in same_events if e.type == "handoff_offer"] == []
    [offer] = [e for e in other_events if e.type == "handoff_offer"]
    assert offer.count == 1
