"""Benchmark of the memory middleware's rules tier and of ``clio-acp replay``.

Run from the repository root (``../shared/trajectories`` beside it supplies the real
recordings):

    python bench/middleware.py              # median of 5 runs
    python bench/middleware.py --runs 9 --json

Figures (each the median over ``--runs`` runs):

- ``synthetic_us_per_event``: µs per tool event (``before_tool`` + ``after_tool``)
  over a long synthetic trajectory (reads, edits, failing reruns, grep no-match,
  pylint exits, environment failures), with a turn boundary every 4 calls.
- ``real_us_per_event``: the same over every call of the shared trajectories.
- ``real_file_sink_us_per_event``: the same with the telemetry rows appended to a
  ``steps.jsonl`` (in a temporary folder), as a live session writes them; the other
  figures keep every row in memory (``MemorySinkList``). The difference is what a
  session pays for its telemetry beyond the bench's sink (mostly system calls).
- ``baseline_us_per_event``: the same synthetic events through a *disabled*
  registration (hook plumbing only); ``ratio`` = rules tier / baseline.
- ``replay_events_per_s``: tool events per second of ``replay_recording`` over all
  shared trajectories (recordings loaded once beforehand; ``load_s`` is separate).
- ``*_cpu_*``: the same figures in CPU time of this process (``time.process_time``):
  on a machine shared with other work, wall time measures the neighbours too.
- ``best_*_cpu_*``: the best run's CPU figure (a busy neighbour on the same core slows
  this process's own CPU time too, so the best run is the least disturbed one).
- ``load_cpu_s``: CPU time of loading the recordings (``clio-acp replay`` pays it; the
  replay figures do not include it).

Every run starts from cold process caches (``_first_sighting``): the per-call facts,
the memoised digests and tokenised commands, the bank's normalisation memo, the
telemetry rows validated once per distinct row. Without
that, every run after the first would replay events the caches have already seen,
which no real session does.

Nothing here is asserted by any test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.agent.recordings import load_recordings  # noqa: E402
from clio_acp.agent.replay import replay_recording  # noqa: E402
from clio_acp.memory.middleware import MemoryMiddleware, ToolCall, ToolOutcome  # noqa: E402
from clio_acp.memory.telemetry import MemorySinkList, TelemetrySink  # noqa: E402
from clio_acp.settings import MemorySettings  # noqa: E402

TRAJ = ROOT.parent / "shared" / "trajectories"


def trajectory_files() -> list[Path]:
    return [
        *sorted(TRAJ.glob("mini-swe-agent-gemini3-swebv/*.traj.json")),
        TRAJ / "openhands-swebl-gpt5" / "output.jsonl",
        *sorted(TRAJ.glob("pma-tb2/*/*/trajectory_agent.steps.jsonl")),
    ]


TRACEBACK = (
    'Traceback (most recent call last):\n  File "repro.py", line 3, in <module>\n'
    "    main()\nValueError: the parser rejected 'x' at 0x7f00aa11\n"
)


def synthetic(n: int) -> list[tuple[ToolCall, ToolOutcome]]:
    """A long mixed trajectory: reads, edits, failing reruns, informative exits."""
    shapes = [
        (
            ToolCall("bash", {"command": "nl -ba src/app.py | sed -n '1,80p'"}),
            ToolOutcome("x" * 2000),
        ),
        (ToolCall("bash", {"command": "python repro.py"}), ToolOutcome(TRACEBACK, True, 1)),
        (ToolCall("bash", {"command": "sed -i 's/a/b/' src/app.py"}), ToolOutcome("")),
        (ToolCall("bash", {"command": "grep -rn needle tests"}), ToolOutcome("", True, 1)),
        (ToolCall("bash", {"command": "python repro.py"}), ToolOutcome(TRACEBACK, True, 1)),
        (ToolCall("bash", {"command": "pylint src"}), ToolOutcome("C0103 …\n" * 20, True, 16)),
        (
            ToolCall("write_file", {"path": "src/b.py", "content": "y" * 500}, kind="edit"),
            ToolOutcome("ok"),
        ),
        (
            ToolCall("bash", {"command": "curl http://x"}),
            ToolOutcome("bash: curl: command not found", True, 127),
        ),
    ]
    events = []
    for i in range(n):
        call, outcome = shapes[i % len(shapes)]
        events.append((ToolCall(call.tool_name, call.args, f"c{i}", call.kind), outcome))
    return events


def _first_sighting() -> None:
    """Empty the process-wide caches, so that a run sees its events for the first time."""
    from clio_acp.memory import bank, calls
    from clio_acp.memory.middleware.facts import clear_facts_cache
    from clio_acp.memory.telemetry import clear_step_cache

    calls.clear_caches()
    clear_facts_cache()
    clear_step_cache()
    bank._NORMALIZED.clear()


def per_event_us(
    events: list[tuple[ToolCall, ToolOutcome]],
    enabled: bool = True,
    steps_file: Path | None = None,
) -> tuple[float, float]:
    """(wall µs, CPU µs) per event of ``before_tool`` + ``after_tool`` (turn boundary
    every 4 calls) through one fresh registration; its telemetry rows are kept in
    memory, or appended to ``steps_file`` when given (a live session's sink)."""
    settings = MemorySettings(enabled=enabled)
    sink = MemorySinkList() if steps_file is None else TelemetrySink(steps_file)
    mw = MemoryMiddleware(lambda: settings, telemetry=sink)
    mw.turn_start("t0", "Fix the parser. Never edit the tests.")
    _first_sighting()
    started, cpu = time.perf_counter(), time.process_time()
    for i, (call, outcome) in enumerate(events):
        if i and i % 4 == 0:
            mw.turn_end(f"t{i}")
            mw.turn_start(f"t{i + 1}")
        mw.before_tool(call)
        mw.after_tool(call, outcome)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return elapsed / len(events) * 1e6, cpu / len(events) * 1e6


def replay_rate(recordings: list) -> tuple[float, float]:
    """(tool events per wall second, per CPU second) of ``replay_recording`` over
    ``recordings`` (one event loop, as ``clio-acp replay`` runs them)."""

    async def replay_all() -> int:
        total = 0
        for recording in recordings:
            total += (await replay_recording(recording)).tool_calls
        return total

    _first_sighting()
    started, cpu = time.perf_counter(), time.process_time()
    total = asyncio.run(replay_all())
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return total / elapsed, total / cpu


def _median(values: list[float], digits: int = 1) -> float:
    return round(statistics.median(values), digits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    events = synthetic(args.events)
    t0, cpu0 = time.perf_counter(), time.process_time()
    recordings = [r for f in trajectory_files() for r in load_recordings(f)]
    load_s, load_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    real_events = [
        (
            ToolCall(c.tool_name, c.args, f"c{c.index}", c.kind),
            ToolOutcome(c.output, c.is_error, c.exit_code),
        )
        for r in recordings
        for c in r.calls
    ]

    figures: dict[str, list[float]] = {}

    def add(name: str, pair: tuple[float, float]) -> None:
        figures.setdefault(name, []).append(pair[0])
        figures.setdefault(name + "_cpu", []).append(pair[1])

    with tempfile.TemporaryDirectory() as folder:
        for run in range(args.runs):
            add("synthetic", per_event_us(events))
            add("baseline", per_event_us(events, enabled=False))
            add("real", per_event_us(real_events))
            steps_file = Path(folder) / str(run) / "steps.jsonl"
            add("real_file_sink", per_event_us(real_events, steps_file=steps_file))
            add("replay", replay_rate(recordings))

    result = {
        "runs": args.runs,
        "synthetic_events": len(events),
        "real_events": len(real_events),
        "recordings": len(recordings),
        "synthetic_us_per_event": _median(figures["synthetic"]),
        "real_us_per_event": _median(figures["real"]),
        "real_file_sink_us_per_event": _median(figures["real_file_sink"]),
        "baseline_us_per_event": _median(figures["baseline"], 2),
        "ratio": round(
            statistics.median(figures["synthetic"]) / statistics.median(figures["baseline"]), 1
        ),
        "replay_events_per_s": round(statistics.median(figures["replay"])),
        "synthetic_cpu_us_per_event": _median(figures["synthetic_cpu"]),
        "real_cpu_us_per_event": _median(figures["real_cpu"]),
        "real_file_sink_cpu_us_per_event": _median(figures["real_file_sink_cpu"]),
        "baseline_cpu_us_per_event": _median(figures["baseline_cpu"], 2),
        "replay_cpu_events_per_s": round(statistics.median(figures["replay_cpu"])),
        "best_synthetic_cpu_us_per_event": round(min(figures["synthetic_cpu"]), 1),
        "best_real_cpu_us_per_event": round(min(figures["real_cpu"]), 1),
        "best_replay_cpu_events_per_s": round(max(figures["replay_cpu"])),
        "load_s": round(load_s, 2),
        "load_cpu_s": round(load_cpu_s, 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"rules tier: {result['synthetic_us_per_event']} µs/event synthetic "
        f"({result['synthetic_events']} events), {result['real_us_per_event']} µs/event on "
        f"{result['real_events']} real events; disabled baseline "
        f"{result['baseline_us_per_event']} µs/event (×{result['ratio']})"
    )
    print(
        f"replay: {result['replay_events_per_s']} tool events/s over {result['recordings']} "
        f"recordings (loading took {result['load_s']} s); median of {args.runs} runs"
    )
    print(
        f"CPU time: {result['synthetic_cpu_us_per_event']} µs/event synthetic, "
        f"{result['real_cpu_us_per_event']} µs/event real "
        f"({result['real_file_sink_cpu_us_per_event']} with a live session's steps.jsonl), baseline "
        f"{result['baseline_cpu_us_per_event']} µs/event; replay "
        f"{result['replay_cpu_events_per_s']} tool events per CPU second"
    )
    print(
        f"CPU time, best of {args.runs} runs (least disturbed by other work on the machine): "
        f"{result['best_synthetic_cpu_us_per_event']} µs/event synthetic, "
        f"{result['best_real_cpu_us_per_event']} µs/event real; replay "
        f"{result['best_replay_cpu_events_per_s']} tool events per CPU second"
    )


if __name__ == "__main__":
    main()
