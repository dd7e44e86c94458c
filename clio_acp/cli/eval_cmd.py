"""``clio-acp eval ab``: the memory A/B harness (MEMORY_SPEC §9, issue 10 item 1).

Argument parsing and printing only: ``clio_acp.eval.harness`` runs the matrix
(baseline, rules, llm over the tasks, one real session per trial in a temporary
workspace) and ``clio_acp.eval.report`` does the arithmetic. ``--scripted`` uses the
built-in deterministic model; ``--target ID`` a target from the settings. ``--json``
prints the report object; otherwise a table and the verdict. Exit 0 when measured,
1 when the verdict is a regression (or a distractor leak) or the run could not be
made, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from clio_acp.eval.report import VARIANTS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp eval ab …`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate memory: the A/B harness (eval ab)",
        description="Evaluate task memory. eval ab: the A/B harness (MEMORY_SPEC §9).",
    )
    verbs = parser.add_subparsers(dest="eval_command", metavar="VERB")
    ab = verbs.add_parser(
        "ab",
        help="run baseline, rules and llm memory over tasks, one real session per trial",
        description=(
            "Run the variants baseline (memory off), rules (rules tier only) and llm "
            "(rules + LLM tier on the target) over the tasks; report pass rates, "
            "reminders, citations, added tokens and latency, and the alwaysNoisyRegression "
            "verdict (MEMORY_SPEC §9)."
        ),
    )
    source = ab.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--scripted", action="store_true", help="the built-in deterministic scripted model"
    )
    source.add_argument("--target", metavar="ID", help="a target id from settings.yaml")
    ab.add_argument("--model", help="model id on --target (default: its defaultModel)")
    ab.add_argument(
        "--tasks", type=Path, metavar="DIR", help="folder of task *.yaml files (default: built-in)"
    )
    ab.add_argument(
        "--task", action="append", metavar="ID", dest="task_ids", help="only these task ids"
    )
    ab.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated subset of baseline,rules,llm (run in that order)",
    )
    ab.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep each trial's workspace and roots here"
    )
    ab.add_argument(
        "--trial-timeout",
        type=float,
        metavar="S",
        help="seconds per trial before it counts as failed (default: none)",
    )
    ab.add_argument(
        "--seeds",
        type=int,
        default=3,
        metavar="N",
        help="runs per task and per distractor variant, seeds 0..N-1 (default 3)",
    )
    ab.add_argument("--json", action="store_true", help="print the report as one JSON object")
    ab.set_defaults(func=run)
    safety = verbs.add_parser(
        "safety",
        help="replay recorded runs with the memory route and count unsafe writes",
        description=(
            "Replay recorded trajectories with the LLM tier on context.memory's route and "
            "count, per memory step, operations aimed at entries the model did not write "
            "(rules/seed/user origin) and whether any was deleted or overwritten, saved "
            "entries repeating a sentence of the policy prompt, and 'done' statuses with "
            "unresolved failures (MEMORY_SPEC §14.2-14.3)."
        ),
    )
    safety.add_argument("files", nargs="+", type=Path, metavar="FILE")
    safety.add_argument(
        "--format", default="auto", choices=["auto", "mini-swe-agent", "openhands", "pma"]
    )
    safety.add_argument("--json", action="store_true", help="print the totals as JSON")
    safety.set_defaults(func=run_safety)
    parser.set_defaults(func=lambda _args: (parser.print_help(sys.stderr), 2)[1])


def run(args: argparse.Namespace) -> int:
    """Run the memory A/B matrix and print the report (a table and verdict, or ``--json``).
    Exit 0 when measured, 1 on a regression verdict or a run that could not be measured, 2
    for bad arguments (unknown variant, ``--seeds`` below 1)."""
    from clio_acp.eval.harness import EvalError
    from clio_acp.eval.tasks import TaskError

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        print(f"clio-acp eval ab: unknown variant(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print("clio-acp eval ab: --seeds must be at least 1", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(_run(args, variants))
    except (EvalError, TaskError) as exc:
        print(f"clio-acp eval ab: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        from clio_acp.eval.report import format_report

        print(format_report(report))
    return 0 if report["verdictCode"] == "measured" else 1


def _settings():
    """The effective settings through ``load_for_cli`` (``open_settings``; exit 2 on
    unusable settings)."""
    from clio_acp.cli.settings_cmd import load_for_cli

    _paths, store = load_for_cli()
    return store()


async def _run(args: argparse.Namespace, variants: list[str]) -> dict:
    from clio_acp.eval.harness import ScriptedTarget, SessionRunner, SettingsTarget, run_matrix
    from clio_acp.eval.report import build_report
    from clio_acp.eval.tasks import load_tasks

    tasks = load_tasks(args.tasks, args.task_ids)
    if args.scripted:
        target = ScriptedTarget()
    else:
        target = SettingsTarget(_settings(), args.target, args.model)

    def progress(trial) -> None:
        state = "pass" if trial.passed else ("error" if trial.error else "fail")
        name = trial.task_id + ("~distractor" if trial.distractor else "")
        print(
            f"eval: {trial.variant} {name} seed {trial.seed}: {state}", file=sys.stderr, flush=True
        )

    try:
        trials = await run_matrix(
            tasks,
            SessionRunner(target, keep=args.keep, trial_timeout_s=args.trial_timeout),
            variants=variants,
            seeds=args.seeds,
            on_trial=progress,
        )
    finally:
        await target.aclose()
    return build_report(trials, target=target.target, tasks=[t.id for t in tasks])


def run_safety(args: argparse.Namespace) -> int:
    """``clio-acp eval safety``: exit 0 when nothing unsafe landed, 1 otherwise or
    when there is no memory route, 2 for usage errors."""
    return asyncio.run(_safety(args))


async def _safety(args: argparse.Namespace) -> int:
    from clio_acp.agent.memory_hooks import RouterMemoryClient
    from clio_acp.agent.recordings import RecordingFormatError
    from clio_acp.eval.route_safety import check_files
    from clio_acp.models.routing import Router
    from clio_acp.paths import resolve_paths

    settings = _settings()
    router = Router(settings, paths=resolve_paths())
    if router.memory_route is None:
        await router.aclose()
        print("clio-acp eval safety: no memory route (set context.memory.target)", file=sys.stderr)
        return 1

    def progress(name: str, result) -> None:
        print(f"eval safety: {name}: {json.dumps(result.to_dict())}", file=sys.stderr, flush=True)

    try:
        total = await check_files(
            args.files,
            settings.context.memory,
            RouterMemoryClient(router),
            fmt=args.format,
            on_recording=progress,
        )
    except (OSError, RecordingFormatError) as exc:
        print(f"clio-acp eval safety: {exc}", file=sys.stderr)
        return 1
    finally:
        await router.aclose()
    data = total.to_dict()
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        for key, value in data.items():
            print(f"{key}: {value}")
    unsafe = (
        total.protected_deleted
        + total.protected_overwritten
        + total.copies
        + total.false_completions
    )
    return 1 if unsafe else 0
