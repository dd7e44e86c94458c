"""Bank content is redacted when written (issue 17): every view of the bank is clean."""

from __future__ import annotations

import pytest

from clio_acp.memory.bank import MAX_CONTENT_CHARS, TaskMemoryBank, normalize_content
from tests.support.secrets import corpus, leaked


def test_saved_requirement_loses_its_secret() -> None:
    bank = TaskMemoryBank()
    entry = bank.save(
        "knowledge", "Requirement from the user: You must use aws key AKIAQWERTYUIOPASDFGH"
    )
    assert entry.content == (
        "Requirement from the user: You must use aws key [redacted:aws-access-key]"
    )
    assert "AKIA" not in bank.render(10_000)


@pytest.mark.parametrize("sample", corpus(), ids=lambda s: s.format)
def test_every_corpus_format_is_redacted_on_save_status_and_restore(sample) -> None:
    bank = TaskMemoryBank()
    bank.save("procedural", sample.text)
    bank.update_status("Goal: " + sample.text)
    snapshot = bank.snapshot()
    assert leaked(repr(snapshot), (sample,)) == []
    raw = TaskMemoryBank().snapshot()
    raw["knowledge"] = [dict(snapshot["procedural"][0], kind="knowledge", content=sample.text)]
    restored = TaskMemoryBank()
    restored.restore(raw)
    assert leaked(repr(restored.snapshot()), (sample,)) == []


def test_content_is_cut_after_redaction() -> None:
    text = "x" * 1190 + " AKIAQWERTYUIOPASDFGH"
    out = normalize_content(text)
    assert len(out) <= MAX_CONTENT_CHARS and "AKIA" not in out
