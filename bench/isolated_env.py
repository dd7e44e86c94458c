"""The environment a benchmark gives the clio-acp processes it starts: this checkout first
on ``PYTHONPATH`` and every ``CLIO_ACP_*_DIR`` under a throwaway ``home`` (created), so a
run never reads or writes the user's own settings, store or state."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def isolated_env(home: Path) -> dict[str, str]:
    """``os.environ`` plus ``PYTHONPATH`` (checkout first) and ``CLIO_ACP_{DATA,STATE,
    CONFIG,CACHE}_DIR`` = ``home/<name>`` (folders created)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("data", "state", "config", "cache"):
        (home / name).mkdir(parents=True, exist_ok=True)
        env[f"CLIO_ACP_{name.upper()}_DIR"] = str(home / name)
    return env
