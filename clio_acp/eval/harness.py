"""The A/B harness (``runProactiveMemoryEval``, MEMORY_SPEC §9): every variant over
every task, one real session per trial, in an isolated temporary workspace.

Owns :func:`run_matrix` (the variant × task × {main, distractor} × seed loop over any
runner, with the §9 rules: fixed variant order, a raising runner becomes a failed
trial and the matrix goes on, a baseline trial that emits memory rows is an
:class:`EvalError`), the validated
:class:`RunnerOutput`, and :class:`SessionRunner` (the real runner: a
``SessionManager`` with private data/state/config/cache roots per trial, the task's
prompts in ``bypass`` mode, the pass check as a shell command, the telemetry rows read
back from that trial's own ``steps.jsonl``, and whether the memory text that reached
the agent — reminders and annotations, as the session reported them — carried the
task's key fact). :class:`ScriptedTarget` serves the built-in deterministic model;
:class:`SettingsTarget` uses a configured target.
It prints nothing; ``clio_acp.cli.eval_cmd`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clio_acp.eval.report import VARIANTS, TrialResult
from clio_acp.eval.scripted_agent import ScriptedAgent
from clio_acp.eval.tasks import EvalTask, TaskError, check_task_set
from clio_acp.memory.telemetry import StepRecord, parse_step_line
from clio_acp.paths import Paths
from clio_acp.settings import Settings, apply_overrides

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SEEDS",
    "EvalError",
    "RunnerOutput",
    "ScriptedTarget",
    "SessionRunner",
    "SettingsTarget",
    "run_matrix",
    "trial_plan",
]

MAX_SAFE_INTEGER = 2**53 - 1  # §9: token counts are safe integers (the reference's JS bound)
MEMORY_IDLE_TIMEOUT_S = 120.0  # wait for a detached LLM memory step after the last turn
DEFAULT_SEEDS = 3


class EvalError(RuntimeError):
    """The experiment itself is invalid (bad target, a baseline trial with memory
    rows): the run stops."""


class RunnerOutput(BaseModel):
    """What a runner returns for one trial (§9 "Runner")."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)
    passed: bool
    action_input_tokens: int = Field(ge=0, le=MAX_SAFE_INTEGER)
    action_output_tokens: int = Field(ge=0, le=MAX_SAFE_INTEGER)
    action_latency_ms: float = Field(ge=0)
    rows: list[StepRecord] = Field(default_factory=list)
    memory_seen: bool | None = None
    key_fact_seen: bool | None = None

    @field_validator("action_latency_ms")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("actionLatencyMs must be finite")
        return value


Runner = Callable[[EvalTask, str, int], Awaitable[RunnerOutput]]


def check_target(target: dict[str, str]) -> dict[str, str]:
    """§9: ``{id, model}`` both non-blank after trimming; ``EvalError`` otherwise."""
    tid = str(target.get("id") or "").strip()
    model = str(target.get("model") or "").strip()
    if not tid or not model:
        raise EvalError("the target needs a non-blank id and model")
    return {"id": tid, "model": model}


def trial_plan(tasks: Sequence[EvalTask], seeds: int) -> list[tuple[EvalTask, int]]:
    """Every (task or its distractor variant, seed) in run order: per task, the main
    variant's seeds, then the distractor's."""
    plan: list[tuple[EvalTask, int]] = []
    for task in tasks:
        for variant in (task, task.distractor_variant()):
            if variant is not None:
                plan += [(variant, seed) for seed in range(seeds)]
    return plan


async def run_matrix(
    tasks: Sequence[EvalTask],
    runner: Runner,
    *,
    variants: Sequence[str] = VARIANTS,
    seeds: int = 1,
    on_trial: Callable[[TrialResult], None] | None = None,
) -> list[TrialResult]:
    """Run ``variants`` (kept in the §9 order baseline, rules, llm) over ``tasks``,
    each task's distractor variant and ``seeds`` seeds (0 … seeds-1).

    A runner that raises (or returns an invalid output) gives a failed trial with
    zeros and ``error``; the matrix continues. A baseline trial with memory rows
    raises :class:`EvalError`. ``TaskError`` for fewer than 3 tasks or bad ids."""
    check_task_set([t.id for t in tasks])
    order = [v for v in VARIANTS if v in variants] + [v for v in variants if v not in VARIANTS]
    trials: list[TrialResult] = []
    for variant in order:
        for task, seed in trial_plan(tasks, max(1, seeds)):
            trial = await _one_trial(runner, task, variant, seed)
            trials.append(trial)
            if on_trial is not None:
                on_trial(trial)
    return trials


async def _one_trial(runner: Runner, task: EvalTask, variant: str, seed: int) -> TrialResult:
    labels = {"seed": seed, "distractor": task.is_distractor, "negative": task.negative}
    try:
        out = await runner(task, variant, seed)
        if not isinstance(out, RunnerOutput):
            out = RunnerOutput.model_validate(out)
    except (EvalError, asyncio.CancelledError):
        raise
    except Exception as exc:
        log.info("trial %s/%s failed", variant, task.id, exc_info=True)
        return TrialResult(variant, task.id, False, error=f"{type(exc).__name__}: {exc}", **labels)
    if variant == "baseline" and out.rows:
        raise EvalError(
            f"baseline trial {task.id!r} emitted {len(out.rows)} memory rows "
            "(memory must be off in the baseline)"
        )
    return TrialResult(
        variant,
        task.id,
        out.passed,
        out.action_input_tokens,
        out.action_output_tokens,
        out.action_latency_ms,
        list(out.rows),
        memory_seen=out.memory_seen,
        key_fact_seen=out.key_fact_seen,
        **labels,
    )


# -- targets --------------------------------------------------------------------------


class Target(Protocol):
    target: dict[str, str]

    def settings_for(self, variant: str, task: EvalTask) -> Settings:
        """The settings one trial
        of ``variant``
        (baseline, rules, llm,
        …) on ``task`` runs
        with: the user's or
        scripted base with the
        variant's memory
        overlay."""


def _variant_overlay(
    variant: str, target_id: str, model: str, task: EvalTask | None = None
) -> dict[str, Any]:
    """baseline: memory off; rules: memory on, no memory route; llm: memory route =
    the target under test. The task's ``memorySettings`` apply to every variant."""
    memory: dict[str, Any] = dict(task.memory_settings) if task is not None else {}
    memory.update({"enabled": variant != "baseline", "target": None, "model": None})
    if variant == "llm":
        memory.update(target=target_id, model=model)
    return {
        "chat": {"target": target_id, "model": model},
        "context": {"memory": memory},
        "permissions": {"mode": "bypass"},
    }


class SettingsTarget:
    """A target from the user's settings (``--target ID``, live model)."""

    def __init__(self, settings: Settings, target_id: str, model: str | None = None) -> None:
        from clio_acp.models.routing import EMBEDDED_TARGET_ID, embedded_target

        ids = [t.id for t in settings.targets]
        if target_id not in ids and target_id != EMBEDDED_TARGET_ID:
            raise EvalError(
                f"unknown target {target_id!r} (configured: {', '.join(ids) or 'none'})"
            )
        if not model and settings.chat.target == target_id:
            model = settings.chat.model
        if not model:
            model = (
                settings.targets[ids.index(target_id)].default_model
                if target_id in ids
                else embedded_target().default_model  # the implicit local model
            )
        self.base = settings
        self.target = check_target({"id": target_id, "model": model or ""})
        self.seed: int | None = None

    def settings_for(self, variant: str, task: EvalTask) -> Settings:
        """The variant's settings; the trial's seed goes to ``chat.seed`` when the
        user's settings set none (each seed samples anew, reproducibly)."""
        overlay = _variant_overlay(variant, self.target["id"], self.target["model"], task)
        if self.seed is not None and self.base.chat.seed is None:
            overlay["chat"]["seed"] = self.seed
        return apply_overrides(self.base, overlay, source="eval")

    async def prepare(self, task: EvalTask, seed: int = 0) -> None:
        """Before a trial: remember its seed (sent as ``chat.seed`` when the settings set none)."""
        self.seed = seed

    def prepare_paths(self, paths: Paths) -> None:
        """Let a trial's private data root see the installed embedded model (read
        only use; records, journal and telemetry stay private to the trial)."""
        from clio_acp.paths import resolve_paths

        installed = resolve_paths().data / "local-model"
        if installed.is_dir():
            paths.data.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                (paths.data / "local-model").symlink_to(installed, target_is_directory=True)

    def set_turn(self, turn: int) -> None:
        """A live model needs no turn number (the scripted target does)."""
        return None

    async def aclose(self) -> None:
        """Nothing to close: the trial's sessions own their model clients."""
        return None


class ScriptedTarget:
    """The built-in deterministic model: a loopback scripted server whose answers
    follow each task's ``scripted`` play (:class:`ScriptedAgent`)."""

    def __init__(self) -> None:
        from clio_acp.models.scripted import DEFAULT_MODEL, TARGET_ID, ScriptedModelServer

        self.server = ScriptedModelServer().start()
        self.target = check_target({"id": TARGET_ID, "model": DEFAULT_MODEL})
        self.agent: ScriptedAgent | None = None
        base = {
            "version": 2,
            "targets": [
                {
                    "id": TARGET_ID,
                    "runtime": "llamacpp",
                    "url": self.server.base_url,
                    "maxConcurrentRequests": 4,
                }
            ],
        }
        self.base = Settings.model_validate(base)

    def settings_for(self, variant: str, task: EvalTask) -> Settings:
        """The variant's settings over the scripted server's routes (chat and, for the llm
        variants, memory)."""
        overlay = _variant_overlay(variant, self.target["id"], self.target["model"], task)
        return apply_overrides(self.base, overlay, source="eval")

    async def prepare(self, task: EvalTask, seed: int = 0) -> None:
        """Load ``task``'s scripted play (and its key fact, unless the task is a negative one)
        into the server's responder, seeded by ``seed``. Raises ``TaskError`` for a task
        without a scripted play."""
        if task.scripted is None:
            raise TaskError(f"task {task.id!r} has no scripted play (needed for --scripted)")
        key_fact = None if task.negative else task.key_fact_in
        self.agent = ScriptedAgent(task.scripted, task.prompts, key_fact=key_fact, seed=seed)
        self.server.responder = self.agent

    def set_turn(self, turn: int) -> None:
        """Tell the scripted agent which prompt turn (0-based) the trial is on."""
        if self.agent is not None:
            self.agent.turn = turn

    async def aclose(self) -> None:
        """Stop the scripted server (in a worker thread: it joins its serving thread)."""
        await asyncio.to_thread(self.server.stop)


# -- the real runner ------------------------------------------------------------------


@dataclass
class _Usage:
    """Sums the action model's usage over a trial; keeps the first error notice and
    every memory text the session delivered (reminders, restores, annotations)."""

    input: int = 0
    output: int = 0
    error: str | None = None
    memory: list[str] = field(default_factory=list)

    def __call__(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "usage_update":
            self.input += int(event.input_tokens or 0)
            self.output += int(event.output_tokens or 0)
        elif kind == "notice" and event.level == "error" and self.error is None:
            self.error = str(event.text)
        elif kind == "memory_reminder":
            self.memory.append(str(event.text))
        elif kind == "tool_call_finished" and getattr(event, "annotation", None):
            self.memory.append(str(event.annotation))


def _read_rows(path: Path) -> list[StepRecord]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append(parse_step_line(line))
    return rows


async def _run_check(task: EvalTask, workspace: Path) -> bool:
    proc = await asyncio.create_subprocess_shell(
        task.check.command,
        cwd=workspace,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return await asyncio.wait_for(proc.wait(), task.check.timeout_ms / 1000) == 0
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return False


async def _memory_idle(session: Any) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(session.memory.wait_idle(), MEMORY_IDLE_TIMEOUT_S)


async def _play_turns(session: Any, task: EvalTask, target: Any, usage: _Usage) -> None:
    """The task's turns in order. Before each prompt and each compaction an in-flight
    memory step may finish (bounded), so a result does not hinge on whether a
    detached step beat the next turn: the harness measures what memory says, not
    the race."""
    turn = 0
    for step in task.turns:
        await _memory_idle(session)
        if step.compact:
            await session.compact()
            continue
        target.set_turn(turn)
        await session.prompt(step.prompt or "")
        turn += 1
        if usage.error is not None:  # a model failure: the trial failed, say why
            raise RuntimeError(usage.error)


@contextlib.contextmanager
def _no_bytecode_caches():
    """``PYTHONDONTWRITEBYTECODE=1`` for the commands a trial runs (tool calls and the
    check), restored afterwards. A task edits a module and reruns the script that
    imports it, often within the same second and at the same size (``a - b`` to
    ``a + b``); a ``.pyc`` written by the first run would then pass for fresh and the
    rerun would run the old code."""
    before = os.environ.get("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            os.environ["PYTHONDONTWRITEBYTECODE"] = before


class SessionRunner:
    """Runs one trial as a real session (``clio_acp.session.manager.SessionManager``)
    with its own temporary roots and workspace, removed afterwards (``keep`` keeps
    them under ``keep`` for inspection). The trial's commands write no ``.pyc``
    (``_no_bytecode_caches``)."""

    def __init__(
        self, target: Any, *, keep: Path | None = None, trial_timeout_s: float | None = None
    ) -> None:
        self.target = target
        self.keep = keep
        self.trial_timeout_s = trial_timeout_s

    async def __call__(self, task: EvalTask, variant: str, seed: int = 0) -> RunnerOutput:
        with _no_bytecode_caches():
            return await self._in_root(task, variant, seed)

    async def _in_root(self, task: EvalTask, variant: str, seed: int) -> RunnerOutput:
        if self.keep is not None:
            name = f"{variant}-{task.id}{'~distractor' if task.is_distractor else ''}"
            root = self.keep / (name if seed == 0 else f"{name}-seed{seed}")
            root.mkdir(parents=True, exist_ok=True)
            return await self._trial(task, variant, seed, root)
        with tempfile.TemporaryDirectory(prefix="clio-eval-") as tmp:
            return await self._trial(task, variant, seed, Path(tmp))

    async def _trial(self, task: EvalTask, variant: str, seed: int, root: Path) -> RunnerOutput:
        from clio_acp.session.manager import SessionManager

        workspace = root / "workspace"
        await asyncio.to_thread(task.materialize, workspace)
        paths = Paths(
            data=root / "data", state=root / "state", config=root / "config", cache=root / "cache"
        )
        await self.target.prepare(task, seed)
        settings = self.target.settings_for(variant, task)
        if hasattr(self.target, "prepare_paths"):
            await asyncio.to_thread(self.target.prepare_paths, paths)
        manager = SessionManager(paths=paths, settings=lambda: settings)
        usage = _Usage()
        try:
            session = await manager.new_session(workspace, mode="bypass")
            session.subscribe(usage)
            started = time.perf_counter()
            try:
                await asyncio.wait_for(
                    _play_turns(session, task, self.target, usage), self.trial_timeout_s
                )
            except TimeoutError:
                raise RuntimeError(
                    f"trial timed out after {self.trial_timeout_s:g} s (--trial-timeout)"
                ) from None
            latency_ms = (time.perf_counter() - started) * 1000
            await _memory_idle(session)
        finally:
            await manager.aclose()
        rows = await asyncio.to_thread(_read_rows, paths.steps_file)
        passed = await _run_check(task, workspace)
        memory_text = "\n".join(usage.memory)
        return RunnerOutput(
            passed=passed,
            action_input_tokens=usage.input,
            action_output_tokens=usage.output,
            action_latency_ms=latency_ms,
            rows=rows,
            memory_seen=bool(usage.memory),
            key_fact_seen=task.key_fact_in(memory_text),
        )
