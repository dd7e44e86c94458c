"""The async durable-memory façade used by the session core and the faces (MEMORY_SPEC §6, §10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.durable import DurableMemory
from clio_acp.memory.promotion import PromotionError
from clio_acp.memory.store import RecordNotFound
from clio_acp.paths import resolve_paths


@pytest.fixture
def durable() -> DurableMemory:
    return DurableMemory.from_paths(resolve_paths())


@pytest.fixture
def bank() -> TaskMemoryBank:
    bank = TaskMemoryBank()
    bank.save("knowledge", "Always run ruff before landing.")
    bank.update_status("private")
    return bank


async def test_propose_approve_then_the_prompt_carries_it_only_in_that_repo(
    durable: DurableMemory, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    other = tmp_path / "other"
    repo.mkdir()
    other.mkdir()
    answer = await durable.propose_entry(
        bank, session_id="s1", entry_id="tm-k-1", scope="repo", cwd=repo
    )
    assert answer["status"] == "proposed" and answer["created"] is True
    assert (await durable.prompt_section(repo)).text == ""  # proposals never reach a prompt
    await durable.approve(answer["recordId"])
    section = await durable.prompt_section(repo)
    assert section.selected_ids == [answer["recordId"]]
    assert "Always run ruff before landing." in section.text
    assert (await durable.prompt_section(other)).text == ""
    await durable.reject(answer["recordId"])
    assert (await durable.prompt_section(repo)).text == ""


async def test_global_without_acknowledgement_writes_nothing(
    durable: DurableMemory, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    answer = await durable.propose_entry(
        bank, session_id="s1", entry_id="tm-k-1", scope="global", cwd=tmp_path
    )
    assert answer == {"status": "needs_acknowledgement"}
    assert await durable.list_records() == []
    answer = await durable.propose_entry(
        bank,
        session_id="s1",
        entry_id="tm-k-1",
        scope="global",
        cwd=tmp_path,
        acknowledge_global=True,
    )
    assert answer["status"] == "proposed"


async def test_status_and_unknown_entries_are_refused(
    durable: DurableMemory, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    with pytest.raises(PromotionError, match="status"):
        await durable.propose_entry(
            bank, session_id="s1", entry_id=bank.status.id, scope="repo", cwd=tmp_path
        )
    with pytest.raises(PromotionError, match="tm-k-9"):
        await durable.propose_entry(
            bank, session_id="s1", entry_id="tm-k-9", scope="repo", cwd=tmp_path
        )
    with pytest.raises(RecordNotFound):
        await durable.approve("mem-0000000000000000")


async def test_invalid_store_gives_an_empty_prompt_section(
    durable: DurableMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    durable.store.path.parent.mkdir(parents=True)
    durable.store.path.write_text("not json")
    section = await durable.prompt_section(tmp_path)
    assert section.text == ""
    assert "invalid and was left untouched" in caplog.text
    assert durable.store.path.read_text() == "not json"


async def test_auto_proposal_through_the_facade(
    durable: DurableMemory, bank: TaskMemoryBank, tmp_path: Path
) -> None:
    outcome = await durable.propose_injected(
        tier="llm", session_id="s1", cwd=str(tmp_path), entries=[bank.get("tm-k-1")]
    )
    assert outcome.created == 1
    rules = await durable.propose_injected(
        tier="rules", session_id="s1", cwd=str(tmp_path), entries=[bank.get("tm-k-1")]
    )
    assert rules.records == []
