"""Random histories of bank writes for property tests of the task memory bank."""

from __future__ import annotations

from hypothesis import strategies as st

from clio_acp.memory.bank import TaskMemoryBank

OPS = ("save", "update", "delete", "cite", "status", "restore")


def bank_ops(ops: tuple[str, ...] = OPS, max_size: int = 10) -> st.SearchStrategy:
    """Lists of ``(operation, n)``; ``apply_bank_ops`` carries them out."""
    return st.lists(st.tuples(st.sampled_from(ops), st.integers(0, 5)), max_size=max_size)


def apply_bank_ops(bank: TaskMemoryBank, ops: list[tuple[str, int]]) -> None:
    """Save, rewrite, delete, cite, set the status or restore a snapshot, the entry
    picked by ``n`` among the ids in order (an operation on no entry does nothing)."""
    for op, n in ops:
        ids = sorted(bank.ids())
        if op == "save":
            bank.save("knowledge" if n % 2 else "procedural", f"entry {n}", origin="rules")
        elif op == "status":
            bank.update_status(f"status {n}", origin="rules")
        elif op == "restore":
            bank.restore(bank.snapshot())
        elif ids and op == "update":
            entry = bank.get(ids[n % len(ids)])
            if entry.kind != "status":
                bank.save(entry.kind, f"changed {n}", entry.id, origin="rules")
        elif ids and op == "delete":
            bank.delete_entry(ids[n % len(ids)])
        elif ids and op == "cite":
            bank.record_injection([ids[n % len(ids)]])
