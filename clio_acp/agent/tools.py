"""Tools the agent can call, the host they run on, and workspace confinement.

Owns the tool registry (names, pydantic argument models, the OpenAI function schemas
sent to the model, kind and permission category of each tool), the :class:`ToolHost`
protocol (``read_text``, ``write_text``, ``run_command``) with its local default, the
confinement of every path to the session's workspace roots (symlink escapes refused),
and the canonical disposition of each result (ok/error, exit code, digest) that the
memory middleware reads. It does not ask for permission (``permissions.py``), spill
results (``context/spill.py`` via the loop) or talk to a model.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import copy
import difflib
import fnmatch
import hashlib
import logging
import os
import re
import shutil
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clio_acp.context.spill import SpillError, SpillStore, check_ref, grep_text, read_slice

log = logging.getLogger(__name__)

ToolCategory = Literal["read", "edit", "execute"]
"""Permission category: ``read`` never needs approval; ``edit`` and ``execute`` may."""

COMMAND_TIMEOUT_MS_DEFAULT = 120_000
COMMAND_TIMEOUT_MS_MAX = 600_000
KILL_GRACE_S = 2.0
"""Seconds between SIGTERM and SIGKILL of a cancelled command's process group."""
READ_FILE_MAX_LINES = 2_000
LIST_MAX_ENTRIES = 500
GLOB_MAX_RESULTS = 500
GREP_MAX_RESULTS = 200
DIGEST_MAX_CHARS = 240
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".ruff_cache"}
_PROBLEM_RE = re.compile(
    r"error|failed|failure|cannot|unable|expected|refused|denied|missing|not found|"
    r"timed out|timeout|fatal",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ToolDisposition:
    """The canonical outcome of one tool call, read by the memory middleware (§4).

    ``ok`` false means ``metadata.resultKind == "error"``. ``digest`` is one line that
    names the problem (errors) or ``"ok"``; ``output_sha`` is the first 16 hex chars of
    the sha256 of the full output. ``exit_code`` is set for commands only.
    """

    ok: bool
    digest: str
    exit_code: int | None = None
    output_sha: str = ""

    @property
    def result_kind(self) -> Literal["ok", "error"]:
        return "ok" if self.ok else "error"

    def to_dict(self) -> dict[str, Any]:
        return {
            "resultKind": self.result_kind,
            "exitCode": self.exit_code,
            "digest": self.digest,
            "outputSha": self.output_sha,
        }


@dataclass
class ToolResult:
    """What a tool returns: the text for the model plus display extras for the faces."""

    output: str
    disposition: ToolDisposition
    diff: str | None = None
    path: str | None = None
    old_text: str | None = None
    new_text: str | None = None


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def ok_result(output: str, **extras: Any) -> ToolResult:
    return ToolResult(
        output=output, disposition=ToolDisposition(True, "ok", None, _sha16(output)), **extras
    )


def error_result(
    message: str, *, exit_code: int | None = None, output: str | None = None
) -> ToolResult:
    text = output if output is not None else f"Error: {message}"
    return ToolResult(
        output=text,
        disposition=ToolDisposition(False, _cap(message), exit_code, _sha16(text)),
    )


def _cap(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DIGEST_MAX_CHARS else text[: DIGEST_MAX_CHARS - 1] + "…"


def problem_line(*texts: str) -> str:
    """The first non-empty line naming a problem across ``texts``, else the last
    non-empty line of the first text that has one (MEMORY_SPEC §11 item 10)."""
    for text in texts:
        for line in text.splitlines():
            if line.strip() and _PROBLEM_RE.search(line):
                return line.strip()
    for text in texts:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""


# --------------------------------------------------------------------------- workspace


class WorkspaceError(ValueError):
    """A path outside the session's workspace roots (or escaping them by symlink)."""


@dataclass(frozen=True)
class Workspace:
    """The session's cwd and extra roots (absolute, realpath-resolved)."""

    cwd: Path
    roots: tuple[Path, ...]

    @classmethod
    def create(cls, cwd: Path, extra_roots: Sequence[Path] = ()) -> Workspace:
        """Raises ``ValueError`` for a relative cwd or root."""
        if not Path(cwd).is_absolute():
            raise ValueError(f"workspace cwd must be absolute: {cwd}")
        real_cwd = Path(os.path.realpath(cwd))
        roots = [real_cwd]
        for root in extra_roots:
            if not Path(root).is_absolute():
                raise ValueError(f"workspace root must be absolute: {root}")
            real = Path(os.path.realpath(root))
            if real not in roots:
                roots.append(real)
        return cls(cwd=real_cwd, roots=tuple(roots))

    def contains(self, real: Path) -> bool:
        return any(real == root or root in real.parents for root in self.roots)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The realpath of ``path`` (relative to cwd) if it lies inside a root.

        Raises :class:`WorkspaceError` when the path is outside every root, or when
        it is lexically inside but a symlink leads it out.
        """
        raw = str(path).strip() if path is not None else ""
        if not raw:
            raise WorkspaceError("empty path")
        if "\0" in raw:
            raise WorkspaceError("path contains a NUL character")
        candidate = Path(os.path.expanduser(raw))
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        lexical = Path(os.path.normpath(candidate))
        real = Path(os.path.realpath(lexical))
        if self.contains(real):
            return real
        if self.contains(lexical) or any(
            lexical == root or root in lexical.parents for root in self._lexical_roots()
        ):
            raise WorkspaceError(
                f"path {raw!r} resolves through a symlink to {real}, outside the workspace "
                f"({', '.join(map(str, self.roots))}); refused"
            )
        raise WorkspaceError(
            f"path {raw!r} is outside the workspace ({', '.join(map(str, self.roots))}); refused"
        )

    def _lexical_roots(self) -> list[Path]:
        return list(self.roots)

    def display(self, real: Path) -> str:
        """``real`` relative to the first root containing it (for titles)."""
        for root in self.roots:
            if real == root:
                return "."
            if root in real.parents:
                return str(real.relative_to(root))
        return str(real)


# --------------------------------------------------------------------------- host


@dataclass(frozen=True)
class CommandResult:
    """Outcome of a shell command: exit code (None if killed), captured streams."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


OutputCallback = Callable[[str], Awaitable[None] | None]


class ToolHost(Protocol):
    """Where file reads/writes and commands happen. The local host is the default; the
    ACP face supplies a client-backed host when the client advertises fs/terminal.

    Cancellation is task cancellation: ``run_command`` must stop the command (the
    whole process group for a local host) before re-raising ``CancelledError``.
    """

    async def read_text(self, path: Path) -> str: ...

    async def write_text(self, path: Path, text: str) -> None: ...

    async def run_command(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_ms: int,
        on_output: OutputCallback | None = None,
    ) -> CommandResult: ...


def _read_file(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return fh.read()


def _write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if value is not None and hasattr(value, "__await__"):
        await value


class LocalToolHost:
    """Files through a worker thread; commands through ``/bin/sh -c`` in a new
    process group, killed (SIGTERM, then SIGKILL after 2 s) on timeout or cancel."""

    async def read_text(self, path: Path) -> str:
        return await asyncio.to_thread(_read_file, path)

    async def write_text(self, path: Path, text: str) -> None:
        await asyncio.to_thread(_write_file, path, text)

    async def run_command(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_ms: int,
        on_output: OutputCallback | None = None,
    ) -> CommandResult:
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_shell(
                command,
                cwd=str(cwd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        )
        try:
            proc = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            # Cancelled while asyncio was still connecting the pipes: the process group
            # already runs. Without this, asyncio kills only the leader and then waits
            # for the pipes, which a grandchild keeps open until it exits by itself.
            with contextlib.suppress(BaseException):
                await _kill_group(await spawn)
            raise
        out: list[str] = []
        err: list[str] = []

        async def pump(stream: asyncio.StreamReader | None, sink: list[str]) -> None:
            if stream is None:
                return
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            while True:
                chunk = await stream.read(65536)
                if not chunk:
                    tail = decoder.decode(b"", final=True)
                    if tail:
                        sink.append(tail)
                    return
                text = decoder.decode(chunk)
                sink.append(text)
                if on_output is not None and text:
                    try:
                        await _maybe_await(on_output(text))
                    except Exception:  # a face's display problem never breaks the command
                        log.debug("on_output callback failed", exc_info=True)

        pumps = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(pumps), timeout=timeout_ms / 1000)
                await proc.wait()
            except TimeoutError:
                timed_out = True
                await _kill_group(proc)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pumps, timeout=KILL_GRACE_S)
        except asyncio.CancelledError:
            await _kill_group(proc)
            pumps.cancel()
            with contextlib.suppress(BaseException):
                await pumps
            raise
        return CommandResult(
            exit_code=None if timed_out else proc.returncode,
            stdout="".join(out),
            stderr="".join(err),
            timed_out=timed_out,
        )


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL it after the grace period, reap the child."""
    if proc.returncode is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # orphans of a finished leader
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.shield(asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S))
    except (TimeoutError, asyncio.CancelledError):
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(BaseException):
        await asyncio.shield(asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S))


# --------------------------------------------------------------------------- context


@dataclass
class ToolContext:
    """What a tool run may use: the workspace, the host, the spill store, a sink for
    streamed output, and the session id (spill refs belong to a session)."""

    workspace: Workspace
    host: ToolHost
    session_id: str
    spill_store: SpillStore | None = None
    on_output: OutputCallback | None = None
    values: Any = None
    """The named text workspace's store (``text_workspace.WorkspaceValueStore``)."""


class ToolInputError(ValueError):
    """Arguments that do not fit a tool's schema (reported to the model, not raised)."""


# --------------------------------------------------------------------------- arguments


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFileArgs(_Args):
    path: str = Field(description="File path, relative to the workspace root or absolute.")
    start_line: int | None = Field(default=None, ge=1, description="First line (1-based).")
    end_line: int | None = Field(default=None, ge=1, description="Last line (inclusive).")


class WriteFileArgs(_Args):
    path: str = Field(description="File path; parent folders are created.")
    content: str = Field(description="The whole new file content.")


class EditFileArgs(_Args):
    path: str
    old_text: str = Field(description="Exact text to replace; must occur exactly once.")
    new_text: str = Field(description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class ListDirArgs(_Args):
    path: str = Field(default=".", description="Folder to list.")


class GlobArgs(_Args):
    pattern: str = Field(description="Glob pattern such as '**/*.py'.")
    path: str = Field(default=".", description="Folder to search from.")


class GrepArgs(_Args):
    pattern: str = Field(description="Regular expression.")
    path: str = Field(default=".", description="File or folder to search.")
    glob: str | None = Field(default=None, description="Only files matching this glob.")
    ignore_case: bool = False


class RunCommandArgs(_Args):
    command: str = Field(description="Shell command, run with /bin/sh in the workspace.")
    timeout_ms: int = Field(
        default=COMMAND_TIMEOUT_MS_DEFAULT, ge=1, le=COMMAND_TIMEOUT_MS_MAX, description="ms"
    )


class ReadSpillArgs(_Args):
    ref: str = Field(description="The spill ref from a truncated tool result.")
    offset: int = Field(default=0, ge=0, description="Character offset.")
    length: int = Field(default=32_768, ge=1, le=32_768, description="Characters to read.")


class GrepSpillArgs(_Args):
    ref: str
    pattern: str = Field(description="Regular expression.")
    ignore_case: bool = False


# --------------------------------------------------------------------------- tools

ToolRun = Callable[[Any, ToolContext], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, model-facing description, argument model, ACP kind and
    permission category."""

    name: str
    description: str
    args_model: type[_Args]
    kind: str
    category: ToolCategory
    run: ToolRun = field(repr=False)
    spillable: bool = True
    """False for the read-back tools: their output is already a bounded slice."""

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


async def _read_file_tool(args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
    path = ctx.workspace.resolve(args.path)
    if path.is_dir():
        return error_result(f"{args.path} is a directory; use list_dir")
    if not path.exists():
        return error_result(f"file not found: {args.path}")
    text = await ctx.host.read_text(path)
    lines = text.splitlines(keepends=True)
    start = args.start_line or 1
    end = args.end_line or min(len(lines), start + READ_FILE_MAX_LINES - 1)
    if end < start:
        return error_result(f"end_line {end} is before start_line {start}")
    chosen = "".join(lines[start - 1 : end])
    note = ""
    if end < len(lines) and args.end_line is None:
        note = f"\n[lines {start}-{end} of {len(lines)}; pass start_line to read more]"
    return ok_result(chosen + note, path=str(path))


async def _write_file_tool(args: WriteFileArgs, ctx: ToolContext) -> ToolResult:
    path = ctx.workspace.resolve(args.path)
    if path.is_dir():
        return error_result(f"{args.path} is a directory")
    old = await ctx.host.read_text(path) if path.exists() else None
    await ctx.host.write_text(path, args.content)
    diff = _unified(ctx.workspace.display(path), old or "", args.content)
    verb = "updated" if old is not None else "created"
    return ok_result(
        f"{verb} {ctx.workspace.display(path)} ({len(args.content.encode('utf-8'))} bytes)",
        diff=diff,
        path=str(path),
        old_text=old,
        new_text=args.content,
    )


async def _edit_file_tool(args: EditFileArgs, ctx: ToolContext) -> ToolResult:
    path = ctx.workspace.resolve(args.path)
    if not path.is_file():
        return error_result(f"file not found: {args.path}")
    if not args.old_text:
        return error_result("old_text is empty; use write_file to create content")
    old = await ctx.host.read_text(path)
    count = old.count(args.old_text)
    if count == 0:
        return error_result(f"old_text not found in {args.path}")
    if count > 1 and not args.replace_all:
        return error_result(
            f"old_text occurs {count} times in {args.path}; add context or set replace_all"
        )
    new = (
        old.replace(args.old_text, args.new_text)
        if args.replace_all
        else old.replace(args.old_text, args.new_text, 1)
    )
    await ctx.host.write_text(path, new)
    diff = _unified(ctx.workspace.display(path), old, new)
    return ok_result(diff or "no change", diff=diff, path=str(path), old_text=old, new_text=new)


def _unified(name: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )


def _list_dir(path: Path) -> list[str]:
    entries = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        entries.append(entry.name + ("/" if entry.is_dir() else ""))
    return entries


async def _list_dir_tool(args: ListDirArgs, ctx: ToolContext) -> ToolResult:
    path = ctx.workspace.resolve(args.path)
    if not path.is_dir():
        return error_result(f"not a directory: {args.path}")
    entries = await asyncio.to_thread(_list_dir, path)
    more = ""
    if len(entries) > LIST_MAX_ENTRIES:
        more = f"\n[{len(entries) - LIST_MAX_ENTRIES} more entries not shown]"
        entries = entries[:LIST_MAX_ENTRIES]
    return ok_result(("\n".join(entries) or "(empty)") + more, path=str(path))


def _walk_files(base: Path, workspace: Workspace) -> list[Path]:
    if base.is_file():
        return [base]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink() and not workspace.contains(Path(os.path.realpath(path))):
                continue
            found.append(path)
    return found


def _glob(base: Path, pattern: str, workspace: Workspace) -> list[str]:
    results = []
    for path in _walk_files(base, workspace):
        rel = str(path.relative_to(base))
        if fnmatch.fnmatch(rel, pattern) or (
            pattern.startswith("**/") and fnmatch.fnmatch(rel, pattern[3:])
        ):
            results.append(rel)
            if len(results) > GLOB_MAX_RESULTS:
                break
    return results


async def _glob_tool(args: GlobArgs, ctx: ToolContext) -> ToolResult:
    base = ctx.workspace.resolve(args.path)
    if not base.is_dir():
        return error_result(f"not a directory: {args.path}")
    results = await asyncio.to_thread(_glob, base, args.pattern, ctx.workspace)
    more = ""
    if len(results) > GLOB_MAX_RESULTS:
        results = results[:GLOB_MAX_RESULTS]
        more = f"\n[more than {GLOB_MAX_RESULTS} matches; narrow the pattern]"
    return ok_result(("\n".join(results) or "no files match") + more)


def _py_grep(
    base: Path, regex: re.Pattern[str], glob: str | None, workspace: Workspace
) -> list[str]:
    out: list[str] = []
    root = base if base.is_dir() else base.parent
    for path in _walk_files(base, workspace):
        rel = str(path.relative_to(root))
        if glob and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(path.name, glob)):
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read(2_000_000)
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        for lineno, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                out.append(f"{rel}:{lineno}:{line[:300]}")
                if len(out) > GREP_MAX_RESULTS:
                    return out
    return out


async def _grep_tool(args: GrepArgs, ctx: ToolContext) -> ToolResult:
    base = ctx.workspace.resolve(args.path)
    if not base.exists():
        return error_result(f"path not found: {args.path}")
    rg = shutil.which("rg")
    if rg:
        argv = [rg, "--line-number", "--no-heading", "--color=never", "--max-columns=300"]
        if args.ignore_case:
            argv.append("--ignore-case")
        if args.glob:
            argv += ["--glob", args.glob]
        argv += (
            ["--regexp", args.pattern, "."]
            if base.is_dir()
            else ["--regexp", args.pattern, str(base)]
        )
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(base if base.is_dir() else base.parent),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await proc.communicate()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        if proc.returncode not in (0, 1):
            return error_result(stderr.decode("utf-8", "replace").strip() or "rg failed")
        lines = stdout.decode("utf-8", "replace").splitlines()
    else:
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as exc:
            return error_result(f"invalid pattern: {exc}")
        lines = await asyncio.to_thread(_py_grep, base, regex, args.glob, ctx.workspace)
    more = ""
    if len(lines) > GREP_MAX_RESULTS:
        lines = lines[:GREP_MAX_RESULTS]
        more = f"\n[more than {GREP_MAX_RESULTS} matches; narrow the search]"
    return ok_result(("\n".join(lines) or "no matches") + more)


def format_command_output(result: CommandResult) -> str:
    """The model-visible text of a command result: exit code, stdout, stderr."""
    head = (
        "timed out (process group killed)" if result.timed_out else f"exit code: {result.exit_code}"
    )
    parts = [head]
    if result.stdout:
        parts.append("[stdout]\n" + result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if not result.stdout and not result.stderr:
        parts.append("(no output)")
    return "\n".join(parts)


async def _run_command_tool(args: RunCommandArgs, ctx: ToolContext) -> ToolResult:
    if not args.command.strip():
        return error_result("empty command")
    result = await ctx.host.run_command(
        args.command, cwd=ctx.workspace.cwd, timeout_ms=args.timeout_ms, on_output=ctx.on_output
    )
    text = format_command_output(result)
    if result.timed_out:
        return error_result(f"timed out after {args.timeout_ms} ms", output=text)
    if result.exit_code == 0:
        return ToolResult(output=text, disposition=ToolDisposition(True, "ok", 0, _sha16(text)))
    line = problem_line(result.stderr, result.stdout) or "no output"
    return error_result(f"exit {result.exit_code}: {line}", exit_code=result.exit_code, output=text)


async def _spill_text(ref: str, ctx: ToolContext) -> str:
    ref = check_ref(ref)
    if ctx.spill_store is None:
        raise SpillError("no spill store in this session")
    text = await ctx.spill_store.get_spill(ctx.session_id, ref)
    if text is None:
        raise SpillError(f"unknown spill ref: {ref}")
    return text


async def _read_spill_tool(args: ReadSpillArgs, ctx: ToolContext) -> ToolResult:
    text = await _spill_text(args.ref, ctx)
    return ok_result(read_slice(text, args.offset, args.length))


async def _grep_spill_tool(args: GrepSpillArgs, ctx: ToolContext) -> ToolResult:
    text = await _spill_text(args.ref, ctx)
    matches = grep_text(text, args.pattern, ignore_case=args.ignore_case)
    if not matches:
        return ok_result("no matches")
    return ok_result("\n".join(f"--- offset {m.offset}\n{m.excerpt}" for m in matches))


BUILTIN_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "Read a text file, optionally a range of lines (1-based, inclusive).",
        ReadFileArgs,
        "read",
        "read",
        _read_file_tool,
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a text file with the given content.",
        WriteFileArgs,
        "edit",
        "edit",
        _write_file_tool,
    ),
    ToolSpec(
        "edit_file",
        "Replace an exact text in a file; returns a unified diff.",
        EditFileArgs,
        "edit",
        "edit",
        _edit_file_tool,
    ),
    ToolSpec(
        "list_dir",
        "List a folder (folders end with '/').",
        ListDirArgs,
        "read",
        "read",
        _list_dir_tool,
    ),
    ToolSpec("glob", "Find files by glob pattern.", GlobArgs, "search", "read", _glob_tool),
    ToolSpec(
        "grep",
        "Search file contents with a regular expression (path:line:text).",
        GrepArgs,
        "search",
        "read",
        _grep_tool,
    ),
    ToolSpec(
        "run_command",
        "Run a shell command in the workspace; returns exit code, stdout and stderr.",
        RunCommandArgs,
        "execute",
        "execute",
        _run_command_tool,
    ),
    ToolSpec(
        "read_spill",
        "Read back part of a truncated (spilled) tool result by ref, offset and length (<= 32768 chars).",
        ReadSpillArgs,
        "read",
        "read",
        _read_spill_tool,
        spillable=False,
    ),
    ToolSpec(
        "grep_spill",
        "Search a spilled tool result by ref; 200 chars of context, at most 50 matches.",
        GrepSpillArgs,
        "search",
        "read",
        _grep_spill_tool,
        spillable=False,
    ),
)


_SCHEMA_CACHE: dict[str, dict[str, Any]] = {}


def _schema_of(spec: ToolSpec) -> dict[str, Any]:
    # JSON-schema generation is slow (pydantic); a tool's schema never changes.
    key = f"{spec.name}:{spec.args_model.__module__}.{spec.args_model.__qualname__}"
    if key not in _SCHEMA_CACHE:
        _SCHEMA_CACHE[key] = spec.schema()
    return _SCHEMA_CACHE[key]


class ToolRegistry:
    """The tools of a session, by name."""

    def __init__(self, tools: Sequence[ToolSpec] = BUILTIN_TOOLS) -> None:
        self._tools = {t.name: t for t in tools}
        self._schemas = {t.name: _schema_of(t) for t in tools}

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self, *, categories: Sequence[ToolCategory] | None = None) -> list[dict[str, Any]]:
        """OpenAI ``tools`` list, optionally limited to some permission categories."""
        return [
            copy.deepcopy(self._schemas[t.name])
            for t in self._tools.values()
            if categories is None or t.category in categories
        ]

    def parse_args(self, name: str, arguments: str | dict[str, Any]) -> BaseModel:
        """Validate a model's arguments (a JSON string or dict) for tool ``name``.

        Raises :class:`ToolInputError` naming the problem (unknown tool, bad JSON,
        schema mismatch).
        """
        spec = self._tools.get(name)
        if spec is None:
            raise ToolInputError(f"unknown tool {name!r}; available: {', '.join(self._tools)}")
        try:
            if isinstance(arguments, str):
                return spec.args_model.model_validate_json(arguments or "{}")
            return spec.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolInputError(f"invalid arguments for {name}: {problems}") from None

    async def execute(self, name: str, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Run tool ``name``; every failure except cancellation becomes an error result."""
        spec = self._tools[name]
        try:
            return await spec.run(args, ctx)
        except asyncio.CancelledError:
            raise
        except (WorkspaceError, SpillError, ToolInputError) as exc:
            return error_result(str(exc))
        except UnicodeDecodeError as exc:
            return error_result(f"not a UTF-8 text file: {exc}")
        except OSError as exc:
            return error_result(f"{exc.strerror or exc}: {exc.filename or ''}".strip(": "))
        except Exception as exc:  # a tool bug is a result the model can see, not a crash
            log.exception("tool %s failed", name)
            return error_result(f"{type(exc).__name__}: {exc}")

    def describe(
        self, name: str, args: BaseModel | None, workspace: Workspace
    ) -> tuple[str, list[str]]:
        """(title, absolute locations) of a call, for the tool-call-started event."""
        data = args.model_dump() if args is not None else {}
        locations: list[str] = []
        if data.get("path"):
            try:
                locations.append(str(workspace.resolve(data["path"])))
            except WorkspaceError:
                pass
        if name == "run_command":
            title = f"Run `{_short(data.get('command', ''))}`"
        elif name in ("read_file", "write_file", "edit_file", "list_dir"):
            verb = {
                "read_file": "Read",
                "write_file": "Write",
                "edit_file": "Edit",
                "list_dir": "List",
            }[name]
            title = f"{verb} {data.get('path', '')}"
        elif name in ("grep", "glob"):
            title = f"{name} {_short(data.get('pattern', ''))}"
        elif name in ("read_spill", "grep_spill"):
            title = f"{name} {data.get('ref', '')}"
        elif name.startswith("workspace_") and data.get("key"):
            title = f"{name} {_short(data['key'])}"
        else:
            title = name
        return title, locations


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
