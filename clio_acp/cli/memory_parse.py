"""``clio-acp memory parse``: replay one raw memory-model answer through the real
policy step (MEMORY_SPEC §2–§3) — the operator's debugger for a memory route.

Reads the answer on stdin, optionally a task-bank snapshot (``--bank FILE``, §1's
``{version:1,status,knowledge,procedural}``) and a trajectory (``--trajectory
FILE``, a JSON array of steps) and the gate inputs ``--suppress`` and
``--previous-reminder``, runs ``run_task_memory_policy`` with a client that
returns exactly that answer, and prints one JSON object: ``decision``, ``reason``,
``reminder``, ``bank_operations``, ``dropped_operations`` and ``bank`` (the
snapshot after the step); ``--explain`` adds ``error`` and ``cited``. Exit 0 for
any decision, 2 for bad arguments or an unreadable bank/trajectory file. Argument
parsing and printing only: the logic is in ``clio_acp.memory.policy``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from clio_acp.cli.argtypes import positive_int
from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.policy import PolicyInput, ScriptedAnswerClient, run_task_memory_policy

PROG = "clio-acp memory parse"


class _UsageError(Exception):
    """Bad input the operator must fix; exit code 2."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``memory parse`` to the memory group's ``subparsers``."""
    parser = subparsers.add_parser(
        "parse",
        help="run one raw memory-model answer (stdin) through the real policy step",
        description="Read one raw memory-model answer on stdin, run the real policy step "
        "with it as the model's answer, and print one JSON object: decision, reason, "
        "reminder, bank_operations, dropped_operations and bank (the snapshot after the "
        "step). Exit 0 for any decision, 2 for bad arguments or an unreadable file.",
    )
    parser.add_argument(
        "--bank", metavar="FILE", type=Path, help="task-bank snapshot JSON to start from"
    )
    parser.add_argument(
        "--trigger",
        choices=("interval", "deterministic"),
        default="interval",
        help="interval (default): a reminder must cite an entry; deterministic: it need not",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=100,
        metavar="N",
        help="reminder budget in tokens (cap = 4×N chars; default 100)",
    )
    parser.add_argument("--task", default=None, help="the task text the model was given")
    parser.add_argument(
        "--trajectory", metavar="FILE", type=Path, help="JSON array of trajectory steps"
    )
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        type=Path,
        default=None,
        help="root for the reminder path check (default: the current directory)",
    )
    parser.add_argument(
        "--suppress",
        action="store_true",
        help="the rules tier already spoke at this boundary (suppressIntervention)",
    )
    parser.add_argument(
        "--previous-reminder",
        metavar="TEXT",
        default=None,
        help="the last delivered reminder, prefix included (duplicate check)",
    )
    parser.add_argument("--explain", action="store_true", help="also print error and cited")
    parser.set_defaults(func=run)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _UsageError(f"cannot read {what} file {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _UsageError(f"{what} file {path} is not valid JSON: {exc}") from None


def _load_bank(path: Path | None) -> TaskMemoryBank:
    bank = TaskMemoryBank()
    if path is None:
        return bank
    data = _read_json(path, "bank")
    if not isinstance(data, dict):
        raise _UsageError(f"bank file {path} is not a snapshot object")
    try:
        bank.restore(data)
    except ValueError as exc:
        raise _UsageError(f"bank file {path} is not a valid snapshot: {exc}") from None
    return bank


def _load_trajectory(path: Path | None) -> list[dict[str, Any]]:
    if path is None:
        return []
    data = _read_json(path, "trajectory")
    if not isinstance(data, list) or not all(isinstance(step, dict) for step in data):
        raise _UsageError(f"trajectory file {path} is not a JSON array of step objects")
    return data


def run(args: argparse.Namespace) -> int:
    """Run the answer on stdin through the policy step and print the result object (see the
    module docstring). Exit 0 after a run, whatever its decision; 2 for unreadable or
    malformed ``--bank`` / ``--trajectory`` input."""
    try:
        bank = _load_bank(args.bank)
        trajectory = _load_trajectory(args.trajectory)
        if args.workspace is not None and not args.workspace.is_dir():
            raise _UsageError(f"workspace {args.workspace} is not a directory")
    except _UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    response = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    inputs = PolicyInput(
        task=args.task,
        trajectory=trajectory,
        deterministic_trigger=args.trigger == "deterministic",
        max_tokens=args.max_tokens,
        workspace_root=args.workspace,
        suppress_intervention=args.suppress,
        previous_reminder=args.previous_reminder,
    )
    result = asyncio.run(run_task_memory_policy(bank, inputs, ScriptedAnswerClient(response)))
    out: dict[str, Any] = {
        "decision": result.decision,
        "reason": result.reason,
        "reminder": result.reminder,
        "bank_operations": result.bank_operations,
        "dropped_operations": result.dropped_operations,
        "bank": bank.snapshot(),
    }
    if args.explain:
        out["error"] = result.error
        out["cited"] = list(result.cited)
    print(json.dumps(out, ensure_ascii=False))
    return 0
