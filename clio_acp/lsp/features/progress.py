"""``$/progress`` for a running turn (LSP 3.17 work done progress).

A turn reports under the ``clio.prompt`` request's ``workDoneToken``, else under a
token we create (``window/workDoneProgress/create``, when the client supports it).
Begin carries the prompt, each report one event (``translate.progress_message``,
repeats dropped), end the stop reason. Cancelling the progress in the editor
(``window/workDoneProgress/cancel``) stops the turn.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from clio_acp.lsp import translate
from clio_acp.lsp.features import Feature

if TYPE_CHECKING:
    from clio_acp.session import SessionEvent

logger = logging.getLogger(__name__)

PROGRESS_CREATE_TIMEOUT_S = 5.0
"""How long ``window/workDoneProgress/create`` may take before the turn runs without
progress, seconds."""


@dataclass
class _Progress:
    token: str | int
    last: str | None = None


class Progress(Feature):
    """One progress per running turn, keyed by session id."""

    def __init__(self, face: Any) -> None:
        super().__init__(face)
        self._running: dict[str, _Progress] = {}

    async def begin(self, session_id: str, text: str, stop: Callable[[], Awaitable[None]]) -> None:
        """Begin progress for the turn of ``session_id`` (prompt ``text``); ``stop()``
        runs when the editor cancels it. Does nothing when progress is off or the
        client gives no token."""
        token = await self._token()
        if token is None:
            return
        self._running[session_id] = _Progress(token)
        cancel_future: Future[Any] = Future()
        self.ls.protocol.progress.tokens[token] = cancel_future

        def on_cancel(fut: Future[Any]) -> None:
            if fut.cancelled() and session_id in self._running:
                self.ls.protocol.spawn(stop())

        cancel_future.add_done_callback(on_cancel)
        self.ls.protocol.progress.begin(
            token,
            types.WorkDoneProgressBegin(
                title="clio", message=translate._clip(text, 80), cancellable=True
            ),
        )

    async def _token(self) -> str | int | None:
        if not self.ls.options.progress:
            return None
        from clio_acp.lsp.protocol import current_command

        params = current_command.get()
        token = params.work_done_token if params is not None else None
        if token is None and self.ls.client_supports("window.work_done_progress"):
            token = f"clio-turn-{uuid.uuid4()}"
            try:
                await self.ls.protocol.request(
                    types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                    types.WorkDoneProgressCreateParams(token=token),
                    timeout_s=PROGRESS_CREATE_TIMEOUT_S,
                )
            except (TimeoutError, JsonRpcException):
                return None
        return token

    def on_event(self, event: SessionEvent) -> None:
        """Report the event (``translate.progress_message``) on its turn's progress;
        repeats dropped."""
        progress = self._running.get(event.session_id)
        if progress is None:
            return
        message = translate.progress_message(event)
        if message is None or message == progress.last:
            return
        progress.last = message
        self.ls.protocol.progress.report(
            progress.token, types.WorkDoneProgressReport(message=message)
        )

    def end(self, session_id: str, stop_reason: str) -> None:
        """End the turn's progress with its stop reason (nothing sent after process end)."""
        progress = self._running.pop(session_id, None)
        if progress is None:
            return
        future = self.ls.protocol.progress.tokens.pop(progress.token, None)
        if future is not None and not future.done():
            future.set_result(None)
        if not self.face.closed:
            self.ls.protocol.progress.end(
                progress.token, types.WorkDoneProgressEnd(message=stop_reason)
            )
