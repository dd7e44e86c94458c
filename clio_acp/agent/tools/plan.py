"""The agent's plan: ``todo_write``, the tool the model calls to keep its task list
(as the leading coding agents do), sent to the client as a ``Plan`` event (ACP
``session/update`` ``plan``; issue 21 item 3).

The model sends the whole list each time (it replaces the previous one); the tool
needs no permission and touches no file. The plan holds only what the model wrote:
task memory (its status entry included) never goes into it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clio_acp.agent.tools.results import ToolResult, ok_result
from clio_acp.agent.tools.spec import ToolContext, ToolSpec
from clio_acp.events import Plan, PlanEntry

MAX_ITEMS = 50
"""Items one plan may hold."""


class TodoItem(BaseModel):
    """One plan entry."""

    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, max_length=500, description="What to do, in a line")
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class TodoWriteArgs(BaseModel):
    """``todo_write`` arguments: the whole plan."""

    model_config = ConfigDict(extra="forbid")
    todos: list[TodoItem] = Field(max_length=MAX_ITEMS)


async def _todo_write(args: TodoWriteArgs, ctx: ToolContext) -> ToolResult:
    entries = [
        PlanEntry(content=t.content, status=t.status, priority=t.priority) for t in args.todos
    ]
    if ctx.emit is not None:
        await ctx.emit(Plan(session_id=ctx.session_id, entries=entries))
    done = sum(t.status == "completed" for t in args.todos)
    doing = sum(t.status == "in_progress" for t in args.todos)
    return ok_result(f"Plan updated: {len(entries)} items ({done} completed, {doing} in progress).")


_ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "minLength": 1, "maxLength": 500},
        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
        "priority": {"type": "string", "enum": ["high", "medium", "low"]},
    },
    "required": ["content", "status"],
    "additionalProperties": False,
}
PARAMETERS = {
    "type": "object",
    "properties": {"todos": {"type": "array", "items": _ITEM_SCHEMA, "maxItems": MAX_ITEMS}},
    "required": ["todos"],
    "additionalProperties": False,
}
"""The schema the model sees, written out: no ``$ref`` (grammar-constrained local
models cannot resolve one)."""

PLAN_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "todo_write",
        "Keep your task plan for multi-step work: send the whole list each time, with "
        "each item's status (pending, in_progress, completed). The user sees it.",
        TodoWriteArgs,
        "think",
        "read",
        _todo_write,
        spillable=False,
        parameters=PARAMETERS,
    ),
)
"""The plan tool, offered beside the built-in tools."""
