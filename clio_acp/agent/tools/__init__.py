"""Tools the agent can call, the host they run on, and workspace confinement.

The package by concern: ``results`` (what a call returns and its canonical
disposition, read by the memory middleware), ``workspace`` (path confinement to the
session's roots, symlink escapes refused), ``host`` (the ``ToolHost`` protocol and the
local host: files, commands in their own process group), ``spec`` (what a tool is),
``builtin`` (the built-in tools), ``text_workspace`` (the named text values the model
keeps) and ``registry`` (validation, schemas, execution).
It does not ask for permission (``agent/permissions.py``), spill results
(``context/spill.py`` via the tool step) or talk to a model.

The names below are the package's public surface; import them from here.
"""

from clio_acp.agent.tools.builtin import BUILTIN_TOOLS, format_command_output
from clio_acp.agent.tools.host import CommandResult, LocalToolHost, OutputCallback, ToolHost
from clio_acp.agent.tools.plan import PLAN_TOOLS
from clio_acp.agent.tools.registry import ToolRegistry
from clio_acp.agent.tools.results import (
    ToolDisposition,
    ToolResult,
    error_result,
    ok_result,
    problem_line,
)
from clio_acp.agent.tools.spec import ToolCategory, ToolContext, ToolInputError, ToolSpec
from clio_acp.agent.tools.text_workspace import WORKSPACE_TOOLS
from clio_acp.agent.tools.workspace import Workspace, WorkspaceError

__all__ = [
    "BUILTIN_TOOLS",
    "PLAN_TOOLS",
    "WORKSPACE_TOOLS",
    "CommandResult",
    "LocalToolHost",
    "OutputCallback",
    "ToolCategory",
    "ToolContext",
    "ToolDisposition",
    "ToolHost",
    "ToolInputError",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "Workspace",
    "WorkspaceError",
    "error_result",
    "format_command_output",
    "ok_result",
    "problem_line",
]
