"""Request capacity and occupancy per endpoint (seed 000; MEMORY_SPEC §10 route safety).

Owns how many requests an endpoint can serve at once and how many this process
has in flight there. Capacity comes, in order, from an explicit
``maxConcurrentRequests``, discovery (llama.cpp ``/props`` or ``/slots``), and a
default of 1 slot for a local runtime; a gateway or hosted API gets no invented
bound (``None``: never full). Occupancy counts this process's foreground requests
(chat streams) and background memory steps. A foreground lease is always granted
(the server queues it); a background lease is refused with ``EndpointBusyError``
when occupancy already fills capacity, so a memory step never queues behind or
evicts chat on a one-slot box (MEMORY_SPEC §11.17). It must not send requests
other than the discovery call it is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from clio_acp.models.errors import EndpointBusyError
from clio_acp.models.targets import Target

CapacitySource = Literal["declared", "discovered", "default", "unbounded"]
# Seed 000: a local runtime with nothing declared or discovered serves one request.
LOCAL_DEFAULT_SLOTS = 1


@dataclass(frozen=True)
class Capacity:
    """``slots`` None means no bound is known (never refused)."""

    slots: int | None
    source: CapacitySource


class Lease:
    """One counted request on an endpoint; ``release()`` is idempotent. Use as a
    context manager."""

    def __init__(self, tracker: CapacityTracker, endpoint: str, kind: str) -> None:
        self._tracker, self.endpoint, self.kind = tracker, endpoint, kind
        self._released = False

    def release(self) -> None:
        """Give the slot back to the endpoint (idempotent)."""
        if not self._released:
            self._released = True
            self._tracker._occupancy[self.endpoint] -= 1

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class CapacityTracker:
    """Capacity and occupancy of every endpoint this process talks to. One per
    process (``DEFAULT_TRACKER``) so that all sessions count against the same slots.
    Not thread-safe: use from the event loop only."""

    def __init__(self) -> None:
        self._occupancy: dict[str, int] = {}
        self._capacity: dict[str, Capacity] = {}
        self._discovering: dict[str, asyncio.Future[Capacity]] = {}

    def occupancy(self, endpoint: str) -> int:
        """Requests this process has in flight at ``endpoint``."""
        return self._occupancy.get(endpoint, 0)

    def known_capacity(self, endpoint: str) -> Capacity | None:
        """The capacity resolved so far, or None before ``resolve``."""
        return self._capacity.get(endpoint)

    def forget(self, endpoint: str) -> None:
        """Drop a resolved capacity (next ``resolve`` discovers again)."""
        self._capacity.pop(endpoint, None)

    async def resolve(
        self, target: Target, discover: Callable[[], Awaitable[int | None]] | None = None
    ) -> Capacity:
        """The target's capacity: declared, else discovered (``discover()`` is awaited
        once per endpoint, concurrent callers share it), else 1 slot for a local
        runtime, else unbounded. Cached per endpoint."""
        endpoint = target.endpoint_key
        if target.declared_capacity is not None:
            cap = Capacity(target.declared_capacity, "declared")
            self._capacity[endpoint] = cap
            return cap
        if endpoint in self._capacity:
            return self._capacity[endpoint]
        pending = self._discovering.get(endpoint)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Capacity] = asyncio.get_running_loop().create_future()
        self._discovering[endpoint] = future
        try:
            slots = await discover() if discover is not None else None
            if slots:
                cap = Capacity(slots, "discovered")
            elif target.dialect.local:
                cap = Capacity(LOCAL_DEFAULT_SLOTS, "default")
            else:
                cap = Capacity(None, "unbounded")
            self._capacity[endpoint] = cap
            future.set_result(cap)
            return cap
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._discovering.pop(endpoint, None)

    def foreground(self, endpoint: str) -> Lease:
        """Count a foreground request (chat). Always granted."""
        return self._take(endpoint, "foreground")

    def try_background(
        self, endpoint: str, capacity: Capacity, *, target_id: str | None = None
    ) -> Lease:
        """Count a background request (memory step) if a slot is free. Raises
        ``EndpointBusyError`` (status None) when occupancy fills ``capacity``."""
        if capacity.slots is not None and self.occupancy(endpoint) >= capacity.slots:
            raise EndpointBusyError(
                f"endpoint {endpoint} busy: {self.occupancy(endpoint)} of "
                f"{capacity.slots} slot(s) in use ({capacity.source})",
                target_id=target_id,
            )
        return self._take(endpoint, "background")

    def _take(self, endpoint: str, kind: str) -> Lease:
        self._occupancy[endpoint] = self._occupancy.get(endpoint, 0) + 1
        return Lease(self, endpoint, kind)


DEFAULT_TRACKER = CapacityTracker()
"""The process-wide tracker every router uses unless given another (tests)."""
