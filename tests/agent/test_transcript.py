"""The transcript's model view is maintained incrementally and always equals the
full projection of its rows (issue 18 item 2)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from clio_acp.agent import history
from clio_acp.agent.transcript import Transcript
from clio_acp.context.compaction import view_tokens


@dataclass
class FakeRow:
    seq: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)


class Writer:
    def __init__(self) -> None:
        self.seq = 0

    async def __call__(self, type_: str, data: dict[str, Any]) -> FakeRow:
        self.seq += 1
        return FakeRow(self.seq, type_, data)


def _script(rng: random.Random, turns: int) -> list[tuple[str, dict[str, Any]]]:
    """A plausible session: prompts, tool batches (some results missing: a cancel),
    reminders (some while calls are pending), notices, compactions with spills."""
    out: list[tuple[str, dict[str, Any]]] = []
    call = 0
    seen_calls: list[str] = []
    for turn in range(turns):
        out.append((history.ROW_PROMPT, {"text": f"prompt {turn} " * rng.randint(1, 30)}))
        for _ in range(rng.randint(0, 3)):
            ids = [f"c{call + i}" for i in range(rng.randint(0, 4))]
            call += len(ids)
            calls = [{"id": i, "name": "read_file", "arguments": '{"path": "a"}'} for i in ids]
            out.append((history.ROW_ASSISTANT, {"text": "thinking", "tool_calls": calls}))
            for call_id in ids:
                out.append((history.ROW_TOOL_CALL, {"tool_call_id": call_id, "name": "read_file"}))
                if rng.random() < 0.15:
                    reminder = {"text": "Memory: note", "to_model": True}
                    out.append((history.ROW_REMINDER, reminder))
                if rng.random() < 0.9:  # else: cancelled, no result
                    output = "x" * rng.randint(0, 400)
                    out.append(
                        (history.ROW_TOOL_RESULT, {"tool_call_id": call_id, "output": output})
                    )
                    seen_calls.append(call_id)
            if rng.random() < 0.1:
                out.append((history.ROW_NOTICE, {"level": "info", "text": "n"}))
        out.append((history.ROW_ASSISTANT, {"text": f"answer {turn}"}))
        out.append((history.ROW_TURN_ENDED, {"stop_reason": "end_turn"}))
        if seen_calls and rng.random() < 0.2:
            spilled = {rng.choice(seen_calls): "[spilled]"}
            first_kept = max(1, len(out) - rng.randint(1, 12))
            out.append(
                (
                    history.ROW_COMPACTION,
                    {
                        "summary": f"summary {turn}",
                        "first_kept_seq": first_kept,
                        "spilled": spilled,
                    },
                )
            )
    return out


async def test_incremental_view_equals_the_full_projection_after_every_row():
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    for seed in range(12):
        rng = random.Random(seed)
        transcript = Transcript([], Writer())
        for type_, data in _script(rng, 25):
            await transcript.add(type_, data)
            assert transcript.pairs() == history.project(transcript.rows)
            assert transcript.view() == history.messages(transcript.rows)
            assert transcript.view_tokens("system", tools) == view_tokens(
                "system", history.messages(transcript.rows), tools
            )


async def test_a_loaded_transcript_continues_incrementally():
    rng = random.Random(99)
    script = _script(rng, 20)
    writer = Writer()
    rows = [await writer(t, d) for t, d in script[: len(script) // 2]]
    transcript = Transcript(rows, writer)
    for type_, data in script[len(script) // 2 :]:
        await transcript.add(type_, data)
    assert transcript.view() == history.messages(transcript.rows)
