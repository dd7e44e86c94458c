"""Per-trigger recall, precision and reminders per 100 calls of the rules tier on
the shared real runs, against the hand labels in ``tests/data/trajectory_labels.json``
(issue 14 item 4). Run from the repository root:

    python bench/memory_labels.py          # the table
    python bench/memory_labels.py --json   # the figures as one JSON object

Same figures as ``clio-acp replay --score tests/data/trajectory_labels.json FILES…``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clio_acp.agent.replay import replay_file  # noqa: E402
from clio_acp.eval.labels import format_score, load_labels, score_reports  # noqa: E402

TRAJ = ROOT.parent / "shared" / "trajectories"
LABELS = ROOT / "tests" / "data" / "trajectory_labels.json"


def trajectory_files() -> list[Path]:
    return [
        *sorted(TRAJ.glob("mini-swe-agent-gemini3-swebv/*.traj.json")),
        TRAJ / "openhands-swebl-gpt5" / "output.jsonl",
        *sorted(TRAJ.glob("pma-tb2/*/*/trajectory_agent.steps.jsonl")),
    ]


async def run() -> list:
    reports = []
    for path in trajectory_files():
        reports += await replay_file(path)
    return reports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    score = score_reports(asyncio.run(run()), load_labels(LABELS))
    print(json.dumps(score.to_dict()) if args.json else format_score(score))


if __name__ == "__main__":
    main()
