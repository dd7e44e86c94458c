"""Wiring between the agent loop and the memory package (MEMORY_SPEC §4, §6, §7, §12).

Owns the construction of a session's :class:`MemoryHooks` (the memory middleware
through ``clio_acp.agent.memory_bridge`` when it is present, else :class:`BankOnlyMemory`, which
keeps a task bank so save/restore, handoff and seed still work), the approved
durable-memory prompt section (§6) for a workspace, handoff discovery for the resume
offer and the ``/handoff`` artifact facts gathered from the journal rows. It holds no
policy of its own and never calls a model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from clio_acp.agent import history
from clio_acp.agent.memory_port import (
    InjectReminder,
    MemoryEffect,
    MemoryHooks,
    ToolObservation,
)
from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.paths import Paths
from clio_acp.settings import Settings

log = logging.getLogger(__name__)

RESTORE_PREFIX = "Memory: execution state restored after compaction:\n"
"""MEMORY_SPEC §4 post-compaction restore prefix."""
RESUME_PREFIX = "Memory: execution state restored from the saved session:\n"


class BankOnlyMemory:
    """A task bank with the §4 post-compaction restore and no rules tier: used while
    the middleware is not available. Saves and restores the bank (§12 item 7)."""

    def __init__(self, settings: Callable[[], Settings]) -> None:
        self._settings = settings
        self.bank = TaskMemoryBank()
        self._compacted = False
        self._disposed = False

    def _budget(self, prefix: str) -> int:
        max_tokens = self._settings().context.memory.max_output_tokens
        return max(0, max_tokens - -(-len(prefix) // 4))

    def _restore_effect(self, prefix: str, trigger: str) -> list[MemoryEffect]:
        text = self.bank.render_restored_state(self._budget(prefix))
        if not text.strip():
            return []
        return [InjectReminder(text=prefix + text, trigger=trigger, channel="restore")]

    def turn_start(self, session_id: str, turn_id: str, text: str) -> list[MemoryEffect]:
        if self._disposed or not self._compacted:
            return []
        self._compacted = False
        return self._restore_effect(RESTORE_PREFIX, "post_compaction")

    def before_tool(
        self, session_id: str, tool_call_id: str, tool_name: str, arguments: dict[str, Any]
    ) -> list[MemoryEffect]:
        return []

    def after_tool(self, session_id: str, observation: ToolObservation) -> list[MemoryEffect]:
        return []

    def turn_end(self, session_id: str, turn_id: str) -> list[MemoryEffect]:
        return []

    def evaluate_turn_end(self, session_id: str, turn_id: str) -> None:
        return None

    def take_deferred(self) -> list[InjectReminder]:
        return []

    def discard_deferred(self) -> None:
        return None

    def on_compaction(self, session_id: str, metadata: dict[str, Any]) -> list[MemoryEffect]:
        if self._disposed:
            return []
        self._compacted = False
        return self._restore_effect(RESTORE_PREFIX, "post_compaction")

    def signal_loop(self) -> None:
        return None

    def bank_status(self) -> str | None:
        status = self.bank.status
        return status.content if status is not None else None

    def snapshot(self) -> dict[str, Any] | None:
        return self.bank.snapshot()

    def counters(self) -> dict[str, Any] | None:
        return None

    def restore(
        self, snapshot: dict[str, Any] | None, counters: dict[str, Any] | None
    ) -> list[MemoryEffect]:
        if not snapshot:
            return []
        self.bank.restore(snapshot)
        return self._restore_effect(RESUME_PREFIX, "resume")

    def board(self) -> dict[str, Any]:
        snap = self.bank.snapshot()
        snap.pop("status", None)
        return {
            "enabled": self._settings().context.memory.enabled,
            "tier": "rules",
            "size": self.bank.size,
            "lastDecision": None,
            "bank": snap,
            "activity": [],
            "stepInFlight": False,
            "spend": None,
        }

    def task_bank(self) -> TaskMemoryBank:
        return self.bank

    def reset(self) -> None:
        self.bank.clear()
        self._compacted = False

    def dispose(self) -> None:
        self.reset()
        self._disposed = True


def create(
    *,
    session_id: str,
    cwd: Path,
    settings: Callable[[], Settings],
    delivers_reminders: bool,
    paths: Paths,
) -> MemoryHooks:
    """The memory registration for one session (reset by the caller before use)."""
    try:
        from clio_acp.agent.memory_bridge import create_hooks  # issue 3's middleware
    except ImportError:
        return BankOnlyMemory(settings)
    relay = ProposalRelay()
    hooks = create_hooks(
        session_id=session_id,
        cwd=cwd,
        settings=settings,
        delivers_reminders=delivers_reminders,
        paths=paths,
        on_proposed=relay,
    )
    hooks.proposal_relay = relay  # type: ignore[attr-defined]
    return hooks


class ProposalRelay:
    """Forwards durable records auto-proposed by the memory step (MEMORY_SPEC §6) to
    the session, which emits them as ``MemoryProposal`` events. The session sets
    ``sink`` once it exists; proposals before that are only in records.json."""

    def __init__(self) -> None:
        self.sink: Callable[[list[Any]], None] | None = None

    def __call__(self, records: list[Any]) -> None:
        if self.sink is not None:
            self.sink(records)


def durable_prompt_section(cwd: Path, settings: Settings, paths: Paths) -> str:
    """The approved durable-memory prompt section for ``cwd`` (MEMORY_SPEC §6), or ""
    when memory is off, the store is missing or unreadable. Blocking: call it in a
    worker thread."""
    if not settings.context.memory.enabled:
        return ""
    from clio_acp.memory.identity import canonical_repository_identity
    from clio_acp.memory.retrieval import ActiveIdentity, build_prompt_section
    from clio_acp.memory.store import MemoryStore, MemoryStoreError

    if not paths.records_file.exists():
        return ""
    try:
        records = MemoryStore(paths.records_file).load()
    except MemoryStoreError as exc:
        log.warning("durable memory not used: %s", exc)
        return ""
    active = ActiveIdentity(repository=canonical_repository_identity(str(cwd)))
    return build_prompt_section(records, active).text


def find_handoff_offer(cwd: Path) -> tuple[str, int] | None:
    """(basename, entry count) of the newest valid handoff in ``cwd`` (§7), or None.
    Blocking: call it in a worker thread."""
    from clio_acp.memory.handoff import handoff_offer

    offer = handoff_offer(cwd, enabled=True)
    return (offer.source, offer.count) if offer is not None else None


def handoff_facts(rows: Sequence[Any]) -> dict[str, Any]:
    """Facts for the handoff artifact (§12 item 8) from a session's journal rows:
    task (first prompt), latest instruction, files touched, commands with exit codes."""
    prompts = [r.data.get("text", "") for r in rows if r.type == history.ROW_PROMPT]
    calls = {r.data.get("tool_call_id"): r.data for r in rows if r.type == history.ROW_TOOL_CALL}
    files: list[str] = []
    commands: list[tuple[str, int | None]] = []
    for row in rows:
        if row.type != history.ROW_TOOL_RESULT:
            continue
        call = calls.get(row.data.get("tool_call_id")) or {}
        name = call.get("name") or row.data.get("name")
        args = call.get("arguments") or {}
        if name in ("write_file", "edit_file") and row.data.get("status") == "completed":
            path = row.data.get("path") or args.get("path")
            if path:
                files.append(str(path))
        elif name == "run_command" and args.get("command"):
            commands.append((str(args["command"]), row.data.get("exit_code")))
    return {
        "task": prompts[0] if prompts else "",
        "latest_instruction": prompts[-1] if prompts else "",
        "files_touched": files,
        "commands": commands,
    }
