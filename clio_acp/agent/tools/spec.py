"""What a tool is: its spec (name, description, argument model, ACP kind, permission
category, run function), the context a run may use, and the input error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from clio_acp.agent.tools.host import OutputCallback, ToolHost
from clio_acp.agent.tools.results import ToolResult
from clio_acp.agent.tools.workspace import Workspace
from clio_acp.context.spill import SpillStore

if TYPE_CHECKING:
    from clio_acp.agent.tools.text_workspace import WorkspaceValueStore

ToolCategory = Literal["read", "edit", "execute"]
"""Permission category: ``read`` never needs approval; ``edit`` and ``execute`` may."""


@dataclass
class ToolContext:
    """What a tool run may use: the workspace, the host, the spill store, a sink for
    streamed output, and the session id (spill refs belong to a session)."""

    workspace: Workspace
    host: ToolHost
    session_id: str
    spill_store: SpillStore | None = None
    on_output: OutputCallback | None = None
    values: WorkspaceValueStore | None = None
    """Where the named text workspace's values live (the session journal)."""
    emit: Callable[[Any], Awaitable[None]] | None = None
    """The session's event stream (the plan tool sends ``Plan`` events)."""


class ToolInputError(ValueError):
    """Arguments that do not fit a tool's schema (reported to the model, not raised)."""


ToolRun = Callable[[Any, ToolContext], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, model-facing description, argument model, ACP kind and
    permission category."""

    name: str
    description: str
    args_model: type[BaseModel]
    kind: str
    category: ToolCategory
    run: ToolRun = field(repr=False)
    spillable: bool = True
    """False for the read-back tools: their output is already a bounded slice."""
    parameters: dict[str, Any] | None = None
    """A JSON schema given as is (an MCP tool's ``inputSchema``) instead of one derived
    from ``args_model``."""

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry for this tool."""
        if self.parameters is not None:
            return {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": self.parameters,
                },
            }
        params = self.args_model.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }
