"""``clio-acp replay FILE… [--format …] [--json]``: memory over recorded trajectories.

Argument parsing and printing only: ``clio_acp.agent.replay`` feeds each recording
through the real memory middleware (rules tier; the LLM tier only when a memory
route is configured and a client can be built for it). ``--json`` prints one JSON
object per recording (per file; one per instance for OpenHands files), each with a
``reminders`` list (``step`` is the 1-based tool-call index) and a ``summary``.
The text report lists the same per file and a total. Exit 1 if any file could not
be read as a trajectory (the others are still reported).

``--html FILE`` also writes a self-contained HTML page (``clio_acp.eval.replay_html``:
timeline with failures marked, each memory effect and its citations, the final bank).
``--score LABELS`` prints, instead of the per-file report, per-trigger recall,
precision and reminders per 100 calls against hand labels (``clio_acp.eval.labels``).
``--compare-pma DIR`` replays every pma-tb2 run under DIR and reports the agreement of
our firing points with the paper's memory agent (``clio_acp.eval.pma``); ``--json``
prints that comparison as one object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import mmap
import re
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from itertools import islice
from pathlib import Path
from typing import Any

from clio_acp.agent.recordings import FORMATS, RecordingFormatError
from clio_acp.agent.replay import ReplayReport, replay_file
from clio_acp.cli.argtypes import positive_int
from clio_acp.paths import resolve_paths
from clio_acp.settings import MemorySettings, Settings

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp replay FILE…`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "replay",
        help="replay recorded agent trajectories through the memory middleware",
        description=(
            "Feed recorded trajectories (mini-swe-agent *.traj.json, OpenHands output.jsonl, "
            "pma trajectory_agent.steps.jsonl) through the memory middleware and report "
            "failures, reminders, annotations, environment faults, requirements and the bank."
        ),
    )
    parser.add_argument("files", nargs="*", type=Path, metavar="FILE")
    parser.add_argument("--format", default="auto", choices=["auto", *FORMATS])
    parser.add_argument("--json", action="store_true", help="one JSON object per recording")
    parser.add_argument(
        "--compact-every",
        type=positive_int,
        default=None,
        metavar="N",
        help="simulate a compaction after every N tool calls",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="OUT",
        help="also write a self-contained HTML report (timeline, reminders, final bank)",
    )
    parser.add_argument(
        "--score",
        type=Path,
        metavar="LABELS",
        help="score the reminders against per-call labels (tests/data/trajectory_labels.json): "
        "per trigger recall, precision and reminders per 100 calls",
    )
    parser.add_argument(
        "--compare-pma",
        type=Path,
        metavar="DIR",
        help="agreement of our firing points with the paper's memory agent (pma-tb2 folders)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="replay the files over N worker processes (rules tier; same report as one "
        "process, in the order given)",
    )
    parser.set_defaults(func=run)


def _load_settings() -> Settings:
    from clio_acp.cli.settings_cmd import load_for_cli

    _paths, store = load_for_cli()
    return store()


def _router(settings: Settings):
    """The models router when ``context.memory`` names a usable route, else None."""
    if not settings.context.memory.target:
        return None
    from clio_acp.models.routing import Router

    router = Router(settings, paths=resolve_paths())
    if router.memory_route is None:
        print(
            "clio-acp replay: context.memory names no usable route; rules tier only",
            file=sys.stderr,
        )
    return router


_CONTINUATION = " " * 8
"""Indent of a reminder's further lines in the text report (under its step column)."""


def _print_text(report: ReplayReport) -> None:
    s = report.summary
    print(
        f"{report.instance} ({report.format}): {s['toolCalls']} tool calls, "
        f"{s['failures']} failures, {s['informative']} informative exits, "
        f"{s['reminders']} reminders"
    )
    for r in report.reminders:
        cited = ",".join(r.cited) or "-"
        text = r.text.replace("\n", "\n" + _CONTINUATION)  # a restore lists one entry a line
        print(f"  step {r.step:>4} {r.channel:<10} {r.trigger:<16} [{cited}] {text}")
    for e in report.environmental:
        print(f"  environment [{e['id']}] {e['content']}")
    if report.yardstick:
        steps = report.yardstick.get("injected_after_steps", [])
        print(
            f"  paper's memory agent on this run: {report.yardstick.get('memory_steps', 0)} "
            f"memory steps, {len(steps)} reminders (after agent steps {steps})"
        )
    if report.requirements:
        print(f"  requirements captured: {len(report.requirements)}")
    print(f"  final bank: {s['bankSize']} entries")


def run(args: argparse.Namespace) -> int:
    """Replay the recordings (or ``--score`` them against labels, or ``--compare-pma``
    with the paper agent's runs) and print the report. Exit 0 when every file was
    replayed, 1 when one could not be read, 2 when neither files nor
    ``--compare-pma`` are given."""
    if args.compare_pma is not None:
        return asyncio.run(_compare_pma(args))
    if not args.files:
        print("clio-acp replay: give trajectory FILEs or --compare-pma DIR", file=sys.stderr)
        return 2
    return asyncio.run(_run(args))


async def _compare_pma(args: argparse.Namespace) -> int:
    from clio_acp.agent.recordings import RecordingFormatError as FormatError
    from clio_acp.eval.pma import compare_pma, format_comparison

    settings = _load_settings()
    memory = settings.context.memory
    router = _router(settings)
    factory = None
    if router is not None and router.memory_route is not None:
        from clio_acp.agent.memory_hooks import RouterMemoryClient  # the LLM tier only

        client = RouterMemoryClient(router)
        factory = lambda _settings: client  # noqa: E731 - one client for the whole run
    try:
        comparison = await compare_pma(args.compare_pma, lambda: memory, client_factory=factory)
    except (OSError, FormatError) as exc:
        print(f"clio-acp replay: {exc}", file=sys.stderr)
        return 1
    finally:
        if router is not None:
            await router.aclose()
    if args.json:
        print(json.dumps(comparison.to_dict(), ensure_ascii=False))
    else:
        print(format_comparison(comparison))
    return 0


def _write_html(out: Path, items: list[tuple[Path, str, list[ReplayReport]]]) -> bool:
    """Render the HTML report for the replayed files into ``out``; False on failure."""
    from clio_acp.agent.recordings import load_recordings
    from clio_acp.eval.replay_html import render_html

    pairs = []
    for path, fmt, reports in items:
        try:
            recordings = load_recordings(path, fmt)
        except (OSError, RecordingFormatError):
            recordings = []
        # In file order, one report per recording: by name, every recording of an
        # instance id that occurs twice in one file (a rerun) got the last one's timeline.
        if [r.name for r in recordings] != [report.instance for report in reports]:
            recordings = [None] * len(reports)  # the file changed since: effects only
        pairs += list(zip(reports, recordings, strict=True))
    try:
        out.write_text(render_html(pairs), encoding="utf-8")
    except OSError as exc:
        print(f"clio-acp replay: cannot write {out}: {exc}", file=sys.stderr)
        return False
    print(f"clio-acp replay: HTML report written to {out}", file=sys.stderr)
    return True


async def _replay_here(
    path: Path,
    fmt: str,
    memory: MemorySettings,
    factory: Any,
    compact_every: int | None,
    part: tuple[int, int] | None = None,
) -> tuple[list[ReplayReport], str | None]:
    """One file's reports (or one interleaved share of them, ``part``), or the error
    line to print instead (unreadable file)."""
    try:
        reports = await replay_file(
            path,
            fmt,
            lambda: memory,
            client_factory=factory,
            compact_every=compact_every,
            part=part,
        )
    except RecordingFormatError as exc:
        return [], str(exc)
    except OSError as exc:
        return [], f"{path}: {exc}"
    return reports, None


FILES_AHEAD = 4
"""``--jobs N`` keeps N × this many files submitted to the workers at a time."""

_WORKER_LOOP: asyncio.AbstractEventLoop | None = None
"""The event loop of a ``--jobs`` worker process, made once and kept for every file
it replays (a loop per file would also start a thread per file for the file read)."""


def _replay_in_worker(
    path: Path,
    fmt: str,
    memory: MemorySettings,
    compact_every: int | None,
    part: tuple[int, int] | None = None,
) -> tuple[list[ReplayReport], str | None]:
    """``_replay_here`` in a ``--jobs`` worker process (rules tier), on the worker's
    own long-lived event loop."""
    global _WORKER_LOOP
    if _WORKER_LOOP is None:
        _WORKER_LOOP = asyncio.new_event_loop()
    return _WORKER_LOOP.run_until_complete(
        _replay_here(path, fmt, memory, None, compact_every, part)
    )


def _worker_context() -> Any:
    """How ``--jobs`` workers start: forked on Linux, so each begins with the replay
    modules this process has imported (~0.3 s of CPU each otherwise; Python 3.14 made
    forkserver the default there); elsewhere the platform's default (None), fork being
    unsafe on macOS."""
    if sys.platform != "linux":
        return None
    import multiprocessing

    return multiprocessing.get_context("fork")


_NON_BLANK = re.compile(rb"\S")
"""A byte that is not ASCII whitespace (what ``bytes.strip`` keeps)."""


def _many_instances(path: Path, fmt: str) -> bool:
    """True when ``path`` looks like an OpenHands output.jsonl of more than one
    instance (its first non-blank line holds a ``"history"``, and another non-blank
    line follows): such a file is shared out over the ``--jobs`` workers instead of
    going to one. Only a cost decision: a file shared out by mistake gives the same
    reports (``load_recordings`` ``part``), and one of a single instance is not shared
    (each further share would parse its line again to tell the format, for nothing).
    The parent process asks this of every file before the workers are busy, so the
    file is searched as mapped bytes: nothing decoded or copied."""
    if fmt not in ("auto", "openhands") or path.suffix == ".json" or not path.is_file():
        return False  # not a pipe either: peeking would consume it (or block on a FIFO)
    try:
        with (
            path.open("rb") as handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view,
        ):
            start = _NON_BLANK.search(view)
            end = view.find(b"\n", start.start()) if start else -1
            return (
                end >= 0
                and view.find(b'"history"', start.start(), end) >= 0
                and _NON_BLANK.search(view, end) is not None
            )
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return False


def _interleaved(shares: list[list[ReplayReport]]) -> list[ReplayReport]:
    """The reports of k interleaved shares back in file order (share i holds the
    instances whose ordinal is i modulo k)."""
    merged: list[ReplayReport] = []
    k = len(shares)
    while len(merged) < sum(len(s) for s in shares):
        n = len(merged)
        merged.append(shares[n % k][n // k])
    return merged


async def _replayed(
    args: argparse.Namespace, memory: MemorySettings, factory: Any, progress: _Progress
) -> AsyncIterator[tuple[Path, list[ReplayReport], str | None]]:
    """``(path, reports, error)`` per file, in the order given: here, or with
    ``--jobs N`` fanned out over N processes (``concurrent.futures``), a file of many
    OpenHands instances shared out over all of them. Each recording is replayed from
    a fresh middleware either way, so the reports are the same. The LLM tier (a
    memory client) stays in this process."""
    jobs = args.jobs
    if jobs > 1 and factory is not None:
        print("clio-acp replay: --jobs applies to the rules tier; one process", file=sys.stderr)
        jobs = 1
    shared = {p for p in args.files if jobs > 1 and _many_instances(p, args.format)}
    if not shared:
        jobs = min(jobs, len(args.files))  # a worker per file at most
    if jobs <= 1:
        for path in args.files:
            progress.start(path)
            reports, error = await _replay_here(
                path, args.format, memory, factory, args.compact_every
            )
            yield path, reports, error
        return
    async for item in _fanned_out(args, memory, jobs, shared, progress):
        yield item


async def _fanned_out(
    args: argparse.Namespace,
    memory: MemorySettings,
    jobs: int,
    shared: set[Path],
    progress: _Progress,
) -> AsyncIterator[tuple[Path, list[ReplayReport], str | None]]:
    """``_replayed`` over a process pool of ``jobs`` workers; each file in ``shared``
    goes out in ``jobs`` interleaved shares. A shared file whose share failed (or that
    gave no instance at all) is replayed again here, so its error line is the one a
    single process prints."""
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: only for --jobs

    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=_worker_context()) as pool:

        def submit(path: Path, part: tuple[int, int] | None) -> asyncio.Future[Any]:
            return loop.run_in_executor(
                pool, _replay_in_worker, path, args.format, memory, args.compact_every, part
            )

        def submit_file(path: Path) -> tuple[Path, list[asyncio.Future[Any]]]:
            if path in shared:
                return path, [submit(path, (i, jobs)) for i in range(jobs)]
            return path, [submit(path, None)]

        # A window of files in flight, not the whole corpus: a run over many thousand
        # recordings would otherwise hold a work item (and soon a report) per file.
        files = iter(args.files)
        pending = deque(submit_file(path) for path in islice(files, jobs * FILES_AHEAD))
        while pending:
            path, futures = pending.popleft()
            following = next(files, None)
            if following is not None:
                pending.append(submit_file(following))
            progress.start(path)
            results = [await future for future in futures]
            if len(results) == 1:
                yield path, *results[0]
                continue
            if any(error for _reports, error in results) or not any(r for r, _e in results):
                yield (
                    path,
                    *(await _replay_here(path, args.format, memory, None, args.compact_every)),
                )
                continue
            yield path, _interleaved([reports for reports, _error in results]), None


class _Progress:
    """Progress of a replay on stderr: a line per file when there are several or the
    LLM tier runs (minutes per file), and one per memory step with the LLM tier."""

    def __init__(self, files: int) -> None:
        self.files, self.index, self.steps, self.llm = files, 0, 0, False
        self._started = time.monotonic()
        self._file_started = self._started

    @property
    def shown(self) -> bool:
        return self.llm or self.files > 1

    def start(self, path: Path) -> None:
        self.index += 1
        self._file_started = time.monotonic()
        if self.shown:
            tier = " (LLM tier: each memory step is a model call)" if self.llm else ""
            self._say(f"[{self.index}/{self.files}] {path}{tier}")

    def step(self) -> None:
        self.steps += 1
        if self.llm:
            took = time.monotonic() - self._file_started
            self._say(f"[{self.index}/{self.files}] memory step {self.steps} ({took:.0f} s)")

    def done(self, reports: list[ReplayReport]) -> None:
        if self.shown:
            calls = sum(r.tool_calls for r in reports)
            took = time.monotonic() - self._file_started
            self._say(f"[{self.index}/{self.files}] done: {calls} tool calls in {took:.1f} s")

    def _say(self, text: str) -> None:
        print(f"clio-acp replay: {text}", file=sys.stderr, flush=True)


class _CountingClient:
    """The memory client with a progress line per completion."""

    def __init__(self, inner: Any, progress: _Progress) -> None:
        self._inner, self._progress = inner, progress

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self._inner.complete(*args, **kwargs)
        finally:
            self._progress.step()


async def _run(args: argparse.Namespace) -> int:
    settings = _load_settings()
    memory = settings.context.memory
    router = _router(settings)
    factory = None
    progress = _Progress(len(args.files))
    if router is not None and router.memory_route is not None:
        from clio_acp.agent.memory_hooks import RouterMemoryClient  # the LLM tier only

        client = _CountingClient(RouterMemoryClient(router), progress)
        factory = lambda _settings: client  # noqa: E731 - one client for the whole run
        progress.llm = True
    failed = 0
    labels = None
    if args.score is not None:
        from clio_acp.eval.labels import LabelError, load_labels

        try:
            labels = await asyncio.to_thread(load_labels, args.score)
        except LabelError as exc:
            print(f"clio-acp replay: {exc}", file=sys.stderr)
            return 2
    all_reports: list[ReplayReport] = []
    html_items: list[tuple[Path, str, list[ReplayReport]]] = []
    totals = {"files": 0, "toolCalls": 0, "failures": 0, "informative": 0, "reminders": 0}
    try:
        async for path, reports, error in _replayed(args, memory, factory, progress):
            if error is not None:
                print(f"clio-acp replay: {error}", file=sys.stderr)
                failed += 1
                continue
            totals["files"] += 1
            progress.done(reports)
            if args.html is not None:
                html_items.append((path, args.format, reports))
            for report in reports:
                summary = report.summary
                for key in ("toolCalls", "failures", "informative", "reminders"):
                    totals[key] += summary[key]
                if args.score is not None:
                    all_reports.append(report)  # kept only to be scored at the end
                    continue
                if args.json:
                    print(json.dumps(report.to_dict(), ensure_ascii=False), flush=True)
                else:
                    _print_text(report)
    finally:
        if router is not None:
            await router.aclose()
    if labels is not None:
        from clio_acp.eval.labels import format_score, score_reports

        score = score_reports(all_reports, labels)
        if args.json:
            print(json.dumps(score.to_dict(), ensure_ascii=False))
        else:
            print(format_score(score))
    elif not args.json:
        print(
            f"TOTAL: {totals['files']} files, {totals['toolCalls']} tool calls, "
            f"{totals['failures']} failures, {totals['informative']} informative exits, "
            f"{totals['reminders']} reminders"
        )
    if args.html is not None and not await asyncio.to_thread(_write_html, args.html, html_items):
        failed += 1
    return 1 if failed else 0
