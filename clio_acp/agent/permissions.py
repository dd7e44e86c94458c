"""Permission modes and decisions for tool calls (issue 6 item 3).

Owns the four session modes — ``ask`` (default: edits and commands need approval),
``accept-edits`` (edits allowed, commands asked), ``plan`` (read-only: edits and
commands refused) and ``bypass`` (everything allowed) — the request/decision shapes a
face answers (ACP ``session/request_permission``, LSP ``window/showMessageRequest``),
and the per-session memory of "always" answers. It never talks to a face itself: the
session passes a handler in; without one, ``ask`` denies and says so (headless runs).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

PermissionMode = Literal["ask", "accept-edits", "plan", "bypass"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)
PermissionOutcome = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always", "cancelled"
]


class PermissionOption(BaseModel):
    """One choice offered to the user (ids match ACP ``PermissionOptionKind``)."""

    model_config = ConfigDict(frozen=True)
    option_id: PermissionOutcome
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


DEFAULT_OPTIONS: tuple[PermissionOption, ...] = (
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
)


class PermissionRequest(BaseModel):
    """What a face shows the user before a tool call runs."""

    model_config = ConfigDict(frozen=True)
    session_id: str
    tool_call_id: str
    tool_name: str
    title: str
    kind: str
    """ACP tool kind (``edit``, ``execute``, …)."""
    category: Literal["edit", "execute"]
    arguments: dict[str, Any] = Field(default_factory=dict)
    locations: list[str] = Field(default_factory=list)
    options: tuple[PermissionOption, ...] = DEFAULT_OPTIONS


class PermissionDecision(BaseModel):
    """The user's answer. ``cancelled`` means the prompt turn was cancelled."""

    model_config = ConfigDict(frozen=True)
    outcome: PermissionOutcome

    @property
    def allowed(self) -> bool:
        """True for ``allow_once`` and ``allow_always``."""
        return self.outcome in ("allow_once", "allow_always")


PermissionHandler = Callable[[PermissionRequest], Awaitable[PermissionDecision]]


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one call: allowed or not, and why (shown to the model)."""

    allowed: bool
    reason: str = ""
    cancelled: bool = False


@dataclass
class PermissionGate:
    """Decides each tool call for one session: mode first, then remembered "always"
    answers (per tool name), then the handler. Mode changes apply to the next call."""

    mode: PermissionMode = "ask"
    handler: PermissionHandler | None = None
    _always: dict[str, bool] = field(default_factory=dict)

    def set_mode(self, mode: str) -> None:
        """Raises ``ValueError`` for a mode not in ``PERMISSION_MODES``."""
        if mode not in PERMISSION_MODES:
            raise ValueError(
                f"unknown permission mode {mode!r}; one of {', '.join(PERMISSION_MODES)}"
            )
        self.mode = mode  # type: ignore[assignment]

    def needs_asking(self, category: str) -> bool | None:
        """True: ask; False: allowed by mode; None: refused by mode."""
        if category == "read" or self.mode == "bypass":
            return False
        if self.mode == "plan":
            return None
        if self.mode == "accept-edits" and category == "edit":
            return False
        return True

    async def check(self, request: PermissionRequest) -> Verdict:
        """The verdict for ``request`` (``category`` edit or execute; reads never come here)."""
        need = self.needs_asking(request.category)
        if need is False:
            return Verdict(True)
        if need is None:
            return Verdict(
                False,
                f"refused: the session is in plan mode (read-only); {request.tool_name} is not allowed",
            )
        remembered = self._always.get(request.tool_name)
        if remembered is True:
            return Verdict(True)
        if remembered is False:
            return Verdict(
                False, f"refused: the user always rejects {request.tool_name} in this session"
            )
        if self.handler is None:
            return Verdict(
                False,
                f"refused: {request.tool_name} needs approval in ask mode and nobody can be asked "
                "(no permission handler; use --mode accept-edits or bypass to allow)",
            )
        try:
            decision = await self.handler(request)
        except Exception as exc:  # a face failing to ask is a denial, not a crash
            log.warning("permission handler failed: %s", exc)
            return Verdict(False, f"refused: the permission request failed ({exc})")
        if decision.outcome == "cancelled":
            return Verdict(False, "cancelled", cancelled=True)
        if decision.outcome == "allow_always":
            self._always[request.tool_name] = True
        elif decision.outcome == "reject_always":
            self._always[request.tool_name] = False
        if decision.allowed:
            return Verdict(True)
        return Verdict(False, f"refused by the user: {request.title}")
