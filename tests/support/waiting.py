"""Waiting on conditions in tests, never on fixed sleeps (RULES.md).

``wait_until`` polls a condition that has no event of its own (a file appearing, a
process gone, a counter moving) on the running loop, bounded by a deadline; the poll
interval is not a guess about how long something takes.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_until(
    condition: Callable[[], Any], *, timeout_s: float = 20.0, interval_s: float = 0.01
) -> Any:
    """Return ``condition()``'s first truthy value (awaited when it is awaitable, so
    a condition may ask the server); raise ``AssertionError`` (naming the condition)
    when it stays falsy for ``timeout_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition {_name(condition)} not met within {timeout_s} s")
        await asyncio.sleep(interval_s)


def wait_until_sync(
    condition: Callable[[], T], *, timeout_s: float = 20.0, interval_s: float = 0.05
) -> T:
    """``wait_until`` for code with no event loop (sync fixtures, server threads)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition {_name(condition)} not met within {timeout_s} s")
        time.sleep(interval_s)


def _name(condition: Callable[..., Any]) -> str:
    return getattr(condition, "__name__", repr(condition))


def process_gone(pid: int) -> bool:
    """True when no process ``pid`` runs (a zombie counts as gone: it runs no code)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return state in ("Z", "X")


def read_pid(path: Any) -> int | None:
    """The pid written in ``path`` (a whole line), or None while it is not there yet."""
    try:
        text = open(path, encoding="ascii").read()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") and text.strip().isdigit() else None
