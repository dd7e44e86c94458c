"""Benchmark of ``clio-acp replay --jobs N`` against one process (issue 18 item 3).

Run from the repository root (``../shared/trajectories`` beside it supplies the real
recordings):

    python bench/replay_jobs.py                       # 16 copies, 5 runs, --jobs 2
    python bench/replay_jobs.py --copies 4 --runs 3 --jobs 2 --json
    python bench/replay_jobs.py --distinct            # copies that differ in content

The corpus is the 24 shared recordings repeated ``--copies`` times (each copy a
folder of symbolic links to the shared folders, so every file has its own path, and
a pma run keeps its sibling memory log). Copies of the same recordings flatter one
process: it replays every copy after the first from warm memo caches (per-call facts,
digests), where each ``--jobs`` worker pays a cold pass of its own. ``--distinct``
writes each copy with its own marker line at the end of every long text (prompts,
commands, outputs, screens): the same calls, failures and reminders per copy, no
copy warmed by another, as with a corpus of different runs. Each run starts
``python -m clio_acp replay --json`` over the whole corpus twice, with ``--jobs 1``
and with ``--jobs N``, in alternating order (a busy neighbour slows both alike), and checks that both printed
the same bytes. Printed: the median wall time of each, their ratio (``speedup``; N
would be linear), the CPU time of each (the command and its worker processes,
``user + sys``), and the load average before and after. With fewer free cores than
``N + 1`` the speed-up measures the neighbours too: read it beside the load.

Nothing here is asserted by any test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from middleware import TRAJ, trajectory_files  # noqa: E402


def corpus(folder: Path, copies: int, distinct: bool = False) -> list[str]:
    """The shared recordings ``copies`` times over, as paths under ``folder``: links to
    the shared folders, or with ``distinct`` rewritten copies whose long texts each end
    in the copy's own marker (``_marked``)."""
    files: list[str] = []
    for n in range(copies):
        copy = folder / f"copy{n:03d}"
        copy.mkdir()
        for child in TRAJ.iterdir():
            if not child.is_dir():
                continue
            if distinct:
                _write_marked(child, copy / child.name, f"[copy {n}]")
            else:
                (copy / child.name).symlink_to(child.resolve(), target_is_directory=True)
        files += [str(copy / path.relative_to(TRAJ)) for path in trajectory_files()]
    return files


def _marked(value: Any, marker: str) -> Any:
    """``value`` with every string of 40 characters or more that is not JSON text
    itself ending in a line with ``marker``: prompts, commands, outputs and screens
    differ from copy to copy (so no copy is replayed from another's memoised facts),
    roles, names and embedded JSON arguments stay as they are."""
    if isinstance(value, dict):
        return {key: _marked(item, marker) for key, item in value.items()}
    if isinstance(value, list):
        return [_marked(item, marker) for item in value]
    if isinstance(value, str) and len(value) >= 40 and value.lstrip()[:1] not in ("{", "["):
        return f"{value}\n{marker}"
    return value


def _write_marked(source: Path, target: Path, marker: str) -> None:
    """Copy the recordings folder ``source`` to ``target`` with ``_marked`` texts
    (``.json`` as one document, ``.jsonl`` line by line; anything else as is)."""
    for path in sorted(source.rglob("*")):
        out = target / path.relative_to(source)
        if path.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            text = json.dumps(_marked(json.loads(text), marker))
        elif path.suffix == ".jsonl":
            text = "".join(
                json.dumps(_marked(json.loads(line), marker)) + "\n"
                for line in text.splitlines()
                if line.strip()
            )
        out.write_text(text, encoding="utf-8")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def replay_once(files: list[str], jobs: int) -> tuple[float, float, bytes]:
    """(wall s, CPU s of the command and its workers, stdout) of one replay."""
    command = [sys.executable, "-m", "clio_acp", "replay", "--json", "--jobs", str(jobs), *files]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"replay --jobs {jobs} failed ({done.returncode}): {done.stderr[-2000:]!r}"
        )
    return wall, _children_cpu() - cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--distinct",
        action="store_true",
        help="rewrite each copy with its own marker in every long text (see _marked)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    walls: dict[int, list[float]] = {1: [], args.jobs: []}
    cpus: dict[int, list[float]] = {1: [], args.jobs: []}
    identical = True
    with tempfile.TemporaryDirectory(prefix="replay-jobs-") as tmp:
        files = corpus(Path(tmp), args.copies, args.distinct)
        for run in range(args.runs):
            order = (1, args.jobs) if run % 2 == 0 else (args.jobs, 1)
            outputs = {}
            for jobs in order:
                wall, cpu, outputs[jobs] = replay_once(files, jobs)
                walls[jobs].append(wall)
                cpus[jobs].append(cpu)
            identical = identical and outputs[1] == outputs[args.jobs]
    serial, fanned = statistics.median(walls[1]), statistics.median(walls[args.jobs])
    result = {
        "files": len(files),
        "distinct": args.distinct,
        "runs": args.runs,
        "jobs": args.jobs,
        "serial_wall_s": round(serial, 2),
        "jobs_wall_s": round(fanned, 2),
        "speedup": round(serial / fanned, 2),
        "serial_cpu_s": round(statistics.median(cpus[1]), 2),
        "jobs_cpu_s": round(statistics.median(cpus[args.jobs]), 2),
        "identical_stdout": identical,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"replay --json over {result['files']} files, median of {args.runs} runs: "
        f"--jobs 1 {result['serial_wall_s']} s, --jobs {args.jobs} {result['jobs_wall_s']} s "
        f"(×{result['speedup']}); CPU {result['serial_cpu_s']} s vs {result['jobs_cpu_s']} s; "
        f"stdout identical: {identical}; load {result['load_before']} → {result['load_after']}"
    )


if __name__ == "__main__":
    main()
