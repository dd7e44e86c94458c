"""ACP error answers: the codes we send and the helpers that build them.

Owns the mapping from core failures to JSON-RPC errors (ACP ``ErrorCode``,
protocol/v1/cancellation); it decides nothing about sessions.
"""

from __future__ import annotations

from pathlib import Path

from acp.exceptions import RequestError

REQUEST_CANCELLED = -32800
"""ACP cancellation (protocol/v1/cancellation): answer to a ``$/cancel_request``-ed request."""

RESOURCE_NOT_FOUND = -32002
"""ACP ``ErrorCode`` resource not found: an unknown session id (issue 7 item 3)."""


STORAGE_UNAVAILABLE = -32000
"""JSON-RPC server error: the state folder is full, read-only or unusable (issue 17)."""


def storage_unavailable(reason: str, message: str) -> RequestError:
    """``-32000`` whose message is the plain sentence (``the disk holding … is full``),
    with ``data: {"reason": full|read-only|cannot-open|io}``; never SQLite's text."""
    return RequestError(STORAGE_UNAVAILABLE, message, {"reason": reason})


def not_found(session_id: str) -> RequestError:
    """``-32002`` "Resource not found" with ``data: {"sessionId": session_id}``."""
    return RequestError(RESOURCE_NOT_FOUND, "Resource not found", {"sessionId": session_id})


def invalid_params(details: str) -> RequestError:
    """``-32602`` with ``data: {"details": details}``."""
    return RequestError.invalid_params({"details": details})


def absolute(path: str, what: str = "cwd") -> Path:
    """``path`` as a ``Path``; raises ``-32602`` naming ``what`` when it is relative
    (ACP requires absolute paths in ``session/*`` params)."""
    p = Path(path)
    if not p.is_absolute():
        raise invalid_params(f"{what} must be an absolute path: {path}")
    return p


def message_of(exc: BaseException) -> str:
    """The text to show for ``exc``: a bare ``KeyError`` shows its argument, not its repr."""
    if isinstance(exc, KeyError) and type(exc).__str__ is KeyError.__str__ and exc.args:
        return str(exc.args[0])
    return str(exc)
