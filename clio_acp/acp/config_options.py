"""ACP session modes and config options (``session/set_mode``,
``session/set_config_option``; schema 1.19.0 ``SessionConfigOption``).

Owns the options we show (permission mode, chat model, task-memory tier), how the
settings become their choices (one typed :class:`ConfigChoices`, converted once per
request), and how a chosen value is applied (``Session.set_mode``,
``Session.set_model``, a settings override). Invalid values are ``-32602`` naming the
option and the allowed values. It must not run turns or touch memory itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clio_acp.acp import updates
from clio_acp.acp.errors import invalid_params

if TYPE_CHECKING:
    from clio_acp.session import Session

MODE_INFO: dict[str, tuple[str, str]] = {
    "ask": ("Ask", "Ask before edits and commands"),
    "accept-edits": ("Accept edits", "Edits run without asking; commands ask"),
    "plan": ("Plan", "Read-only: edits and commands are refused"),
    "bypass": ("Bypass", "Everything runs without asking"),
}
"""Permission modes (issue 6 item 3), shown as ACP legacy modes and a config option."""

CONFIG_MODE = "mode"
CONFIG_MODEL = "model"
CONFIG_MEMORY = "memory_tier"

MEMORY_TIER_OVERRIDES: dict[str, dict[str, Any] | None] = {
    "off": {"enabled": False},
    "rules": {"enabled": True, "target": None},
    "llm": None,  # the file's own memory route
}
"""Memory tier config option → ``context.memory`` override (MEMORY_SPEC §10 settings)."""


class SetConfigOptionParams(BaseModel):
    """``session/set_config_option`` params (the SDK 0.12.1 lacks a model for it)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", coerce_numbers_to_str=True)
    session_id: str = Field(alias="sessionId")
    config_id: str = Field(alias="configId")
    value: str

    @classmethod
    def parse(cls, params: Any) -> SetConfigOptionParams:
        """Validate raw params; ``-32602`` "sessionId, configId and value are required"."""
        try:
            return cls.model_validate(params)
        except ValidationError:
            raise invalid_params("sessionId, configId and value are required") from None


@dataclass(frozen=True)
class ConfigChoices:
    """What the settings offer right now: ``models`` as (``target/model``, label) per
    configured target's default model, ``tiers`` as (value, label), the file's
    ``chat`` route and its memory tier (``off`` | ``rules`` | ``llm``)."""

    models: tuple[tuple[str, str], ...] = ()
    tiers: tuple[tuple[str, str], ...] = ()
    chat_target: str | None = None
    chat_model: str | None = None
    tier: str = "off"
    has_settings: bool = False

    @classmethod
    def from_settings(cls, settings: Any, llm_memory_target: str | None) -> ConfigChoices:
        """Convert ``Settings`` (or None: no settings store) once."""
        tiers = [("off", "Off"), ("rules", "Rules only")]
        if llm_memory_target is not None:
            tiers.append(("llm", "Rules + model"))
        if settings is None:
            return cls(tiers=tuple(tiers))
        models = []
        chat = settings.chat
        for target in settings.targets:
            # The target's default model, and the model the chat route names on it: the
            # option shows the model in use, and choosing it keeps that model.
            names = [target.default_model]
            if chat.target == target.id and chat.model and chat.model != target.default_model:
                names.append(chat.model)
            named = [m for m in names if m]
            if not named:
                models.append((target.id, target.id))
            for model in named:
                models.append((f"{target.id}/{model}", f"{model} ({target.id})"))
        memory = settings.context.memory
        tier = "off" if not memory.enabled else ("rules" if memory.target is None else "llm")
        return cls(
            models=tuple(models),
            tiers=tuple(tiers),
            chat_target=settings.chat.target,
            chat_model=settings.chat.model,
            tier=tier,
            has_settings=True,
        )

    def current_model(self, session: Any) -> str:
        """The ``model`` option's value for ``session``: its chosen route, else the
        file's ``chat`` route, else the first choice."""
        route = getattr(session, "chat_route", None)
        target, model = route if route else (self.chat_target, self.chat_model)
        current = f"{target}/{model}" if model else (target or "")
        values = {v for v, _ in self.models}
        return current if current in values else self.models[0][0]


def _select(option_id: str, name: str, current: str, choices: Any, **extra: Any) -> Any:
    return SessionConfigOptionSelect(
        id=option_id,
        name=name,
        type="select",
        current_value=current,
        options=[SessionConfigSelectOption(value=v, name=n) for v, n in choices],
        **extra,
    )


def config_options(session: Any, choices: ConfigChoices) -> list[dict[str, Any]]:
    """The ``configOptions`` array for ``session`` (JSON, camelCase)."""
    mode = SessionConfigOptionSelect(
        id=CONFIG_MODE,
        name="Permission mode",
        category="mode",
        type="select",
        current_value=session.mode,
        options=[
            SessionConfigSelectOption(value=k, name=n, description=d)
            for k, (n, d) in MODE_INFO.items()
        ],
    )
    options: list[Any] = [mode]
    if choices.models and choices.has_settings:
        options.append(
            _select(
                CONFIG_MODEL,
                "Model",
                choices.current_model(session),
                choices.models,
                description="Chat model of this session; a change applies from the next turn",
                category="model",
            )
        )
    if choices.has_settings:
        options.append(
            _select(
                CONFIG_MEMORY,
                "Task memory",
                choices.tier,
                choices.tiers,
                description="off, rules tier only, or rules + the memory model",
            )
        )
    return [updates.dump(o) for o in options]


def session_state(session: Any, choices: ConfigChoices) -> dict[str, Any]:
    """``modes`` (legacy ``SessionModeState``) and ``configOptions`` for a
    ``session/new|load|resume|fork`` answer."""
    modes = SessionModeState(
        current_mode_id=session.mode,
        available_modes=[
            SessionMode(id=k, name=n, description=d) for k, (n, d) in MODE_INFO.items()
        ],
    )
    return {"modes": updates.dump(modes), "configOptions": config_options(session, choices)}


def set_mode(session: Session, mode: str) -> None:
    """Apply permission mode ``mode``; ``-32602`` naming the modes when unknown."""
    if mode not in MODE_INFO:
        raise invalid_params(f"unknown mode {mode!r}; one of {', '.join(MODE_INFO)}")
    session.set_mode(mode)


def set_model(session: Session, value: str, choices: ConfigChoices) -> None:
    """Use ``value`` (``target/model`` from the choices) for the session's next turns."""
    if value not in {v for v, _ in choices.models}:
        raise invalid_params(f"unknown model {value!r}")
    target, _, model = value.partition("/")
    try:  # this session's route, from its next turn on (Session.set_model)
        session.set_model(target, model or None)
    except (RuntimeError, ValueError) as exc:
        raise invalid_params(str(exc)) from None


class SettingsOverrides:
    """Editor overrides laid over the settings (``SettingsStore.set_overrides``)."""

    def __init__(self, settings: Callable[[], Any] | None) -> None:
        self._settings = settings
        self._overrides: dict[str, Any] = {}

    def set_memory_tier(self, value: str, choices: ConfigChoices) -> None:
        """Apply memory tier ``value``; ``-32602`` naming the tiers when unknown or refused."""
        tiers = {v for v, _ in choices.tiers}
        if value not in tiers:
            raise invalid_params(
                f"unknown memory tier {value!r}; one of {', '.join(sorted(tiers))}"
            )
        self._set("memory", MEMORY_TIER_OVERRIDES[value])

    def _set(self, key: str, overlay: dict[str, Any] | None) -> None:
        if overlay is None:
            self._overrides.pop(key, None)
        else:
            self._overrides[key] = overlay
        merged: dict[str, Any] = {}
        if "chat" in self._overrides:
            merged["chat"] = self._overrides["chat"]
        if "memory" in self._overrides:
            merged["context"] = {"memory": self._overrides["memory"]}
        setter = getattr(self._settings, "set_overrides", None)
        if setter is None or not setter(merged):
            raise invalid_params("the settings refused this value")
