"""A valid v2 memory step telemetry row (MEMORY_SPEC §5) for tests that need one."""

from __future__ import annotations

from typing import Any


def step_row(**overrides: Any) -> dict[str, Any]:
    """A rules-free llm ``steps.jsonl`` row (version 2, injected/intervened, one cited
    entry, 15 tokens); ``overrides`` replace or add keys (e.g. the targetId/modelId pair)."""
    row: dict[str, Any] = {
        "version": 2,
        "at": "2026-01-02T03:04:05.678Z",
        "triggerReasons": ["interval"],
        "tier": "llm",
        "bankDelta": {
            kind: {"added": 0, "updated": 0, "deleted": 0}
            for kind in ("status", "knowledge", "procedural")
        },
        "decision": "injected",
        "reason": "intervened",
        "bankOperations": 0,
        "droppedOperations": 0,
        "citedEntries": 1,
        "tokenCost": {"input": 10, "output": 5, "total": 15},
        "latencyMs": 12,
    }
    row.update(overrides)
    return row
