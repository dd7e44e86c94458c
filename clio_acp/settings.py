"""Typed settings (pydantic), their defaults, the YAML file, overrides and live reload.

Owns every setting name and default; other modules read a ``Settings`` object and
never parse YAML or environment variables themselves. YAML keys are camelCase as in
the reference implementation (``context.memory.cadenceToolCalls``); Python attributes
are snake_case. Unknown keys are rejected so a typo is reported, not ignored.

Layers, lowest first: defaults < ``<config>/settings.yaml`` (or ``$CLIO_ACP_SETTINGS``)
< environment (``ENV_OVERRIDES`` and ``CLIO_ACP_SETTINGS_JSON``) < editor overrides
(LSP ``initializationOptions`` / ACP config options, a camelCase dict). A bad file or
override raises ``SettingsError`` naming the key and, for the file, the line;
``SettingsStore`` keeps the previous good settings in force when that happens and
reloads the file live (watchfiles). Role resolution (which target a role really
uses) lives in ``clio_acp.models.routing``, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

if TYPE_CHECKING:
    import watchfiles

log = logging.getLogger(__name__)

# Defaults that other modules need as well (the policy step, the agent loop, the
# compactor, the spill, the CLI, targets) are stated here once and imported from here
# (bug class MEMORY_SPEC §11.3: two defaults once disagreed);
# tests/foundation/test_settings_defaults.py pins every use to these.
MEMORY_TIMEOUT_MS_DEFAULT = 60_000
"""MEMORY_SPEC §3/§10: deadline of one memory step, ms."""
MEMORY_MAX_OUTPUT_TOKENS_DEFAULT = 2_000
"""MEMORY_SPEC §10: memory model completion budget, tokens."""
COMPACTION_TRIGGER_RATIO_DEFAULT = 0.8
"""Seed ``004``: compact when the model view reaches this share of the window."""
COMPACTION_RETAIN_RATIO_DEFAULT = 0.5
"""Seed ``004``: the retained tail fits in this share of the window."""
SPILL_THRESHOLD_BYTES_DEFAULT = 8_192
"""Seed ``004``: tool results larger than this many UTF-8 bytes are spilled."""
MAX_TURN_REQUESTS_DEFAULT = 50
"""Model requests allowed in one turn before it stops with ``max_turn_requests``."""
CONTEXT_WINDOW_DEFAULT = 32_768
"""Model window, tokens, when neither the target nor the server says otherwise."""
REQUEST_TIMEOUT_MS_DEFAULT = 300_000
"""Deadline of one chat request on a target, ms."""
CHAT_MAX_OUTPUT_TOKENS_DEFAULT = 8_192
"""Issue 20 item 2: output cap of one chat answer, tokens, unless ``chat.maxOutputTokens``."""
EMBEDDED_CHAT_MAX_OUTPUT_TOKENS_DEFAULT = 384
"""The same for the embedded model (a 135M model that wanders off; 4,096-token slots)."""


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
    max_output_tokens: int = Field(default=MEMORY_MAX_OUTPUT_TOKENS_DEFAULT, ge=1)
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
    """§13.2 (``environmentalFailures``): failures with an environment-shaped
    signature (command not found, permission denied, network, daemon, disk full,
    missing compiler/package, dead tool channel) are environment faults: the first
    sighting records a knowledge entry, the second call failing alike reminds."""
    unchanged_after_edit: bool = True
    """§13.1 (``unchangedAfterEdit``): a rerun failing exactly as before although
    files were edited in between gets one reminder (the third in a row escalates)."""
    recurring_problem: bool = True
    """§13.3 (``recurringProblem``): the same problem line in failures of three or
    more calls (two or more different commands) within the last twelve reminds once."""
    rules_status: bool = True
    """§13.5 (``rulesStatus``): without an LLM tier, the rules tier keeps a status
    entry (goal, files changed, last command, unresolved failures, steps)."""
    completion_check: bool = True
    """§13.6 (``completionCheck``): the first answer that would end the task while
    captured requirements exist gets one "before you finish, check: …" reminder."""
    escalation: bool = True
    """§12.4: one reminder per key per turn, no identical repeat, loop stop."""
    capture_requirements: bool = True
    """§12.5/§13.4 (``captureRequirements``): requirements in the user's own prompt
    (cue words, Requirements:/Constraints:/Acceptance criteria: lists) become
    knowledge entries."""
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
    compaction_trigger_ratio: float = Field(default=COMPACTION_TRIGGER_RATIO_DEFAULT, gt=0, le=1)
    """Compact when the model view reaches this share of the model window."""
    compaction_retain_ratio: float = Field(default=COMPACTION_RETAIN_RATIO_DEFAULT, gt=0, lt=1)
    """Share of the window the retained tail may use after compaction."""
    spill_threshold_bytes: int = Field(default=SPILL_THRESHOLD_BYTES_DEFAULT, ge=256)
    """A tool result larger than this (UTF-8 bytes) is spilled with a preview."""


Runtime = Literal[
    "llamacpp", "llama-cpp-python", "ollama", "lmstudio", "vllm", "litellm", "openai", "embedded"
]
"""Server kinds a target can be (issue 5): decides the thinking-off dialect, grammar
support and capacity defaults (``clio_acp.models.dialects``)."""

_TARGET_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class TargetSettings(_Model):
    """One entry of ``targets:``: an OpenAI-compatible endpoint a role can route to."""

    id: str = Field(pattern=_TARGET_ID)
    """Name the roles use (``chat.target``, ``context.memory.target``)."""
    runtime: Runtime
    url: str | None = None
    """OpenAI base URL, e.g. ``http://127.0.0.1:8080/v1``; a bare ``host:port`` gets
    ``/v1``. Not used for ``embedded`` (the local server picks its own port)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (never the key itself)."""
    max_concurrent_requests: int | None = Field(default=None, ge=1)
    """Declared request capacity (slots); unset: discovery, then the runtime default."""
    default_model: str | None = None
    """Model used when a role names this target but no model."""
    always_reasoning_models: list[str] = Field(default_factory=list)
    """Models that always think: the memory route refuses to share them with chat
    (MEMORY_SPEC §10 route safety)."""
    request_timeout_ms: int = Field(default=REQUEST_TIMEOUT_MS_DEFAULT, ge=1)
    """Deadline of one chat request on this target, ms (memory uses its own)."""
    context_window: int | None = Field(default=None, ge=1024)
    """Model window in tokens (compaction triggers at 0.8 of it); unset: 32,768."""
    tool_calling: Literal["native", "constrained"] | None = None
    """How the chat route offers tools: ``native`` sends OpenAI ``tools`` (the chat
    template must render them); ``constrained`` describes them in the system message
    and constrains the answer to one call by JSON schema, then lets the model answer
    from the result (``clio_acp.models.tool_calling``; runtimes with grammar support
    only). Unset: ``constrained`` for ``embedded``, ``native`` otherwise."""
    continuation_replay: bool = True
    """Send the reasoning state a model returned (``reasoning_content``, reasoning items,
    tool-call signatures) back to the same target+model on later requests; false: never
    (for a server that rejects reasoning fields in its input)."""

    @model_validator(mode="after")
    def _url_unless_embedded(self) -> TargetSettings:
        if self.runtime != "embedded" and not self.url:
            raise ValueError(f"target {self.id!r}: url is required for runtime {self.runtime}")
        return self


class RoleSettings(_Model):
    """A role's route: which target and model serve it."""

    target: str | None = None
    model: str | None = None


class ChatSettings(RoleSettings):
    """``chat``: the chat route and how long its answers may be."""

    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output cap of one chat answer, tokens; unset: 384 on the embedded model, 8,192
    elsewhere."""
    seed: int | None = None
    """Sampling seed sent with every chat request (reproducible runs); unset: none."""


class PermissionSettings(_Model):
    """``permissions.*``: the default permission mode of new sessions."""

    mode: Literal["ask", "accept-edits", "plan", "bypass"] = "ask"


class Settings(_Model):
    """The whole settings file (``<config>/settings.yaml``)."""

    version: int = 2
    context: ContextSettings = Field(default_factory=ContextSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    targets: list[TargetSettings] = Field(default_factory=list)
    """Model targets (ids unique); roles name them by id."""

    @field_validator("targets")
    @classmethod
    def _unique_target_ids(cls, value: list[TargetSettings]) -> list[TargetSettings]:
        seen: set[str] = set()
        for target in value:
            if target.id in seen:
                raise ValueError(f"duplicate target id {target.id!r}")
            seen.add(target.id)
        return value

    def target(self, target_id: str | None) -> TargetSettings | None:
        """The target with this id, or None."""
        return next((t for t in self.targets if t.id == target_id), None)


def settings_error_notice(error: object) -> str:
    """What the editors and ``doctor`` say about unusable settings (issue 20 item 5)."""
    return (
        f"clio: settings not applied: {error}. The previous good settings stay in force "
        "(the defaults if none loaded yet); fix the file and save it, it is re-read."
    )


class SettingsError(ValueError):
    """Settings that cannot be used. ``source`` is the file path or ``"environment"``
    / ``"editor"``; ``key`` the dotted camelCase key (``targets[0].url``) when known;
    ``line`` the 1-based line in the file when known; ``problem`` the reason."""

    def __init__(
        self, source: str, problem: str, *, key: str | None = None, line: int | None = None
    ) -> None:
        self.source, self.problem, self.key, self.line = source, problem, key, line
        where = source + (f" line {line}" if line else "")
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")


# Environment overrides (issue 5 item 4): variable -> camelCase key path.
ENV_OVERRIDES: dict[str, tuple[str, ...]] = {
    "CLIO_ACP_CHAT_TARGET": ("chat", "target"),
    "CLIO_ACP_CHAT_MODEL": ("chat", "model"),
    "CLIO_ACP_MEMORY_ENABLED": ("context", "memory", "enabled"),
    "CLIO_ACP_MEMORY_TARGET": ("context", "memory", "target"),
    "CLIO_ACP_MEMORY_MODEL": ("context", "memory", "model"),
    "CLIO_ACP_PERMISSION_MODE": ("permissions", "mode"),
}
WATCH_RETRY_SECONDS = 2.0
"""Pause before the settings watcher starts again after it failed."""
SETTINGS_FILE_ENV = "CLIO_ACP_SETTINGS"
"""Path of the settings file to use instead of ``<config>/settings.yaml``."""
SETTINGS_JSON_ENV = "CLIO_ACP_SETTINGS_JSON"
"""A JSON object (camelCase keys) laid over the file, e.g. ``{"context":{"memory":{"enabled":false}}}``."""


def settings_path(config_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """The settings file: ``$CLIO_ACP_SETTINGS`` if set, else ``<config>/settings.yaml``."""
    env = os.environ if env is None else env
    override = env.get(SETTINGS_FILE_ENV)
    if override:
        return Path(override).expanduser().absolute()
    return config_dir / "settings.yaml"


def _key_text(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at ``loc`` (the deepest one that exists)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if kv[0].value == part), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _first_error(exc: ValidationError) -> tuple[tuple[Any, ...], str]:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    return loc, msg


MAX_SETTINGS_BYTES = 1_048_576
"""A settings file larger than this is refused (it is never that big by intent)."""
MAX_SETTINGS_DEPTH = 32
"""Nesting deeper than this (file, ``CLIO_ACP_SETTINGS_JSON``, editor overrides) is refused."""
MAX_SETTINGS_VALUES = 100_000
"""More values than this (YAML aliases count each time they are used) is refused."""


def _check_shape(data: Any, source: str) -> None:
    """Refuse deep nesting and alias bombs before anything recursive walks ``data``.

    Iterative, so it cannot overflow the stack itself. Raises ``SettingsError``."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_SETTINGS_VALUES:
            raise SettingsError(source, f"more than {MAX_SETTINGS_VALUES} values")
        if isinstance(value, dict | list):
            if depth > MAX_SETTINGS_DEPTH:
                raise SettingsError(source, f"nested more than {MAX_SETTINGS_DEPTH} levels deep")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


_FLOW_DEPTH_LIMIT = 100


def _check_flow_depth(text: str, source: str) -> None:
    """Refuse ``[[[[…`` / ``{{{{…`` nesting before YAML sees it: PyYAML's scanner takes
    seconds on a few thousand levels. Brackets are counted everywhere (quotes too), so
    the limit is far above any real file's nesting."""
    depth = 0
    for char in text:
        if char in "[{":
            depth += 1
            if depth > _FLOW_DEPTH_LIMIT:
                raise SettingsError(source, f"nested more than {_FLOW_DEPTH_LIMIT} levels deep")
        elif char in "]}" and depth:
            depth -= 1


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problem = f"not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8"
        raise SettingsError(source, problem, line=line) from None


def read_settings_file(path: Path) -> dict[str, Any]:
    """The file's mapping (``{}`` when missing or empty).

    Raises ``SettingsError`` — never anything else — for a file that cannot be read,
    is over 1 MiB, is not UTF-8 (with the line of the first bad byte), is not valid
    YAML (with its line), nests deeper than 32 levels or expands past 100,000
    values, or whose top level is not a mapping."""
    source = str(path)
    try:
        if not path.exists():
            return {}
        if not stat.S_ISREG(path.stat().st_mode):
            # A FIFO or /dev/stdin would block (or eat a server's protocol stream).
            raise SettingsError(source, "not a regular file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        raise SettingsError(source, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise SettingsError(source, f"larger than {MAX_SETTINGS_BYTES} bytes")
    text = _decode(raw, source)
    _check_flow_depth(text, source)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SettingsError(
            source, f"invalid YAML: {problem}", line=mark.line + 1 if mark else None
        ) from None
    except RecursionError:
        raise SettingsError(source, "invalid YAML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date like 2026-02-30
        raise SettingsError(source, f"invalid YAML value: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SettingsError(source, "the top level must be a mapping of keys", line=1)
    _check_shape(data, source)
    return data


def _validate_file(path: Path, data: dict[str, Any]) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        loc, msg = _first_error(exc)
        try:
            node = yaml.compose(path.read_text(encoding="utf-8-sig"))
        except Exception:  # only for the line number: any failure just drops it
            node = None
        raise SettingsError(str(path), msg, key=_key_text(loc), line=_line_of(node, loc)) from None
    except RecursionError:
        raise SettingsError(str(path), "nested too deeply") from None


def _camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {to_camel(k) if isinstance(k, str) else k: _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def env_overlay(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The environment's settings overlay (camelCase dict). Raises ``SettingsError``
    (source ``environment``) for a ``CLIO_ACP_SETTINGS_JSON`` that is not a JSON object."""
    env = os.environ if env is None else env
    overlay: dict[str, Any] = {}
    raw = env.get(SETTINGS_JSON_ENV)
    if raw:
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SettingsError("environment", f"{SETTINGS_JSON_ENV} is not JSON: {exc}") from None
        except RecursionError:
            raise SettingsError("environment", f"{SETTINGS_JSON_ENV} nests too deeply") from None
        if not isinstance(data, dict):
            raise SettingsError("environment", f"{SETTINGS_JSON_ENV} must be a JSON object")
        _check_shape(data, "environment")
        overlay = _camel_keys(data)
    for var, keys in ENV_OVERRIDES.items():
        value = env.get(var)
        if value is None or value == "":
            continue
        nested: dict[str, Any] = {keys[-1]: value}
        for key in reversed(keys[:-1]):
            nested = {key: nested}
        overlay = _deep_merge(overlay, nested)
    return overlay


def apply_overrides(
    settings: Settings, overlay: Mapping[str, Any], source: str = "editor"
) -> Settings:
    """``settings`` with ``overlay`` (camelCase or snake_case keys) laid over it; lists
    replace, mappings merge. Raises ``SettingsError`` naming the key; ``settings``
    itself is never changed."""
    if not overlay:
        return settings
    if not isinstance(overlay, Mapping):
        raise SettingsError(source, "overrides must be a mapping of keys")
    _check_shape(dict(overlay), source)
    merged = _deep_merge(settings.model_dump(by_alias=True), _camel_keys(dict(overlay)))
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        loc, msg = _first_error(exc)
        raise SettingsError(source, msg, key=_key_text(loc)) from None
    except RecursionError:
        raise SettingsError(source, "nested too deeply") from None


def load_settings(
    path: Path,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Load the file at ``path`` (missing: defaults), then the environment overlay when
    ``env`` is given (``os.environ`` is not read unless passed), then ``overrides``.

    Raises ``SettingsError`` naming the source, key and (for the file) line, and
    nothing else whatever the bytes of the file, the environment or the overrides.
    """
    settings = _validate_file(path, read_settings_file(path))
    if env is not None:
        settings = apply_overrides(settings, env_overlay(env), source="environment")
    if overrides:
        settings = apply_overrides(settings, overrides, source="editor")
    return settings


def open_settings(
    config_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> SettingsStore:
    """The one way an entry point (acp, lsp, run, replay, eval, doctor, targets,
    settings) gets its settings: the file ``settings_path(config_dir, env)``
    (``$CLIO_ACP_SETTINGS`` wins), then the environment overlay (``ENV_OVERRIDES``,
    ``CLIO_ACP_SETTINGS_JSON``), then ``overrides``. ``env`` defaults to
    ``os.environ``. Never raises for bad settings: the store's ``error`` says what
    was not applied and its settings stay the defaults (see ``SettingsStore``)."""
    env = os.environ if env is None else env
    return SettingsStore(settings_path(config_dir, env), env=env, overrides=overrides)


class SettingsStore:
    """The live settings of one process: last good ``Settings``, reloaded from the file.

    Call it (``store()``) to get the current settings; it fits the ``settings:
    Callable[[], Settings]`` parameter of the session manager. Memory controls are
    read through it on every hook call, so a reload applies at the next call; a
    session's model routing is a snapshot taken when the session starts.

    ``error`` is the last load problem (``SettingsError``) or None; while it is set
    the previous good settings stay in force (defaults if the first load failed).
    """

    def __init__(
        self,
        path: Path,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = path
        self._env = dict(os.environ if env is None else env)
        self._overrides: dict[str, Any] = dict(overrides or {})
        self._current = Settings()
        self.error: SettingsError | None = None
        self._subscribers: list[Callable[[Settings], None]] = []
        self.reload()

    def __call__(self) -> Settings:
        return self._current

    @property
    def current(self) -> Settings:
        """The settings in force (the last good ones when the file or an override is bad); the
        same as calling the store."""
        return self._current

    def subscribe(self, callback: Callable[[Settings], None]) -> Callable[[], None]:
        """Call ``callback(settings)`` after each successful reload; returns unsubscribe."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def set_overrides(self, overrides: Mapping[str, Any]) -> bool:
        """Replace the editor overrides and reload; False (previous settings kept,
        ``error`` set) when they are invalid."""
        if not isinstance(overrides, Mapping):
            self.error = SettingsError("editor", "overrides must be a mapping of keys")
            return False
        previous = self._overrides
        self._overrides = dict(overrides)
        if not self.reload():
            self._overrides = previous
            return False
        return True

    def reload(self) -> bool:
        """Re-read file, environment and overrides. True when the result is valid (and
        now current); False keeps the previous settings and sets ``error``."""
        try:
            fresh = load_settings(self.path, env=self._env, overrides=self._overrides)
        except SettingsError as exc:
            self.error = exc
            log.warning("settings not applied, previous settings stay: %s", exc)
            return False
        except Exception as exc:  # never expected; a reload must not take a server down
            self.error = SettingsError(str(self.path), f"cannot load: {exc!r}")
            log.warning("settings not applied, previous settings stay: %s", self.error)
            return False
        self.error = None
        changed = fresh != self._current
        self._current = fresh
        if changed:
            for callback in list(self._subscribers):
                try:
                    callback(fresh)
                except Exception:  # a subscriber's bug must not stop the reload
                    log.exception("settings subscriber failed")
        return True

    async def watch(self, stop: asyncio.Event | None = None, *, debounce_ms: int = 200) -> None:
        """Reload whenever the file changes, until ``stop`` is set or the task is
        cancelled. Watches the file's folder (editors replace files by rename),
        creating it if missing. A bad save only sets ``error``; if the watch itself
        fails (the folder removed, a watcher error) it starts again after a pause, so
        a later fix is still picked up."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                await self._watch_once(stop, debounce_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("settings watcher failed (%r); watching again shortly", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), WATCH_RETRY_SECONDS)
            else:
                return

    async def _watch_once(self, stop: asyncio.Event, debounce_ms: int) -> None:
        import watchfiles  # here, not at import: commands that never watch skip ~10 ms

        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        name = self.path.name

        def only_our_file(_change: watchfiles.Change, changed: str) -> bool:
            return Path(changed).name == name

        async for _changes in watchfiles.awatch(
            folder, watch_filter=only_our_file, stop_event=stop, debounce=debounce_ms
        ):
            self.reload()
        if not stop.is_set():  # the watch ended by itself (its folder went away)
            raise OSError(f"stopped watching {folder}")
