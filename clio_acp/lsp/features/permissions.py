"""Tool permission questions as ``window/showMessageRequest`` (one action per option;
issue 6 item 3). No answer within ``permissionTimeoutMs``, a failed request or an
unknown title rejects once; a cancelled request is ``cancelled``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types

from clio_acp.lsp.features import Feature
from clio_acp.session import PermissionDecision

if TYPE_CHECKING:
    from clio_acp.session import PermissionRequest, Session


class Permissions(Feature):
    """Answers the bound session's permission requests through the editor."""

    def session_changed(self, session: Session | None) -> None:
        """A bound session asks its permission questions through :meth:`ask`."""
        if session is not None:
            session.set_permission_handler(self.ask)

    async def ask(self, request: PermissionRequest) -> PermissionDecision:
        """Ask the user about one tool call; the chosen option (``PermissionDecision``)."""
        titles = {option.name: option.option_id for option in request.options}
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=f"clio wants to run {request.tool_name}: {request.title}",
            actions=[types.MessageActionItem(title=name) for name in titles],
        )
        timeout_s = self.ls.options.permission_timeout_ms / 1000
        try:
            answer = await self.ls.protocol.request(
                types.WINDOW_SHOW_MESSAGE_REQUEST, params, timeout_s=timeout_s
            )
        except asyncio.CancelledError:
            return PermissionDecision(outcome="cancelled")
        except Exception:
            return PermissionDecision(outcome="reject_once")
        outcome = titles.get(getattr(answer, "title", None) or "", "reject_once")
        return PermissionDecision(outcome=outcome)  # type: ignore[arg-type]
