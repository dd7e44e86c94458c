"""Agreement between our memory tiers and the paper's memory agent on the pma-tb2
trajectories (``clio-acp replay --compare-pma DIR``, issue 10 item 2).

Owns :func:`compare_pma`: for every ``trajectory_memory.steps.jsonl`` under DIR with
its ``trajectory_agent.steps.jsonl`` beside it, replay the agent run through our
middleware (``clio_acp.agent.replay``), map each memory effect to the agent step whose
tool call it fired at (the model sees it at the next step), and compare with the
steps after which the paper's memory agent injected a reminder (memory step *i*
follows agent step *i*; ``Recording.yardstick``). A paper injection at step *i*
agrees when we fired at agent step *i* or *i − 1* ("same agent step or the one
before"). Reported as counts and percentages both ways, beside a chance baseline:
the expected agreement of as many reminders placed at random agent steps of all
the runs (exact, hypergeometric), and the stricter per-run baseline (each run's own
number of reminders at its own random steps). Firings after the paper's last memory
step are outside the yardstick and left out. Reads files only.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clio_acp.agent.recordings import Recording, RecordingFormatError, load_recordings
from clio_acp.agent.replay import ReplayReport, replay_recording
from clio_acp.settings import MemorySettings

__all__ = ["PmaComparison", "PmaRun", "compare_pma", "format_comparison"]

MEMORY_LOG = "trajectory_memory.steps.jsonl"
AGENT_LOG = "trajectory_agent.steps.jsonl"


@dataclass
class PmaRun:
    """One task's comparison. Step numbers are the agent steps of the pma log."""

    task: str
    agent_steps: int
    tool_calls: int
    paper_steps: list[int]
    our_steps: list[int]
    paper_matched: int
    ours_matched: int
    chance_matched: float = 0.0
    """Expected paper injections matched by as many firings at random agent steps."""
    outside: int = 0
    """Our firings after the paper's last memory step (not comparable, left out)."""
    window_steps: list[int] = field(default_factory=list)
    """The agent steps the paper could have spoken after (its memory steps)."""

    def to_dict(self) -> dict[str, Any]:
        """This task's comparison (camelCase keys): agent steps, tool calls, the paper's and
        our injection steps, matches each way, agreement and precision in percent, and the
        matches expected by chance."""
        return {
            "task": self.task,
            "agentSteps": self.agent_steps,
            "toolCalls": self.tool_calls,
            "paperInjections": len(self.paper_steps),
            "paperSteps": self.paper_steps,
            "ourFirings": len(self.our_steps),
            "ourSteps": self.our_steps,
            "paperMatched": self.paper_matched,
            "oursMatched": self.ours_matched,
            "agreementPct": _pct(self.paper_matched, len(self.paper_steps)),
            "precisionPct": _pct(self.ours_matched, len(self.our_steps)),
            "chanceMatched": round(self.chance_matched, 2),
            "outsideYardstick": self.outside,
        }


@dataclass
class PmaComparison:
    runs: list[PmaRun] = field(default_factory=list)
    tiers: list[str] = field(default_factory=lambda: ["rules"])

    def totals(self) -> dict[str, Any]:
        """Figures pooled over every run: injections each side, matches each way, agreement and
        the chance level of matching (pooled over runs) in percent."""
        paper = sum(len(r.paper_steps) for r in self.runs)
        ours = sum(len(r.our_steps) for r in self.runs)
        pm = sum(r.paper_matched for r in self.runs)
        om = sum(r.ours_matched for r in self.runs)
        pooled = chance_matches(
            [(n, i) for n, r in enumerate(self.runs) for i in r.paper_steps],
            [(n, i) for n, r in enumerate(self.runs) for i in r.window_steps],
            ours,
        )
        chance = sum(r.chance_matched for r in self.runs)
        chance_pct = round(100.0 * chance / paper, 1) if paper else 0.0
        return {
            "tasks": len(self.runs),
            "paperInjections": paper,
            "ourFirings": ours,
            "paperMatched": pm,
            "oursMatched": om,
            "agreementPct": _pct(pm, paper),
            "precisionPct": _pct(om, ours),
            "chanceMatched": round(pooled, 2),
            "chancePct": round(100.0 * pooled / paper, 1) if paper else 0.0,
            "ratioToChance": round(pm / pooled, 2) if pooled else None,
            "chancePerRunMatched": round(chance, 2),
            "chancePerRunPct": chance_pct,
            "ratioToChancePerRun": round(pm / chance, 2) if chance else None,
        }

    def to_dict(self) -> dict[str, Any]:
        """``{tiers, rule, runs, total}`` as ``clio-acp replay --compare-pma --json`` prints it."""
        return {
            "tiers": self.tiers,
            "rule": "a paper injection after agent step i agrees with ours at step i or i-1",
            "runs": [r.to_dict() for r in self.runs],
            "total": self.totals(),
        }


def _pct(num: int, den: int) -> float:
    return round(100.0 * num / den, 1) if den else 0.0


def _agent_step_numbers(path: Path) -> list[int]:
    """The ``step`` of every non-user row, in file order (one replay turn each,
    matching ``clio_acp.agent.recordings`` pma loading)."""
    steps = []
    # Read as the loader reads it (a byte-order mark dropped, stray bytes as U+FFFD),
    # so a file it replayed is not refused here with a traceback.
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line, strict=False)
                if row.get("role") == "user":
                    continue
                steps.append(int(row.get("step", len(steps) + 1)))
            except (ValueError, TypeError, AttributeError, RecursionError) as exc:
                raise RecordingFormatError(f"{path}:{line_no}: bad agent step: {exc}") from exc
    return steps


def firing_steps(recording: Recording, report: ReplayReport, step_numbers: list[int]) -> list[int]:
    """Agent steps at which our memory spoke (sorted, unique). An effect with tool-call
    step *k* belongs to the agent step that ran call *k*; step 0 (before any call)
    to the step before the first agent step; a completion check to the agent step
    whose answer (without tool calls) it followed."""
    call_step: dict[int, int] = {}
    for turn, number in zip(recording.turns, step_numbers, strict=False):
        for call in turn.calls:
            call_step[call.index] = number
    first = (step_numbers[0] - 1) if step_numbers else 0
    fired: set[int] = set()
    for r in report.reminders:
        if r.turn is not None and 0 < r.turn <= len(step_numbers):
            fired.add(step_numbers[r.turn - 1])
        else:
            fired.add(call_step.get(r.step, first) if r.step else first)
    return sorted(fired)


def agreement(paper: list[int], ours: list[int]) -> tuple[int, int]:
    """(paper injections matched by one of ours at the same step or the one before,
    our firings matched by a paper injection at the same step or the one after)."""
    mine = set(ours)
    theirs = set(paper)
    paper_matched = sum(1 for i in paper if i in mine or (i - 1) in mine)
    ours_matched = sum(1 for s in ours if s in theirs or (s + 1) in theirs)
    return paper_matched, ours_matched


def chance_matches(paper: list[Any], steps: list[Any], firings: int) -> float:
    """The expected number of paper injections that ``firings`` reminders placed at
    distinct agent steps drawn uniformly from ``steps`` would match (same rule as
    ``agreement``): exact, by the hypergeometric miss probability per injection.
    Steps are ints (one run) or ``(run, step)`` pairs (all runs pooled)."""
    members = set(steps)
    n, k = len(members), min(firings, len(members))
    if not paper or k <= 0 or n == 0:
        return 0.0
    total = 0.0
    for i in paper:
        before = (i[0], i[1] - 1) if isinstance(i, tuple) else i - 1
        hits = len({i, before} & members)
        miss = math.comb(n - hits, k) / math.comb(n, k) if n - hits >= k else 0.0
        total += 1.0 - miss
    return total


def find_runs(folder: Path) -> list[Path]:
    """Agent logs under ``folder`` that have the paper's memory log beside them."""
    if folder.is_file():
        folder = folder.parent
    return sorted(
        p.parent / AGENT_LOG for p in folder.rglob(MEMORY_LOG) if (p.parent / AGENT_LOG).is_file()
    )


async def compare_pma(
    folder: Path,
    settings: MemorySettings | Callable[[], MemorySettings] | None = None,
    *,
    client_factory: Callable[[MemorySettings], Any] | None = None,
) -> PmaComparison:
    """Compare every run under ``folder``. Raises ``FileNotFoundError`` when there is
    none, ``RecordingFormatError`` for a malformed log."""
    agent_logs = await asyncio.to_thread(find_runs, folder)
    if not agent_logs:
        raise FileNotFoundError(f"{folder}: no {MEMORY_LOG} with {AGENT_LOG} beside it")
    result = PmaComparison(tiers=["rules", "llm"] if client_factory else ["rules"])
    for path in agent_logs:
        recordings = await asyncio.to_thread(load_recordings, path, "pma")
        numbers = await asyncio.to_thread(_agent_step_numbers, path)
        for recording in recordings:
            report = await replay_recording(recording, settings, client_factory=client_factory)
            paper = sorted(set((recording.yardstick or {}).get("injected_after_steps") or []))
            # The paper's memory step i precedes agent step i+1: after its last
            # memory step it could no longer speak, so firings later than that are
            # outside the yardstick (left out, for chance too).
            window = int((recording.yardstick or {}).get("memory_steps") or 0)
            fired = firing_steps(recording, report, numbers)
            ours = [s for s in fired if not window or s <= window]
            numbers_in = [n for n in numbers if not window or n <= window]
            pm, om = agreement(paper, ours)
            result.runs.append(
                PmaRun(
                    task=recording.name,
                    agent_steps=len(numbers),
                    tool_calls=report.tool_calls,
                    paper_steps=paper,
                    our_steps=ours,
                    paper_matched=pm,
                    ours_matched=om,
                    chance_matched=chance_matches(paper, numbers_in, len(ours)),
                    outside=len(fired) - len(ours),
                    window_steps=numbers_in,
                )
            )
    return result


def format_comparison(comparison: PmaComparison) -> str:
    """The readable table."""
    lines = [
        f"tiers: {'+'.join(comparison.tiers)}; a paper injection after agent step i agrees "
        "with ours at step i or i-1",
        f"{'task':<44} {'steps':>5} {'paper':>5} {'ours':>5} {'agree':>9} {'precision':>10}",
    ]
    for r in comparison.runs:
        d = r.to_dict()
        lines.append(
            f"{r.task[:44]:<44} {r.agent_steps:>5} {len(r.paper_steps):>5} {len(r.our_steps):>5} "
            f"{r.paper_matched:>3} {d['agreementPct']:>4.1f}% {r.ours_matched:>3} "
            + (f"{d['precisionPct']:>5.1f}%" if r.our_steps else f"{'-':>6}")
        )
        outside = f" (+{r.outside} after its last memory step)" if r.outside else ""
        lines.append(f"{'':<4}paper after steps {r.paper_steps}; ours at {r.our_steps}{outside}")
    t = comparison.totals()
    lines.append(
        f"TOTAL: {t['tasks']} runs, paper {t['paperInjections']} injections, ours "
        f"{t['ourFirings']} firings; agreement {t['paperMatched']}/{t['paperInjections']} "
        f"({t['agreementPct']}%), precision "
        + (
            f"{t['oursMatched']}/{t['ourFirings']} ({t['precisionPct']}%)"
            if t["ourFirings"]
            else "- (no firings)"
        )
    )
    ratio = "-" if t["ratioToChance"] is None else f"{t['ratioToChance']}x"
    per_run = "-" if t["ratioToChancePerRun"] is None else f"{t['ratioToChancePerRun']}x"
    lines.append(
        f"CHANCE: the same number of reminders at random agent steps (of all runs) would "
        f"match {t['chanceMatched']}/{t['paperInjections']} ({t['chancePct']}%); ours is "
        f"{ratio} chance"
    )
    lines.append(
        f"CHANCE per run (each run's own number of reminders at its random steps, stricter): "
        f"{t['chancePerRunMatched']}/{t['paperInjections']} ({t['chancePerRunPct']}%); ours is "
        f"{per_run} that"
    )
    return "\n".join(lines)
