"""Resolved model targets: a settings entry turned into what a client needs.

Owns URL normalisation (a bare ``host:port`` gets ``/v1``; the server root is the
base without ``/v1``, where llama.cpp serves ``/props`` and ``/health``), API-key
lookup through the named environment variable (the key never lives in settings),
and the endpoint key capacity is counted under (two targets on one URL share its
slots). It must not send requests or read the settings file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from clio_acp.models.dialects import Dialect, dialect_for
from clio_acp.models.errors import RouteError
from clio_acp.settings import REQUEST_TIMEOUT_MS_DEFAULT, TargetSettings

# The OpenAI runtime reads this variable when ``apiKeyEnv`` is not set.
OPENAI_KEY_ENV = "OPENAI_API_KEY"


def normalize_base_url(url: str) -> str:
    """The OpenAI base URL: trailing ``/`` removed; ``/v1`` added when the URL has no
    path (``http://127.0.0.1:8080`` → ``http://127.0.0.1:8080/v1``)."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    if not urlsplit(url).path:
        url += "/v1"
    return url


def root_url(base_url: str) -> str:
    """The server root of an OpenAI base URL (``…/v1`` removed)."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


@dataclass(frozen=True)
class Target:
    """A usable target. ``base_url`` is None only for an ``embedded`` target whose
    local server has not started yet. ``api_key_env`` names the key's variable."""

    id: str
    runtime: str
    base_url: str | None
    api_key_env: str | None = None
    declared_capacity: int | None = None
    default_model: str | None = None
    always_reasoning_models: frozenset[str] = field(default_factory=frozenset)
    request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT
    continuation_replay: bool = True
    """Send a model's reasoning state back to it on later requests (``continuation``)."""
    tool_calling: str = "native"
    """``native`` (OpenAI ``tools``) or ``constrained`` (``models/tool_calling.py``)."""
    api_key_value: str | None = field(default=None, repr=False)
    """A key held in memory (the embedded server's per-start key); wins over
    ``api_key_env``."""

    @classmethod
    def from_settings(cls, entry: TargetSettings) -> Target:
        """The runtime target for one ``targets:`` entry: base URL normalised (``/v1`` added),
        the API key variable defaulted for runtimes that need one, tool calling
        ``constrained`` for the embedded model."""
        return cls(
            id=entry.id,
            runtime=entry.runtime,
            base_url=normalize_base_url(entry.url) if entry.url else None,
            api_key_env=entry.api_key_env
            or (OPENAI_KEY_ENV if dialect_for(entry.runtime).needs_api_key else None),
            declared_capacity=entry.max_concurrent_requests,
            default_model=entry.default_model,
            always_reasoning_models=frozenset(entry.always_reasoning_models),
            request_timeout_ms=entry.request_timeout_ms,
            tool_calling=entry.tool_calling
            or ("constrained" if entry.runtime == "embedded" else "native"),
            continuation_replay=entry.continuation_replay,
        )

    @property
    def dialect(self) -> Dialect:
        """The runtime's dialect (thinking-off fields, grammar support, capacity default)."""
        return dialect_for(self.runtime)

    @property
    def root_url(self) -> str | None:
        """The server root (base URL without ``/v1``), or None for the embedded target before
        it runs."""
        return root_url(self.base_url) if self.base_url else None

    @property
    def endpoint_key(self) -> str:
        """What capacity is counted under: the server root, or ``embedded:<id>``."""
        return self.root_url or f"{self.runtime}:{self.id}"

    def with_base_url(self, base_url: str) -> Target:
        """A copy pointing at ``base_url`` (the embedded server once started)."""
        return replace(self, base_url=normalize_base_url(base_url))

    def api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """``api_key_value``, else the key from ``api_key_env``; None when neither is
        given. Raises ``RouteError`` when the named variable is unset or empty."""
        if self.api_key_value:
            return self.api_key_value
        if not self.api_key_env:
            return None
        value = (os.environ if env is None else env).get(self.api_key_env)
        if not value:
            raise RouteError(
                f"target {self.id!r}: environment variable {self.api_key_env} is not set",
                target_id=self.id,
            )
        return value
