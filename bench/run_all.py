"""Run every bench script with a small run count and print one table (issue 10 item 3).

Run from the repository root:

    python bench/run_all.py                  # every script, small run counts
    python bench/run_all.py --only store,startup --runs 5
    python bench/run_all.py --json           # {script: {status, seconds, figures}}

Each script runs as its own subprocess with ``--json`` and a timeout; its figures
(numbers of its JSON object, nested keys dotted) become rows of the table. A script
that is missing, times out, exits non-zero or prints no JSON shows as such in the
table; the others still run. The scripts' own docstrings say what each figure means
(see bench/README.md). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent

# (script, extra arguments): small counts so the whole table takes a few minutes.
SCRIPTS: list[tuple[str, list[str]]] = [
    ("memory_core", []),
    ("middleware", ["--events", "1000"]),
    ("store", []),
    ("text_workspace", []),
    ("startup", []),
    ("acp_startup", ["--skip-e2e"]),
    ("lsp_latency", ["--requests", "50"]),
    ("agent_loop", []),
    ("embedded_model", []),
    ("redaction", []),
]
RUNS_DEFAULT = 3
RUNS_OVERRIDE = {"lsp_latency": 1, "embedded_model": 2}  # each run is seconds long
TIMEOUT_S = 300


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out = []
        for key, item in value.items():
            out += _flatten(item, f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    return [(prefix, value)]


def run_script(name: str, extra: list[str], runs: int, timeout: float) -> dict[str, Any]:
    """``{status, seconds, figures:[(key, value)], detail}`` for one script."""
    path = BENCH / f"{name}.py"
    if not path.is_file():
        return {"status": "missing", "seconds": 0.0, "figures": [], "detail": ""}
    cmd = [sys.executable, str(path), "--runs", str(RUNS_OVERRIDE.get(name, runs)), "--json"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd + extra,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=BENCH.parent,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {
            "status": f"timeout ({timeout:.0f}s)",
            "seconds": time.perf_counter() - start,
            "figures": [],
            "detail": "",
        }
    seconds = time.perf_counter() - start
    lines = (proc.stderr or "").strip().splitlines()
    last_err = lines[-1][:160] if lines else ""
    if proc.returncode != 0:
        status = f"failed (exit {proc.returncode})"
        return {"status": status, "seconds": seconds, "figures": [], "detail": last_err}
    data = None
    text = (proc.stdout or "").strip()
    try:
        data = json.loads(text[text.find("{") :]) if "{" in text else None
    except ValueError:
        data = None
    for line in [] if isinstance(data, dict) else reversed(text.splitlines()):
        try:
            data = json.loads(line)
            break
        except ValueError:
            continue
    if not isinstance(data, dict):
        return {"status": "no JSON output", "seconds": seconds, "figures": [], "detail": last_err}
    figures = [(k, v) for k, v in _flatten(data) if k != "runs"]
    return {"status": "ok", "seconds": seconds, "figures": figures, "detail": ""}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.1f}"
    return f"{value:,}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS_DEFAULT, help="runs per script")
    parser.add_argument("--only", help="comma-separated script names (without .py)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per script")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    wanted = {n.strip() for n in args.only.split(",")} if args.only else None
    scripts = [(n, e) for n, e in SCRIPTS if wanted is None or n in wanted]
    if wanted:
        known = {n for n, _ in SCRIPTS}
        scripts += [(n, []) for n in sorted(wanted - known)]
    results: dict[str, dict[str, Any]] = {}
    for name, extra in scripts:
        print(f"run_all: {name} …", file=sys.stderr, flush=True)
        results[name] = run_script(name, extra, args.runs, args.timeout)
    if args.json:
        out = {
            name: {
                "status": r["status"],
                "seconds": round(r["seconds"], 1),
                "figures": dict(r["figures"]),
                **({"detail": r["detail"]} if r["detail"] else {}),
            }
            for name, r in results.items()
        }
        print(json.dumps(out))
        return 0
    rows = []
    for name, r in results.items():
        head = f"{r['status']} in {r['seconds']:.0f}s"
        if not r["figures"]:
            rows.append((name, head, r["detail"]))
            continue
        for i, (key, value) in enumerate(r["figures"]):
            rows.append((name if i == 0 else "", key, _fmt(value)))
        rows.append(("", f"({head})", ""))
    w1 = max(len("script"), *(len(r[0]) for r in rows))
    w2 = max(len("figure"), *(len(r[1]) for r in rows))
    print(f"{'script':<{w1}}  {'figure':<{w2}}  value")
    print(f"{'-' * w1}  {'-' * w2}  -----")
    for a, b, c in rows:
        print(f"{a:<{w1}}  {b:<{w2}}  {c}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
