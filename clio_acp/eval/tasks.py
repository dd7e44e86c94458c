"""A/B task files: what one task asks, the workspace it starts from, how it is judged,
and how the built-in scripted model plays it (MEMORY_SPEC §9, issue 10 item 1).

Owns the task schema (pydantic, camelCase YAML), loading a folder of ``*.yaml`` task
files (:func:`load_tasks`; the default tasks ship in ``clio_acp/eval/tasks/``) and
writing a task's workspace fixture into a folder. It runs no session and no check.

A task file::

    id: repeat-failure-recovery          # unique, non-blank
    expectedSignal: repeated_failure     # what memory should notice (documentation)
    keyFact: ["config\\.ini not found"]   # regexes memory text must carry to help
    expectedWinners: [rules, llm]        # tiers expected to beat the baseline
    turns:                               # prompts in order; "compact: true" compacts
      - prompt: "Run python3 app.py and make it succeed."
    files: {app.py: "..."}               # workspace fixture (relative paths)
    fixture: some-folder                 # optional folder (relative to the file) copied first
    check: {command: "python3 app.py", timeoutMs: 30000}   # pass = exit code 0
    memorySettings: {cadenceToolCalls: 3}  # context.memory overlay for every variant
    distractor: {replace: {"config.ini": "cache.db"}}  # the distractor variant (below)
    scripted: {...}                      # the scripted model's play (see ScriptedPlay)

A task with a ``keyFact`` is *positive*: memory can help, but only by carrying that
fact. A task without one is *negative* (healthy runs, converging edit loops): any
reminder is a cost. The *distractor* variant applies ``distractor.replace`` to every
string of the task except its id, key fact and check — prompts, files, the scripted
play and its memory answers — so that memory still speaks, about something that does
not help; it must score as the baseline does.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "DEFAULT_TASKS_DIR",
    "DEFAULT_TASK_IDS",
    "Distractor",
    "EvalTask",
    "ScriptedPlay",
    "ScriptedStep",
    "TaskError",
    "load_tasks",
]

DEFAULT_TASKS_DIR = Path(__file__).with_name("tasks")
DEFAULT_TASK_IDS = (  # MEMORY_SPEC §9 "Default tasks"
    "repeat-failure-recovery",
    "post-compaction-constraint",
    "healthy-trajectory-silence",
)
MIN_TASKS = 3  # §9: at least 3 tasks with unique, non-blank ids


class TaskError(ValueError):
    """A task file or task set is invalid; the message names the file and field."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ScriptedStep(_Model):
    """One scripted agent step: exactly one of ``run`` (shell command via
    run_command), ``write`` + ``content`` (write_file), ``tool`` + ``args`` (any tool)
    or ``say`` (final answer text, ends the turn)."""

    run: str | None = None
    write: str | None = None
    content: str | None = None
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    say: str | None = None

    @model_validator(mode="after")
    def _one(self) -> ScriptedStep:
        kinds = [k for k in ("run", "write", "tool", "say") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("a step has exactly one of run, write, tool, say")
        if self.write is not None and self.content is None:
            raise ValueError("write needs content")
        return self

    def tool_call(self) -> tuple[str, dict[str, Any]] | None:
        """(tool name, arguments) or None for a ``say`` step."""
        if self.run is not None:
            return "run_command", {"command": self.run}
        if self.write is not None:
            return "write_file", {"path": self.write, "content": self.content}
        if self.tool is not None:
            return self.tool, dict(self.args)
        return None


class ScriptedTurn(_Model):
    """The play of one prompt turn: ``steps`` until memory text carrying the task's
    key fact is visible, then ``on_memory`` instead of the remaining steps (the steps
    already taken stay taken). In a negative task (no key fact) any memory text makes
    the agent take ``on_memory`` as a detour and then the remaining steps. Without
    ``on_memory`` memory changes nothing."""

    steps: list[ScriptedStep] = Field(min_length=1)
    on_memory: list[ScriptedStep] | None = None


class MemoryRule(_Model):
    """An answer of the scripted memory model: the first rule whose
    ``when_input_contains`` occurs in the memory request wins. ``{cite}`` in the reply
    becomes the first bank entry id seen in the request (empty when there is none)."""

    when_input_contains: str = ""
    reply: str


class ScriptedPlay(_Model):
    """How the built-in scripted model plays a task (``clio-acp eval ab --scripted``)."""

    turns: list[ScriptedTurn] = Field(min_length=1)
    summary: str = "Goal: continue the task. Progress: work in progress."
    """Answer to compaction summary requests."""
    memory: list[MemoryRule] = Field(default_factory=list)
    """LLM tier answers; none matching: ``<operations>[]</operations>`` + silence."""


class Distractor(_Model):
    """How the distractor variant differs: literal replacements (applied in order),
    then ``files`` overrides (``null`` removes a file), and optionally the scripted
    memory model's answers for it (replacing ``memory``)."""

    replace: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str | None] = Field(default_factory=dict)
    memory: list[MemoryRule] | None = None

    @model_validator(mode="after")
    def _something(self) -> Distractor:
        if not self.replace and not self.files and self.memory is None:
            raise ValueError("a distractor needs replace, files or memory")
        return self


def _replaced(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in pairs:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_replaced(v, pairs) for v in value]
    if isinstance(value, dict):
        return {_replaced(k, pairs): _replaced(v, pairs) for k, v in value.items()}
    return value


class TaskTurn(_Model):
    prompt: str | None = None
    compact: bool = False

    @model_validator(mode="after")
    def _one(self) -> TaskTurn:
        if (self.prompt is None) == (not self.compact):
            raise ValueError("a turn is either a prompt or compact: true")
        return self


class TaskCheck(_Model):
    command: str = Field(min_length=1)
    """Shell command run in the workspace after the session; exit code 0 = pass."""
    timeout_ms: int = Field(default=60_000, ge=1)


class EvalTask(_Model):
    id: str
    expected_signal: str = "silence"
    description: str = ""
    key_fact: list[str] = Field(default_factory=list)
    """Regexes (case-insensitive); memory helps only when its text matches all."""
    expected_winners: list[Literal["rules", "llm"]] = Field(default_factory=list)
    """Tiers expected to beat the baseline on the scripted run (documentation and
    the harness's own tests)."""
    memory_settings: dict[str, Any] = Field(default_factory=dict)
    """``context.memory`` keys set for every variant of this task."""
    distractor: Distractor | None = None
    is_distractor: bool = Field(default=False, exclude=True)
    turns: list[TaskTurn] = Field(min_length=1)
    files: dict[str, str] = Field(default_factory=dict)
    fixture: str | None = None
    check: TaskCheck
    scripted: ScriptedPlay | None = None
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("id must be non-blank")
        return value

    @field_validator("key_fact")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"keyFact {pattern!r} is not a regex: {exc}") from None
        return value

    @field_validator("memory_settings")
    @classmethod
    def _memory_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        from clio_acp.settings import MemorySettings

        bad = {"enabled", "target", "model"} & set(value)
        if bad:
            raise ValueError(f"memorySettings may not set {', '.join(sorted(bad))}")
        MemorySettings.model_validate(value)
        return value

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            p = PurePosixPath(name)
            if p.is_absolute() or ".." in p.parts or not name.strip():
                raise ValueError(f"file path must be relative inside the workspace: {name!r}")
        return value

    @property
    def prompts(self) -> list[str]:
        """The user prompts of the task's turns, in order (turns without a prompt left out)."""
        return [t.prompt for t in self.turns if t.prompt is not None]

    @property
    def negative(self) -> bool:
        """No key fact: memory cannot help, any reminder is a cost."""
        return not self.key_fact

    def key_fact_in(self, text: str) -> bool:
        """Whether ``text`` carries the key fact (every pattern matches; False for a
        negative task)."""
        return bool(self.key_fact) and all(re.search(p, text, re.IGNORECASE) for p in self.key_fact)

    def distractor_variant(self) -> EvalTask | None:
        """This task with ``distractor.replace`` applied to everything but the id,
        key fact and check (None without a distractor)."""
        if self.distractor is None:
            return None
        pairs = list(self.distractor.replace.items())
        keep = {"id", "key_fact", "check", "distractor", "expected_winners", "memory_settings"}
        data = _replaced(self.model_dump(exclude=keep), pairs)
        for name, text in self.distractor.files.items():
            if text is None:
                data["files"].pop(name, None)
            else:
                data["files"][name] = text
        data.update({name: getattr(self, name) for name in keep})
        variant = EvalTask.model_validate(data)
        if self.distractor.memory is not None and variant.scripted is not None:
            variant.scripted.memory = list(self.distractor.memory)
        variant.is_distractor = True
        variant.source = self.source
        return variant

    def materialize(self, workspace: Path) -> None:
        """Write the fixture folder (when given) then ``files`` into ``workspace``.
        Raises ``TaskError`` when the fixture folder is missing."""
        workspace.mkdir(parents=True, exist_ok=True)
        if self.fixture:
            base = self.source.parent if self.source else Path.cwd()
            folder = (base / self.fixture).resolve()
            if not folder.is_dir():
                raise TaskError(f"{self.id}: fixture folder not found: {folder}")
            shutil.copytree(folder, workspace, dirs_exist_ok=True)
        for name, text in self.files.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def load_task(path: Path) -> EvalTask:
    """One task file; ``TaskError`` naming the file for bad YAML or fields."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TaskError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise TaskError(f"{path}: a task file is a mapping")
    try:
        task = EvalTask.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top)"
        raise TaskError(f"{path}: {where}: {err['msg']}") from None
    task.source = path
    return task


def load_tasks(folder: Path | None = None, ids: list[str] | None = None) -> list[EvalTask]:
    """The tasks of ``folder`` (default: the shipped tasks), sorted by file name, or
    only ``ids`` in that order. Raises ``TaskError`` for an unknown id, duplicate or
    blank ids, or fewer than 3 tasks (§9)."""
    folder = folder or DEFAULT_TASKS_DIR
    if not folder.is_dir():
        raise TaskError(f"{folder}: not a folder of task files")
    tasks = [load_task(p) for p in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))]
    by_id: dict[str, EvalTask] = {}
    for task in tasks:
        if task.id in by_id:
            raise TaskError(f"duplicate task id {task.id!r} ({task.source})")
        by_id[task.id] = task
    if ids:
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise TaskError(f"unknown task id(s): {', '.join(missing)}")
        tasks = [by_id[i] for i in ids]
    elif folder == DEFAULT_TASKS_DIR:
        tasks = [by_id[i] for i in DEFAULT_TASK_IDS if i in by_id] + [
            t for t in tasks if t.id not in DEFAULT_TASK_IDS
        ]
    check_task_set([t.id for t in tasks])
    return tasks


def check_task_set(ids: list[str]) -> None:
    """§9: at least 3 tasks, ids unique and non-blank; ``TaskError`` otherwise."""
    if len(ids) < MIN_TASKS:
        raise TaskError(f"at least {MIN_TASKS} tasks are required (got {len(ids)})")
    if any(not i.strip() for i in ids):
        raise TaskError("task ids must be non-blank")
    if len(set(ids)) != len(ids):
        raise TaskError("task ids must be unique")
