"""The built-in tools: read, write and edit files, list, glob and grep the workspace,
run a command, and read back or grep a spilled result. Each takes its pydantic
arguments and a ``ToolContext`` and returns a ``ToolResult``; workspace confinement,
hosts and the registry live beside it."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import fnmatch
import os
import re
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clio_acp.agent.tools.host import CommandResult
from clio_acp.agent.tools.results import ToolResult, error_result, ok_result, problem_line
from clio_acp.agent.tools.spec import ToolContext, ToolSpec
from clio_acp.agent.tools.workspace import Workspace
from clio_acp.context.spill import (
    GREP_CONTEXT_CHARS,
    GREP_MAX_MATCHES,
    READ_MAX_CHARS,
    SpillError,
    check_ref,
    grep_text,
    read_slice,
)

COMMAND_TIMEOUT_MS_DEFAULT = 120_000
COMMAND_TIMEOUT_MS_MAX = 600_000
READ_FILE_MAX_LINES = 2_000
LIST_MAX_ENTRIES = 500
GLOB_MAX_RESULTS = 500
GREP_MAX_RESULTS = 200
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".ruff_cache"}


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
    length: int = Field(
        default=READ_MAX_CHARS, ge=1, le=READ_MAX_CHARS, description="Characters to read."
    )


class GrepSpillArgs(_Args):
    ref: str
    pattern: str = Field(description="Regular expression.")
    ignore_case: bool = False


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
        return ok_result(text, exit_code=0)
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
        "Read back part of a truncated (spilled) tool result by ref, offset and length "
        f"(<= {READ_MAX_CHARS} chars).",
        ReadSpillArgs,
        "read",
        "read",
        _read_spill_tool,
        spillable=False,
    ),
    ToolSpec(
        "grep_spill",
        f"Search a spilled tool result by ref; {GREP_CONTEXT_CHARS} chars of context, "
        f"at most {GREP_MAX_MATCHES} matches.",
        GrepSpillArgs,
        "search",
        "read",
        _grep_spill_tool,
        spillable=False,
    ),
)
