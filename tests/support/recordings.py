"""Recorded-run files built from the shared trajectories at test time (never copied
into the repository)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SHARED

OPENHANDS_RUN = SHARED / "trajectories" / "openhands-swebl-gpt5" / "output.jsonl"


def openhands_instances_file(tmp_path: Path, count: int = 5, bad_line: int | None = None) -> Path:
    """``tmp_path/output.jsonl``: the shared OpenHands run as ``count`` instances named
    ``instance-<n>``, optionally with a line that is not JSON at 1-based ``bad_line``."""
    source = OPENHANDS_RUN.read_text(encoding="utf-8")
    record = json.loads(next(line for line in source.splitlines() if line.strip()))
    lines = []
    for n in range(count):
        record["instance_id"] = f"instance-{n}"
        lines.append(json.dumps(record))
    if bad_line is not None:
        lines.insert(bad_line - 1, "{not json")
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
