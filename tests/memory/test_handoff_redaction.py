"""Handoff snapshots: redaction never breaks the limit; one bad entry costs only itself."""

from __future__ import annotations

import json

from clio_acp.memory.bank import MAX_CONTENT_CHARS, TaskMemoryBank
from clio_acp.memory.handoff import (
    HandoffEntry,
    HandoffSnapshot,
    HandoffSource,
    parse_handoff_snapshot,
    render_handoff_snapshot,
    seed_from_newest_handoff,
)
from clio_acp.paths import handoffs_dir
from tests.support.secrets import corpus, leaked

TS = "2026-11-29T22:00:00.000Z"


def _entry(entry_id: str, content: str) -> HandoffEntry:
    return HandoffEntry(entry_id, content, 0, TS, TS)


def _snapshot(*contents: str) -> HandoffSnapshot:
    entries = tuple(_entry(f"tm-k-{i}", c) for i, c in enumerate(contents))
    return HandoffSnapshot(2, entries, (), HandoffSource.for_session("s1"), (0, ()))


def test_redaction_cannot_push_an_entry_past_the_limit() -> None:
    # 1,199 characters whose short secret becomes a longer marker.
    content = "x" * 1170 + " password=hunter2hunter2"
    content += "y" * (1199 - len(content))
    assert len(content) == 1199
    parsed = parse_handoff_snapshot(render_handoff_snapshot(_snapshot(content, "other fact")))
    assert parsed is not None and parsed.rejected == ()
    assert [len(e.content) <= MAX_CONTENT_CHARS for e in parsed.knowledge] == [True, True]
    assert "hunter2" not in parsed.knowledge[0].content


def test_every_corpus_secret_is_gone_from_the_rendered_snapshot() -> None:
    text = render_handoff_snapshot(_snapshot(*(s.text for s in corpus()[:20])))
    assert leaked(text) == []
    rest = render_handoff_snapshot(_snapshot(*(s.text for s in corpus()[20:40])))
    assert leaked(rest) == []


def test_seed_imports_the_good_entries_and_names_the_bad_one(tmp_path) -> None:
    good = {"id": "a", "content": "fact one", "injectionCount": 0, "createdAt": TS}
    good["lastTouchedAt"] = TS
    bad = dict(good, id="b", content="z" * 1300)
    other = dict(good, id="c", content="fact two")
    data = json.loads(render_handoff_snapshot(_snapshot("seed")).split("\n")[1])
    data["knowledge"] = [good, bad, other]
    folder = handoffs_dir(tmp_path)
    folder.mkdir(parents=True)
    body = "```clio-coder-task-memory\n" + json.dumps(data) + "\n```\n"
    (folder / "handoff-1.md").write_text(body, encoding="utf-8")
    bank = TaskMemoryBank()
    outcome = seed_from_newest_handoff(bank, tmp_path, enabled=True).to_dict()
    assert outcome["seeded"] == 2 and outcome["skipped"] == 0
    assert outcome["rejected"] == ["knowledge[1]: content is 1300 characters (limit 1200)"]
    assert [e.content for e in bank.knowledge] == ["fact one", "fact two"]
