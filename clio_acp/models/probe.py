"""Target health checks for ``clio-acp targets --probe`` and ``clio-acp models``.

Owns one probe: reachability (``GET /v1/models``), the model list, declared and
discovered capacity, and how long it took. An ``embedded`` target is started for
the probe (and stays up until the process exits). It must not change settings or
routes; every failure is reported in the result, never raised.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from clio_acp.models.errors import ModelError
from clio_acp.models.routing import Router
from clio_acp.models.targets import Target


@dataclass
class ProbeResult:
    """One target's health. ``capacity``/``capacity_source`` as the tracker
    resolved them; ``error`` is the failure message when not ``reachable``."""

    target_id: str
    runtime: str
    url: str | None
    reachable: bool = False
    models: list[str] = field(default_factory=list)
    declared_capacity: int | None = None
    discovered_slots: int | None = None
    capacity: int | None = None
    capacity_source: str | None = None
    latency_ms: float | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The probe as ``clio-acp targets --probe --json`` prints it (camelCase keys; latency
        in ms, one decimal)."""
        return {
            "id": self.target_id,
            "runtime": self.runtime,
            "url": self.url,
            "reachable": self.reachable,
            "models": self.models,
            "declaredCapacity": self.declared_capacity,
            "discoveredSlots": self.discovered_slots,
            "capacity": self.capacity,
            "capacitySource": self.capacity_source,
            "latencyMs": None if self.latency_ms is None else round(self.latency_ms, 1),
            "error": self.error,
        }


async def probe_target(router: Router, target: Target, *, timeout_ms: int = 5000) -> ProbeResult:
    """Probe ``target`` through ``router`` (which owns clients and the embedded
    server). Never raises for a failing target."""
    result = ProbeResult(target.id, target.runtime, target.base_url)
    result.declared_capacity = target.declared_capacity
    started = time.monotonic()
    try:
        live = await router.live_target(target)
        result.url = live.base_url
        client = await router.client(live)
        result.models = await client.list_models(timeout_ms=timeout_ms)
        result.reachable = True
        result.discovered_slots = await client.discover_slots(timeout_ms=timeout_ms)
        router.tracker.forget(live.endpoint_key)
        _, capacity = await router.capacity(live)
        result.capacity, result.capacity_source = capacity.slots, capacity.source
        if target.runtime == "embedded":
            result.declared_capacity = live.declared_capacity
    except ModelError as exc:
        result.error = str(exc)
    result.latency_ms = (time.monotonic() - started) * 1000
    return result
