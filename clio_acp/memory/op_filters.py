"""Filters on the memory model's operations before they reach the bank (MEMORY_SPEC §14).

§14.2 (origins): a model operation may not delete or overwrite an entry whose origin
is not ``model`` — ``protected_entry_ids`` names those entries for
``envelope.resolve_operations``. Pure functions over a bank's contents; no I/O.
"""

from __future__ import annotations

from clio_acp.memory.bank import TaskMemoryBank


def protected_entry_ids(bank: TaskMemoryBank) -> set[str]:
    """Ids of the entries (status included) a model operation must not touch:
    every entry whose origin is ``rules``, ``seed`` or ``user`` (§14.2)."""
    entries = bank.entries()
    status = bank.status
    if status is not None:
        entries.append(status)
    return {entry.id for entry in entries if entry.origin != "model"}


__all__ = ["protected_entry_ids"]
