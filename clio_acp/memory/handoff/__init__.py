"""Handoff snapshots and the deterministic handoff artifact (MEMORY_SPEC §7, §12 item 8).

Owns the fenced task-memory snapshot (v2 written, v1 and v2 read; fence languages
``clio-coder-task-memory`` and legacy ``clio-task-memory``), its all-or-nothing
parser, the ``handoff-<UTC>.md`` artifact written under
``<workspace>/.clio-coder/handoffs/`` with no model (goal, latest instruction,
workspace and git branch, files touched, last 10 commands with exit codes,
unresolved failures, the v2 snapshot — every text redacted), discovery of the
**newest** handoff only, the resume offer and the explicit seed with dedup.

It must never export the private status entry, a secret value or durable-store
data, never fall back to an older handoff file, and never seed or offer when the
memory kill switch is off. The package holds ``snapshot`` (the fenced snapshot),
``seed`` (discovery, offer, seed) and ``artifact`` (the §12.8 file). Filesystem work
is blocking; the ``a*`` coroutines run it in a worker thread.
"""

from __future__ import annotations

from clio_acp.memory.handoff.artifact import (
    HANDOFF_COMMANDS_SHOWN,
    CommandRun,
    HandoffFacts,
    awrite_handoff_artifact,
    read_git_branch,
    render_handoff_artifact,
    write_handoff_artifact,
)
from clio_acp.memory.handoff.seed import (
    HandoffArtifact,
    HandoffOffer,
    SeedOutcome,
    SeedResult,
    aread_newest_handoff,
    aseed_from_newest_handoff,
    handoff_offer,
    read_newest_handoff,
    seed_bank,
    seed_from_newest_handoff,
)
from clio_acp.memory.handoff.snapshot import (
    HANDOFF_LANGUAGE,
    HANDOFF_MAX_BYTES,
    LEGACY_HANDOFF_LANGUAGE,
    HandoffEntry,
    HandoffSnapshot,
    HandoffSource,
    parse_handoff_snapshot,
    render_handoff_snapshot,
    render_handoff_source,
    snapshot_from_bank,
)

__all__ = [
    "HANDOFF_COMMANDS_SHOWN",
    "HANDOFF_LANGUAGE",
    "HANDOFF_MAX_BYTES",
    "LEGACY_HANDOFF_LANGUAGE",
    "CommandRun",
    "HandoffArtifact",
    "HandoffEntry",
    "HandoffFacts",
    "HandoffOffer",
    "HandoffSnapshot",
    "HandoffSource",
    "SeedOutcome",
    "SeedResult",
    "aread_newest_handoff",
    "aseed_from_newest_handoff",
    "awrite_handoff_artifact",
    "handoff_offer",
    "parse_handoff_snapshot",
    "read_git_branch",
    "read_newest_handoff",
    "render_handoff_artifact",
    "render_handoff_snapshot",
    "render_handoff_source",
    "seed_bank",
    "seed_from_newest_handoff",
    "snapshot_from_bank",
    "write_handoff_artifact",
]
