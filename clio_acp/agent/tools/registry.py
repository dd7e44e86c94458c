"""The tools of a session by name: argument validation, the OpenAI function schemas
sent to the model, execution (every failure but cancellation becomes an error result
the model can read) and the title and locations of a call."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from clio_acp.agent.tools.builtin import BUILTIN_TOOLS
from clio_acp.agent.tools.results import ToolResult, error_result
from clio_acp.agent.tools.spec import ToolCategory, ToolContext, ToolInputError, ToolSpec
from clio_acp.agent.tools.workspace import Workspace, WorkspaceError
from clio_acp.context.spill import SpillError

log = logging.getLogger(__name__)


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

    def add(self, spec: ToolSpec) -> None:
        """Offer one more tool (an MCP server's); a tool of the same name is replaced."""
        self._tools[spec.name] = spec
        self._schemas[spec.name] = spec.schema()

    def remove(self, name: str) -> None:
        """Stop offering tool ``name`` (its server stopped)."""
        self._tools.pop(name, None)
        self._schemas.pop(name, None)

    def get(self, name: str) -> ToolSpec | None:
        """The spec of tool ``name``, or None for an unknown tool."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """The tool names, in registration order."""
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
        title = _title(name, data)
        return title, locations


_VERBS = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit", "list_dir": "List"}


def _title(name: str, data: dict[str, Any]) -> str:
    """The one-line title a face shows for a call of tool ``name`` with ``data``."""
    if name == "run_command":
        return f"Run `{_short(data.get('command', ''))}`"
    if name in _VERBS:
        return f"{_VERBS[name]} {data.get('path', '')}"
    if name in ("grep", "glob"):
        return f"{name} {_short(data.get('pattern', ''))}"
    if name in ("read_spill", "grep_spill"):
        return f"{name} {data.get('ref', '')}"
    if name.startswith("workspace_") and data.get("key"):
        return f"{name} {_short(data['key'])}"
    return name


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
