"""``replay_recording`` behaves like a live session where it matters (issue 14 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clio_acp.agent.recordings import RecordedCall, RecordedTurn, Recording
from clio_acp.agent.replay import replay_recording


def _blind_loop(repeats: int) -> Recording:
    recording = Recording(Path("synthetic"), "mini-swe-agent", "blind-loop")
    recording.turns.append(RecordedTurn(user_text="Make the tests pass."))
    for index in range(1, repeats + 1):
        call = RecordedCall(
            index=index,
            tool_name="bash",
            args={"command": "python repro.py"},
            output="Traceback (most recent call last):\nValueError: boom",
            exit_code=1,
            is_error=True,
            kind="execute",
        )
        recording.turns.append(RecordedTurn(calls=[call]))
    return recording


async def test_loop_stop_is_reported_once_and_the_key_stays_silent_after_it():
    report = await replay_recording(_blind_loop(9))
    stops = [r for r in report.reminders if r.channel == "stop"]
    assert [s.step for s in stops] == [5]
    assert not [r for r in report.reminders if r.step > 5]
    # Before the stop the blind retry was named at its second occurrence.
    assert report.reminders[0].step == 2


# -- regressions from adversarial input ----------------------------------------


DEEP_JSON = "[" * 100_000


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.json", DEEP_JSON),
        ("null-message.traj.json", '{"messages": [null, 5]}'),
    ],
    ids=["deep-nesting", "null-message"],
)
def test_replay_reports_a_malformed_trajectory_without_traceback(invoke_cli, tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    done = invoke_cli("replay", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr


# -- reproducible replay (issue 18 part 3) ----------------------------------------------

_TIE_PRONE = [  # many bank writes per millisecond of wall clock: their order used to vary
    "pma-tb2/git-multibranch/memory-v3-opus/trajectory_agent.steps.jsonl",
    "pma-tb2/sqlite-with-gcov/memory-v3-opus/trajectory_agent.steps.jsonl",
]


async def test_replay_bank_times_come_from_the_replay_clock_and_repeat_exactly():
    from clio_acp.agent.replay import REPLAY_EPOCH, replay_file
    from clio_acp.timestamps import parse_timestamp
    from tests.conftest import SHARED

    for name in _TIE_PRONE:
        path = SHARED / "trajectories" / name
        runs = [[r.to_dict() for r in await replay_file(path, compact_every=5)] for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]  # byte for byte, timestamps included
        bank = runs[0][0]["bank"]
        entries = bank["knowledge"] + bank["procedural"]
        created = [parse_timestamp(e["createdAt"]) for e in entries]
        assert created and all(REPLAY_EPOCH < t for t in created)
        assert len(set(created)) == len(created)  # no two writes tie on time
        assert max(created) - REPLAY_EPOCH < __import__("datetime").timedelta(minutes=1)


def test_the_replay_clock_steps_one_millisecond_per_reading():
    from datetime import timedelta

    from clio_acp.agent.replay import REPLAY_EPOCH, ReplayClock

    clock = ReplayClock()
    assert [clock() - REPLAY_EPOCH for _ in range(3)] == [
        timedelta(milliseconds=n) for n in (1, 2, 3)
    ]


async def test_a_lone_surrogate_in_a_recorded_output_leaves_every_hook_working(tmp_path, caplog):
    """A "\\ud800" escape in an output used to make after_tool fail on hashing it (its
    effects lost, "memory hook after_tool failed" logged); it replays as U+FFFD."""
    import logging

    from clio_acp.agent.replay import replay_file
    from tests.conftest import SHARED

    source = (
        SHARED / "trajectories" / "mini-swe-agent-gemini3-swebv" / "django__django-16263.traj.json"
    )
    data = source.read_text(encoding="utf-8")
    assert data.count("<output>") > 3
    lone, replaced = tmp_path / "lone.traj.json", tmp_path / "replaced.traj.json"
    lone.write_text(data.replace("<output>", "<output>\\ud800", 3), encoding="utf-8")
    replaced.write_text(data.replace("<output>", "<output>\\ufffd", 3), encoding="utf-8")
    with caplog.at_level(logging.ERROR):
        (got,) = await replay_file(lone)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    (expected,) = await replay_file(replaced)
    assert {**got.to_dict(), "file": ""} == {**expected.to_dict(), "file": ""}
    assert got.summary["toolCalls"] > 10


async def test_other_versions_of_a_run_replay_to_the_same_report(tmp_path):
    """A mini-swe-agent 2.x twin (tool calls; Responses API) and an OpenHands SDK twin
    of shared runs give the report of the run itself, compactions included: the
    adapters hand the middleware the same calls."""
    import json

    from clio_acp.agent.replay import replay_file
    from tests.agent.test_recordings import (
        MINI,
        OPENHANDS,
        _as_mini_2,
        _as_responses_api,
        _as_sdk_events,
        _oh_record,
    )

    source = MINI / "django__django-16263.traj.json"
    data = json.loads(source.read_text(encoding="utf-8"))
    twins = {
        source: [_as_mini_2(data, exception_every=3), _as_responses_api(_as_mini_2(data))],
        OPENHANDS: [_as_sdk_events(_oh_record())],
    }
    for original, shapes in twins.items():
        (expected,) = await replay_file(original, compact_every=5)
        for n, shape in enumerate(shapes):
            path = tmp_path / f"{n}-{original.name}"
            text = json.dumps(shape) + ("\n" if original.suffix == ".jsonl" else "")
            path.write_text(text, encoding="utf-8")
            (got,) = await replay_file(path, compact_every=5)
            assert {**got.to_dict(), "file": ""} == {**expected.to_dict(), "file": ""}
        assert expected.tool_calls > 10 and expected.reminders
