"""Typed LSP options: ``initializationOptions`` and the ``clio`` configuration section.

Owns the names, types and defaults of what an editor may configure for the LSP face,
and the one conversion from untrusted JSON to a typed object. Invalid input never
fails the session: the caller shows the returned message (``window/showMessage``) and
uses the defaults (or the previous options). Must not talk to the client itself.

The same model serves ``initialize.initializationOptions``,
``workspace/didChangeConfiguration`` (``settings.clio`` or ``settings``) and the
``clio`` section pulled with ``workspace/configuration``. Keys are camelCase.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

CONFIG_SECTION = "clio"
"""The section name pulled with ``workspace/configuration`` and read from
``didChangeConfiguration.settings``."""


class _Options(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class DiagnosticOptions(_Options):
    """How memory reminders are shown as diagnostics."""

    enabled: bool = True
    severity: Literal["information", "hint"] = "information"
    """LSP ``DiagnosticSeverity`` of reminders (ARCHITECTURE.md: Information/Hint)."""
    max_per_file: int = Field(default=20, ge=1, le=200)
    """Oldest reminders beyond this many on one file are dropped."""


class InitializationOptions(_Options):
    """Everything an editor may set; every field has a default."""

    editor_session_id: str | None = None
    """The editor's window/session id (VS Code ``vscode.env.sessionId``). A later
    ``clio/sessionChanged`` with a different id is a session change."""
    diagnostics: DiagnosticOptions = Field(default_factory=DiagnosticOptions)
    memory_document: bool = True
    """Keep ``<workspace>/.clio-coder/memory.md`` current with the memory board."""
    progress: bool = True
    """Report a running turn through ``$/progress`` (when the client supports it)."""
    session_updates: bool = True
    """Send the event stream as ``clio/sessionUpdate`` notifications."""
    resume_offer: bool = True
    """Offer to seed from a handoff (``window/showMessageRequest``) after load/resume."""
    permission_mode: Literal["ask", "accept-edits", "plan", "bypass"] | None = None
    """Permission mode of new sessions; null keeps the settings file's mode."""
    permission_timeout_ms: int = Field(default=120_000, ge=1000)
    """How long an ``ask`` permission prompt waits for the user before denying, ms."""


def names_options(raw: Any) -> bool:
    """Whether ``raw`` (a ``didChangeConfiguration.settings`` without a ``clio``
    section) is a bare ``clio`` options object: every key is one of ours. Another
    server's section (``{"pylsp": …}``) is not."""
    if not isinstance(raw, dict) or not raw:
        return False
    fields = InitializationOptions.model_fields
    known = set(fields) | {to_camel(name) for name in fields}
    return all(isinstance(key, str) and key in known for key in raw)


def _merge(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``change`` over ``base`` (camelCase keys; snake_case keys of ``change`` are
    turned camelCase); nested objects merge, anything else replaces."""
    merged = dict(base)
    for key, value in change.items():
        name = to_camel(key) if isinstance(key, str) else key
        current = merged.get(name)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[name] = _merge(current, value)
        else:
            merged[name] = value
    return merged


def parse_options(
    raw: Any, *, base: InitializationOptions | None = None
) -> tuple[InitializationOptions, str | None]:
    """Validate ``raw`` (a JSON object, or null) into options.

    Returns ``(options, None)`` on success. With ``base``, ``raw`` is a partial
    change: only the keys it names change (nested objects merge key by key), so a
    ``didChangeConfiguration`` carrying one key keeps ``editorSessionId``. On invalid
    input returns ``(base or defaults, message)``: the message names each bad key and
    says the defaults (or the previous values) stay in force. Never raises. A
    wrapping ``{"clio": {...}}`` object is unwrapped.
    """
    fallback = base or InitializationOptions()
    if raw is None:
        return fallback, None
    if isinstance(raw, dict) and set(raw) == {CONFIG_SECTION} and isinstance(raw["clio"], dict):
        raw = raw[CONFIG_SECTION]
    if not isinstance(raw, dict):
        return fallback, "clio: options must be a JSON object; using defaults."
    if base is not None:
        raw = _merge(base.model_dump(by_alias=True), raw)
    try:
        return InitializationOptions.model_validate(raw), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        kept = "previous settings" if base is not None else "defaults"
        return fallback, f"clio: invalid options ({problems}); using {kept}."
