"""Requests in flight on the ACP connection: ``$/cancel_request`` and end of input.

Owns which request handlers are running (so end of input can let them finish, and
``$/cancel_request`` can stop one: protocol/v1/cancellation answers it ``-32800``).
A prompt registers its own cancel action (``$/cancel_request`` on a
``session/prompt`` is ``session/cancel``). It knows nothing about sessions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp.exceptions import RequestError

from clio_acp.acp.errors import REQUEST_CANCELLED
from clio_acp.acp.transport import CURRENT_REQUEST_ID

log = logging.getLogger(__name__)

CancelAction = Callable[[], Awaitable[None] | None]
Handler = Callable[[Any], Awaitable[Any]]


def request_key(request_id: Any) -> Any:
    """A dictionary key for a JSON-RPC id (``1`` and ``"1"`` are different requests)."""
    return (type(request_id).__name__, request_id)


def uncancel_current() -> None:
    """Clear the current task's cancellation request (it was turned into an answer)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()


class RequestTracker:
    """The request handlers running on one connection and their cancel actions."""

    def __init__(self) -> None:
        self._inflight: dict[Any, CancelAction] = {}
        self._running: set[asyncio.Task[Any]] = set()

    def track(self, func: Handler) -> Handler:
        """Wrap a request handler so ``$/cancel_request`` cancels it (→ ``-32800``) and
        :meth:`drain` waits for it."""

        async def run(params: Any) -> Any:
            request_id = CURRENT_REQUEST_ID.get()
            task = asyncio.current_task()
            cancelled = False

            def cancel() -> None:
                nonlocal cancelled
                if task is not None and not task.done():
                    cancelled = True
                    task.cancel()

            key = request_key(request_id) if request_id is not None else None
            if key is not None:
                self._inflight.setdefault(key, cancel)
            if task is not None:
                self._running.add(task)
            try:
                return await func(params)
            except asyncio.CancelledError:
                if not cancelled:
                    raise
                uncancel_current()
                raise RequestError(REQUEST_CANCELLED, "Request cancelled", None) from None
            finally:
                if task is not None:
                    self._running.discard(task)
                if key is not None and self._inflight.get(key) is cancel:
                    self._inflight.pop(key, None)

        return run

    def on_cancel(self, action: CancelAction) -> Callable[[], None]:
        """Make ``$/cancel_request`` for the current request run ``action`` instead of
        cancelling its handler; returns the function that undoes this."""
        request_id = CURRENT_REQUEST_ID.get()
        if request_id is None:
            return lambda: None
        key = request_key(request_id)
        self._inflight[key] = action
        return lambda: self._inflight.pop(key, None)

    async def cancel(self, request_id: Any) -> None:
        """``$/cancel_request``: run the cancel action of request ``request_id``."""
        action = self._inflight.get(request_key(request_id))
        if action is None:
            log.debug("$/cancel_request for %r: nothing in flight", request_id)
            return
        result = action()
        if asyncio.iscoroutine(result):
            await result

    async def drain(self, grace_s: float) -> None:
        """Let requests already received finish (input ended: answers still go out),
        for at most ``grace_s`` seconds."""
        await asyncio.sleep(0)  # handler tasks created at end of input start and register
        pending = {t for t in self._running if not t.done()}
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
