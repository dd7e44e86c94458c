"""Typed settings (pydantic), their defaults, and the YAML file they load from.

Owns every setting name and default; other modules read a ``Settings`` object and
never parse YAML or environment variables themselves. YAML keys are camelCase as in
the reference implementation (``context.memory.cadenceToolCalls``); Python attributes
are snake_case. Unknown keys are rejected so a typo is reported, not ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

# MEMORY_SPEC §3/§10: one constant shared by the policy step and the settings default
# (bug class §11.3: two defaults once disagreed). A test pins the two together.
MEMORY_TIMEOUT_MS_DEFAULT = 60_000


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_assignment=True
    )


class MemorySettings(_Model):
    """``context.memory.*`` (MEMORY_SPEC §10 and §12). Read live on every hook call."""

    enabled: bool = True
    """Kill switch for the whole memory plane: observation, writes, model, reminders,
    handoff offer and seed."""
    target: str | None = None
    """Target id of the LLM tier's route; null keeps memory on the rules tier only."""
    model: str | None = None
    cadence_tool_calls: int = Field(default=10, ge=2)
    """Tool calls between interval triggers (min 2)."""
    trajectory_steps: int = Field(default=8, ge=1)
    """Trajectory window, in tool steps (min 1)."""
    max_output_tokens: int = Field(default=2000, ge=1)
    """Memory model completion budget, tokens; the reminder cap is 4 chars per token."""
    timeout_ms: int = Field(default=MEMORY_TIMEOUT_MS_DEFAULT, ge=1)
    """Deadline of one memory step, ms."""
    loop_stop_repeats: int = Field(default=5, ge=2)
    """§12.4: at this repeat of the same failure key the loop guard ends the turn."""
    state_change_resets_repeats: bool = True
    """§12.1: a state-changing call between two failures resets the repeat count."""
    exit_code_semantics: bool = True
    """§12.2: informative non-zero exits (grep 1, diff 1, pylint bitmask, test) are not errors."""
    environmental_failures: bool = True
    """§12.3: two different commands failing alike are an environment fault."""
    escalation: bool = True
    """§12.4: one reminder per key per turn, no identical repeat, loop stop."""
    capture_requirements: bool = True
    """§12.5: explicit constraints in user prompts become knowledge entries."""
    restore_unresolved_failures: bool = True
    """§12.6: the post-compaction restore also carries unresolved failure entries."""
    constrained_decoding: bool = True
    """§12.9: send a grammar to routes that support it."""

    @field_validator("cadence_tool_calls", mode="before")
    @classmethod
    def _cadence_floor(cls, value: Any) -> Any:
        # §4: everyNTools = max(2, value or 10); a too-small cadence is raised, not refused.
        if isinstance(value, int) and not isinstance(value, bool) and value < 2:
            return 2
        return value


class ContextSettings(_Model):
    """``context.*``: memory plus the context-window rules (compaction, spill)."""

    memory: MemorySettings = Field(default_factory=MemorySettings)
    compaction_trigger_ratio: float = Field(default=0.8, gt=0, le=1)
    """Compact when the model view reaches this share of the model window."""
    compaction_retain_ratio: float = Field(default=0.5, gt=0, lt=1)
    """Share of the window the retained tail may use after compaction."""
    spill_threshold_bytes: int = Field(default=8192, ge=256)
    """A tool result larger than this (UTF-8 bytes) is spilled with a preview."""


class RoleSettings(_Model):
    """A role's route: which target and model serve it."""

    target: str | None = None
    model: str | None = None


class PermissionSettings(_Model):
    """``permissions.*``: the default permission mode of new sessions."""

    mode: Literal["ask", "accept-edits", "plan", "bypass"] = "ask"


class Settings(_Model):
    """The whole settings file (``<config>/settings.yaml``)."""

    version: int = 2
    context: ContextSettings = Field(default_factory=ContextSettings)
    chat: RoleSettings = Field(default_factory=RoleSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    targets: list[dict[str, Any]] = Field(default_factory=list)
    """Model targets; typed by ``clio_acp.models.targets`` (issue 5)."""


def load_settings(path: Path) -> Settings:
    """Load settings from a YAML file; a missing file gives the defaults.

    Raises ``yaml.YAMLError`` for invalid YAML and ``pydantic.ValidationError`` for
    values that fail validation (the error names the key).
    """
    if not path.exists():
        return Settings()
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return Settings.model_validate(data)
