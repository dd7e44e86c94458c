"""The rules tier's failure memory (MEMORY_SPEC §4, §12.1): fast paths against their
definitions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clio_acp.memory.rules import FAILURE_MAP_CAP, RepeatRecord, RulesMemory, _least_recent


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=40))
def test_least_recent_key_is_the_first_smallest_last_step(steps):
    repeats = {
        (f"fp{i}", "sig"): RepeatRecord(count=1, epoch=0, first_step=s, last_step=s)
        for i, s in enumerate(steps)
    }
    assert _least_recent(repeats) == min(repeats, key=lambda k: repeats[k].last_step)


def test_count_repeat_drops_the_least_recent_key_past_the_cap():
    memory = RulesMemory()
    cap = 4 * FAILURE_MAP_CAP
    for step in range(cap + 5):
        memory.count_repeat((f"fp{step % (cap + 3)}", "sig"), step, memory.state_epoch)
    assert len(memory.repeats) == cap
    kept_steps = sorted(r.last_step for r in memory.repeats.values())
    assert kept_steps == list(range(5, cap + 5))
