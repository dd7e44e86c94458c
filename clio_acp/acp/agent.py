"""The ACP agent: protocol methods → ``SessionManager`` calls, events → ``session/update``.

Owns the translation between ACP v1 (``agent-client-protocol==0.12.1``, schema 1.19.0)
and the session core, and nothing else: no agent, memory or journal logic lives here.
:class:`ClioAcpAgent` is a plain class, deliberately not a subclass of the SDK's
``Agent`` protocol (whose defaults turn unimplemented methods into fake successes);
:func:`build_router` maps each method we serve onto it with the SDK's
``MessageRouter``, so a method we do not serve is ``-32601``. We route the stable
methods the SDK still lacks or marks unstable in 0.12.1 (``session/list``,
``session/resume``, ``session/close``, ``session/delete``, ``logout``,
``$/cancel_request``) ourselves, validating params with the SDK's schema models.

Sessions: ``session/new`` answers first and sends ``available_commands_update`` only
after its response; ``session/load`` replays the whole history as ``session/update``
before responding; ``session/resume`` never replays; ``session/close`` cancels then
frees; ``session/delete`` is idempotent; an unknown session is ``-32002``. The bank
reset on every session change (MEMORY_SPEC §10) is the manager's job: it happens
inside ``new_session`` / ``load_session`` / ``resume_session`` / ``fork_session`` /
``close_session``.

Turns: one at a time per session; ``session/cancel`` (or ``$/cancel_request`` on the
prompt) cancels the model stream and any running command through ``Session.cancel``,
flushes pending updates, and the prompt answers ``stopReason: "cancelled"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shlex
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.connection import Connection
from acp.exceptions import RequestError
from acp.router import MessageRouter, Route
from acp.schema import (
    AuthenticateRequest,
    CancelNotification,
    CancelRequestNotification,
    CloseSessionRequest,
    DeleteSessionRequest,
    ForkSessionRequest,
    InitializeRequest,
    ListSessionsRequest,
    LoadSessionRequest,
    LogoutRequest,
    NewSessionRequest,
    PromptRequest,
    RequestPermissionResponse,
    ResumeSessionRequest,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionModeRequest,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clio_acp import __version__
from clio_acp import events as ev
from clio_acp.acp import updates
from clio_acp.acp.transport import CURRENT_REQUEST_ID, LineTransport
from clio_acp.advisory import fence_for, neutralize_untrusted
from clio_acp.session.journal import JournalUnavailable

if TYPE_CHECKING:
    from clio_acp.session.manager import Session, SessionManager

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
"""ACP v1: the only version we speak (``acp.meta.PROTOCOL_VERSION``)."""

REQUEST_CANCELLED = -32800
"""ACP cancellation (protocol/v1/cancellation): answer to a ``$/cancel_request``-ed request."""

RESOURCE_NOT_FOUND = -32002
"""ACP ``ErrorCode`` resource not found: an unknown session id (issue 7 item 3)."""

BOARD_METHOD = "clio/session/board"
PROPOSE_METHOD = "clio/memory/propose"
"""MEMORY_SPEC §10 (ACP) with the ``_clio/`` prefix of §12 (names without the leading
underscore: the SDK router strips it before calling ``ext_method``)."""

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

_MEMORY_TIER_OVERRIDES: dict[str, dict[str, Any] | None] = {
    "off": {"enabled": False},
    "rules": {"enabled": True, "target": None},
    "llm": None,  # the file's own memory route
}
"""Memory tier config option → ``context.memory`` override (MEMORY_SPEC §10 settings)."""


class _InitializeExtras(BaseModel):
    """Client capabilities the SDK schema (1.19.0) does not model yet."""

    model_config = ConfigDict(extra="ignore")

    class _Session(BaseModel):
        model_config = ConfigDict(extra="ignore")
        notices: dict[str, Any] | None = None

    class _Caps(BaseModel):
        model_config = ConfigDict(extra="ignore")
        session: _InitializeExtras._Session | None = None

    client_capabilities: _Caps | None = Field(default=None, alias="clientCapabilities")


class ProposeParams(BaseModel):
    """``_clio/memory/propose`` params (MEMORY_SPEC §10 ACP)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    session_id: str = Field(alias="sessionId")
    entry_id: str = Field(alias="entryId")
    scope: str = Field(pattern="^(repo|global)$")
    acknowledge_global: bool = Field(default=False, alias="acknowledgeGlobal")


class BoardParams(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    session_id: str = Field(alias="sessionId")


@dataclass(frozen=True)
class ClientTools:
    """The client's tool capabilities from ``initialize``."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False

    @property
    def any(self) -> bool:
        return self.read_text_file or self.write_text_file or self.terminal


@dataclass
class _Hosted:
    """One session the client has open in this process."""

    session: Session
    unsubscribe: Callable[[], None] | None = None
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    pump: asyncio.Task[None] | None = None
    turn: asyncio.Task[Any] | None = None
    cancelling: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    """Chat usage seen on this connection (sums of ``UsageUpdate`` events) for ``/usage``."""


def not_found(session_id: str) -> RequestError:
    return RequestError(RESOURCE_NOT_FOUND, "Resource not found", {"sessionId": session_id})


def _absolute(path: str, what: str = "cwd") -> Path:
    p = Path(path)
    if not p.is_absolute():
        raise RequestError.invalid_params({"details": f"{what} must be an absolute path: {path}"})
    return p


class ClioAcpAgent:
    """Serves ACP methods for one client connection (one process).

    ``manager_factory`` is called once, on the first session method, so
    ``initialize`` does not pay for opening the journal.
    """

    def __init__(
        self,
        manager_factory: Callable[..., SessionManager],
        *,
        settings: Callable[[], Any] | None = None,
    ) -> None:
        self._manager_factory = manager_factory
        self._manager: SessionManager | None = None
        self._settings = settings
        self._conn: Connection | None = None
        self._transport: LineTransport | None = None
        self._hosted: dict[str, _Hosted] = {}
        self._inflight: dict[Any, Callable[[], Awaitable[None] | None]] = {}
        self._running: set[asyncio.Task[Any]] = set()
        self._presentation = updates.Presentation()
        self._tools: ClientTools | None = None
        self._initialized = False
        self._overrides: dict[str, Any] = {}
        settings_now = self._file_settings()
        self._llm_memory_target = (
            settings_now.context.memory.target if settings_now is not None else None
        )

    # -- wiring ---------------------------------------------------------------------

    def attach(self, conn: Connection, transport: LineTransport | None) -> None:
        self._conn = conn
        self._transport = transport

    @property
    def conn(self) -> Connection:
        assert self._conn is not None, "attach() first"
        return self._conn

    def manager(self) -> SessionManager:
        if self._manager is None:
            self._manager = self._manager_factory(host_factory=self._host_factory())
        return self._manager

    def _host_factory(self) -> Callable[..., Any] | None:
        tools = self._tools
        if tools is None or not tools.any:
            return None
        from clio_acp.acp.host import AcpToolHost

        conn = self.conn

        def factory(session_id: str, *args: Any, **kwargs: Any) -> Any:
            return AcpToolHost(conn, session_id, tools)

        return factory

    async def drain(self, grace_s: float) -> None:
        """Let requests already received finish (input ended: answers still go out).

        The SDK's ``Connection`` treats end of input as a disconnect, so
        ``session/update`` notifications sent after it are dropped; responses are still
        written by the request tasks themselves.
        """
        await asyncio.sleep(0)  # handler tasks created at end of input start and register
        pending = {t for t in self._running if not t.done()}
        if pending:
            await asyncio.wait(pending, timeout=grace_s)

    async def aclose(self) -> None:
        for sid in list(self._hosted):
            with contextlib.suppress(Exception):
                await self._release(sid, cancel=True)
        if self._manager is not None:
            with contextlib.suppress(Exception):
                await self._manager.aclose()

    # -- initialize / auth ----------------------------------------------------------

    async def initialize(self, req: InitializeRequest, raw: dict[str, Any]) -> dict[str, Any]:
        """ACP ``initialize``: protocol version 1, what works, ``agentInfo``."""
        caps = req.client_capabilities
        fs = caps.fs if caps is not None and caps.fs is not None else None
        self._tools = ClientTools(
            read_text_file=bool(fs and fs.read_text_file),
            write_text_file=bool(fs and fs.write_text_file),
            terminal=bool(caps and caps.terminal),
        )
        extras = _InitializeExtras.model_validate(raw)
        session_caps = extras.client_capabilities.session if extras.client_capabilities else None
        self._presentation = updates.Presentation(
            notices=bool(session_caps is not None and session_caps.notices is not None)
        )
        self._initialized = True
        info = req.client_info
        log.info(
            "initialize from %s %s (protocol %s, tools %s, notices %s)",
            info.name if info else "?",
            info.version if info else "?",
            req.protocol_version,
            self._tools,
            self._presentation.notices,
        )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {
                    "list": {},
                    "resume": {},
                    "close": {},
                    "delete": {},
                    "fork": {},
                    "additionalDirectories": {},
                },
                "auth": {"logout": {}},
                "_meta": {
                    "clio/board": {
                        "version": 1,
                        "method": "_" + BOARD_METHOD,
                        "proposeMemory": "_" + PROPOSE_METHOD,
                    }
                },
            },
            "authMethods": [],
            "agentInfo": {"name": "clio-acp", "title": "Clio", "version": __version__},
        }

    async def authenticate(self, req: AuthenticateRequest) -> dict[str, Any]:
        """We advertise no auth methods, so any method id is unknown."""
        raise RequestError.invalid_params(
            {"details": f"unknown auth method {req.method_id!r}; clio-acp needs no login"}
        )

    async def logout(self, req: LogoutRequest) -> dict[str, Any]:
        """Nothing to forget (no credentials are held); always succeeds."""
        return {}

    # -- session lifecycle ----------------------------------------------------------

    async def new_session(self, req: NewSessionRequest) -> dict[str, Any]:
        cwd = _absolute(req.cwd)
        if req.mcp_servers:  # honest capabilities: MCP is not implemented (yet)
            log.warning(
                "ignoring %d MCP server(s): clio-acp has no MCP client", len(req.mcp_servers)
            )
        roots = [_absolute(p, "additionalDirectories") for p in req.additional_directories or []]
        session = await self.manager().new_session(cwd, extra_roots=roots)
        self._host(session)
        self._after_response(session.id)
        return {"sessionId": session.id, **self._session_state(session)}

    async def load_session(self, req: LoadSessionRequest) -> dict[str, Any]:
        _absolute(req.cwd)
        await self._drop_local(req.session_id)
        session, history = await self._call(self.manager().load_session, req.session_id)
        hosted = self._host(session)
        for event in history:
            self._enqueue_event(hosted, event)
        await self._flush(hosted)
        self._after_response(session.id)
        return self._session_state(session)

    async def resume_session(self, req: ResumeSessionRequest) -> dict[str, Any]:
        _absolute(req.cwd)
        if req.session_id in self._hosted:  # resuming the current session: nothing changes
            session = self._hosted[req.session_id].session
        else:
            session = await self._call(self.manager().resume_session, req.session_id)
            self._host(session)
        self._after_response(session.id)
        return self._session_state(session)

    async def fork_session(self, req: ForkSessionRequest) -> dict[str, Any]:
        _absolute(req.cwd)
        session = await self._call(self.manager().fork_session, req.session_id)
        self._host(session)
        self._after_response(session.id)
        return {"sessionId": session.id, **self._session_state(session)}

    async def list_sessions(self, req: ListSessionsRequest) -> dict[str, Any]:
        cwd = _absolute(req.cwd) if req.cwd else None
        try:
            infos, cursor = await self.manager().list_sessions(cwd=cwd, cursor=req.cursor)
        except ValueError as exc:  # a cursor we did not issue
            raise RequestError.invalid_params({"details": str(exc)}) from None
        sessions = []
        for info in infos:
            item: dict[str, Any] = {"sessionId": info.session_id, "cwd": str(info.cwd)}
            title = getattr(info, "title", None)
            if title:
                item["title"] = title
            updated = getattr(info, "updated_at", None)
            if updated:
                item["updatedAt"] = str(updated)
            sessions.append(item)
        result: dict[str, Any] = {"sessions": sessions}
        if cursor:
            result["nextCursor"] = cursor
        return result

    async def close_session(self, req: CloseSessionRequest) -> dict[str, Any]:
        """Cancel any running turn, then free the session (MEMORY_SPEC §10 reset)."""
        if req.session_id not in self._hosted:
            raise not_found(req.session_id)
        await self._release(req.session_id, cancel=True)
        await self._call(self.manager().close_session, req.session_id)
        return {}

    async def delete_session(self, req: DeleteSessionRequest) -> dict[str, Any]:
        """Delete a stored session; deleting an unknown or deleted one succeeds."""
        if req.session_id in self._hosted:
            await self._release(req.session_id, cancel=True)
        await self.manager().delete_session(req.session_id)
        return {}

    # -- modes and config options ---------------------------------------------------

    async def set_session_mode(self, req: SetSessionModeRequest) -> dict[str, Any]:
        hosted = self._get(req.session_id)
        self._set_mode(hosted, req.mode_id)
        self._enqueue(hosted, updates.config_option_update(self._config_options(hosted.session)))
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            sid = str(params["sessionId"])
            config_id = str(params["configId"])
            value = str(params["value"])
        except (KeyError, TypeError):
            raise RequestError.invalid_params(
                {"details": "sessionId, configId and value are required"}
            ) from None
        hosted = self._get(sid)
        if config_id == CONFIG_MODE:
            self._set_mode(hosted, value)
            self._enqueue(hosted, updates.current_mode_update(hosted.session.mode))
        elif config_id == CONFIG_MODEL and self._model_choices():
            if value not in {v for v, _ in self._model_choices()}:
                raise RequestError.invalid_params({"details": f"unknown model {value!r}"})
            target, _, model = value.partition("/")
            try:  # this session's route, from its next turn on (Session.set_model)
                hosted.session.set_model(target, model or None)
            except (RuntimeError, ValueError) as exc:
                raise RequestError.invalid_params({"details": str(exc)}) from None
        elif config_id == CONFIG_MEMORY and self._settings is not None:
            tiers = {v for v, _ in self._memory_tiers()}
            if value not in tiers:
                raise RequestError.invalid_params(
                    {"details": f"unknown memory tier {value!r}; one of {', '.join(sorted(tiers))}"}
                )
            self._override("memory", _MEMORY_TIER_OVERRIDES[value])
        else:
            raise RequestError.invalid_params({"details": f"unknown config option {config_id!r}"})
        return {"configOptions": self._config_options(hosted.session)}

    def _set_mode(self, hosted: _Hosted, mode: str) -> None:
        if mode not in MODE_INFO:
            raise RequestError.invalid_params(
                {"details": f"unknown mode {mode!r}; one of {', '.join(MODE_INFO)}"}
            )
        hosted.session.set_mode(mode)

    def _override(self, key: str, overlay: dict[str, Any] | None) -> None:
        """Lay an editor override over the settings (``SettingsStore.set_overrides``)."""
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
            raise RequestError.invalid_params({"details": "the settings refused this value"})

    def _file_settings(self) -> Any:
        if self._settings is None:
            return None
        try:
            return self._settings()
        except Exception:
            return None

    def _model_choices(self) -> list[tuple[str, str]]:
        """(``target/model``, label) for each configured target's default model."""
        settings = self._file_settings()
        if settings is None:
            return []
        choices = []
        for target in settings.targets:
            model = target.default_model
            value = f"{target.id}/{model}" if model else target.id
            choices.append((value, f"{model} ({target.id})" if model else target.id))
        return choices

    def _memory_tiers(self) -> list[tuple[str, str]]:
        tiers = [("off", "Off"), ("rules", "Rules only")]
        if self._llm_memory_target is not None:
            tiers.append(("llm", "Rules + model"))
        return tiers

    def _current_tier(self) -> str:
        settings = self._file_settings()
        if settings is None or not settings.context.memory.enabled:
            return "off"
        return "rules" if settings.context.memory.target is None else "llm"

    def _config_options(self, session: Any) -> list[Any]:
        options: list[Any] = [
            SessionConfigOptionSelect(
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
        ]
        models = self._model_choices()
        settings = self._file_settings()
        if models and settings is not None:
            route = getattr(session, "chat_route", None)
            target, model = route if route else (settings.chat.target, settings.chat.model)
            current = f"{target}/{model}" if model else (target or "")
            values = {v for v, _ in models}
            options.append(
                SessionConfigOptionSelect(
                    id=CONFIG_MODEL,
                    name="Model",
                    description="Chat model of this session; a change applies from the next turn",
                    category="model",
                    type="select",
                    current_value=current if current in values else models[0][0],
                    options=[SessionConfigSelectOption(value=v, name=n) for v, n in models],
                )
            )
        if settings is not None:
            options.append(
                SessionConfigOptionSelect(
                    id=CONFIG_MEMORY,
                    name="Task memory",
                    description="off, rules tier only, or rules + the memory model",
                    type="select",
                    current_value=self._current_tier(),
                    options=[
                        SessionConfigSelectOption(value=v, name=n) for v, n in self._memory_tiers()
                    ],
                )
            )
        return [updates.dump(o) for o in options]

    def _session_state(self, session: Any) -> dict[str, Any]:
        modes = SessionModeState(
            current_mode_id=session.mode,
            available_modes=[
                SessionMode(id=k, name=n, description=d) for k, (n, d) in MODE_INFO.items()
            ],
        )
        return {
            "modes": updates.dump(modes),
            "configOptions": self._config_options(session),
        }

    # -- prompt turn ----------------------------------------------------------------

    async def prompt(self, req: PromptRequest) -> dict[str, Any]:
        hosted = self._get(req.session_id)
        if hosted.turn is not None and not hosted.turn.done():
            raise RequestError.invalid_request(
                {"details": "a prompt turn is already running in this session"}
            )
        text = prompt_text(req.prompt)
        title_before = getattr(hosted.session, "title", None)
        hosted.turn = asyncio.current_task()
        hosted.cancelling = False
        request_id = CURRENT_REQUEST_ID.get()
        if request_id is not None:  # $/cancel_request on a prompt = session/cancel
            self._inflight[_key(request_id)] = lambda: self._cancel_turn(hosted)
        try:
            command = parse_slash(text)
            if command is not None:
                stop = await self._slash(hosted, *command)
            else:
                try:
                    stop = await hosted.session.prompt(text)
                except asyncio.CancelledError:
                    if not hosted.cancelling:
                        raise
                    _uncancel()
                    stop = "cancelled"
                except JournalUnavailable as exc:  # disk full / read-only: say so
                    log.warning("%s", exc)
                    self._enqueue(
                        hosted, updates.message_update(f"clio: {exc}\n", uuid.uuid4().hex)
                    )
                    stop = "end_turn"
                except Exception:
                    if not hosted.cancelling:
                        raise
                    log.debug("turn failed while cancelling", exc_info=True)
                    stop = "cancelled"
            if hosted.cancelling:
                stop = "cancelled"
            title = getattr(hosted.session, "title", None)
            if title and title != title_before:  # the first prompt names the session
                self._enqueue(hosted, updates.session_info_update(title))
            await self._flush(hosted)
            return {"stopReason": stop}
        finally:
            hosted.turn = None
            if request_id is not None:
                self._inflight.pop(_key(request_id), None)

    async def cancel(self, req: CancelNotification) -> None:
        hosted = self._hosted.get(req.session_id)
        if hosted is None:
            log.info("session/cancel for unknown session %s ignored", req.session_id)
            return
        await self._cancel_turn(hosted)

    async def _cancel_turn(self, hosted: _Hosted) -> None:
        if hosted.turn is None or hosted.turn.done():
            return
        hosted.cancelling = True
        await hosted.session.cancel()

    async def cancel_request(self, req: CancelRequestNotification) -> None:
        """``$/cancel_request``: stop the request with that id (ACP cancellation)."""
        action = self._inflight.get(_key(req.request_id))
        if action is None:
            log.debug("$/cancel_request for %r: nothing in flight", req.request_id)
            return
        result = action()
        if asyncio.iscoroutine(result):
            await result

    # -- slash commands -------------------------------------------------------------

    async def _slash(self, hosted: _Hosted, name: str, args: list[str]) -> str:
        session = hosted.session
        message_id = uuid.uuid4().hex
        try:
            text = await run_slash_command(
                session, self.manager().paths, name, args, usage=dict(hosted.usage)
            )
        except (ValueError, LookupError, RuntimeError) as exc:
            text = f"/{name}: {_message_of(exc)}\n"
        self._enqueue(hosted, updates.message_update(text, message_id))
        return "end_turn"

    # -- extension methods ----------------------------------------------------------

    async def ext_method(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        if name == BOARD_METHOD:
            board = BoardParams.model_validate(params)
            return self._get(board.session_id).session.board()
        if name == PROPOSE_METHOD:
            from clio_acp.session import memory_ops

            p = ProposeParams.model_validate(params)
            session = self._get(p.session_id).session
            try:
                return await memory_ops.propose_entry(
                    session,
                    self.manager().paths,
                    p.entry_id,
                    p.scope,
                    acknowledge_global=p.acknowledge_global,
                )
            except (KeyError, ValueError) as exc:
                raise RequestError.invalid_params({"details": _message_of(exc)}) from None
        raise RequestError.method_not_found("_" + name)

    async def ext_notification(self, name: str, params: dict[str, Any]) -> None:
        log.debug("extension notification _%s ignored", name)

    # -- hosting, events, permissions ----------------------------------------------

    def _get(self, session_id: str) -> _Hosted:
        hosted = self._hosted.get(session_id)
        if hosted is None:
            raise not_found(session_id)
        return hosted

    async def _call(self, fn: Callable[..., Awaitable[Any]], session_id: str) -> Any:
        try:
            return await fn(session_id)
        except Exception as exc:
            if _is_not_found(exc):
                raise not_found(session_id) from None
            raise

    async def _drop_local(self, session_id: str) -> None:
        if session_id in self._hosted:
            await self._release(session_id, cancel=True)

    def _host(self, session: Session) -> _Hosted:
        old = self._hosted.pop(session.id, None)
        if old is not None:
            if old.unsubscribe:
                old.unsubscribe()
            if old.pump:
                old.pump.cancel()
        hosted = _Hosted(session=session)
        hosted.pump = asyncio.get_running_loop().create_task(self._pump(session.id, hosted))
        hosted.unsubscribe = session.subscribe(lambda e: self._enqueue_event(hosted, e))
        with contextlib.suppress(AttributeError):
            session.set_permission_handler(lambda r: self._ask_permission(hosted, r))
        self._hosted[session.id] = hosted
        return hosted

    async def _release(self, session_id: str, *, cancel: bool) -> None:
        hosted = self._hosted.pop(session_id, None)
        if hosted is None:
            return
        if cancel and hosted.turn is not None and not hosted.turn.done():
            hosted.cancelling = True
            with contextlib.suppress(Exception):
                await hosted.session.cancel()
        if hosted.unsubscribe:
            hosted.unsubscribe()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._flush(hosted), timeout=5)
        if hosted.pump:
            hosted.pump.cancel()

    def _after_response(self, session_id: str) -> None:
        """Send ``available_commands_update`` once the current response is out."""

        def send() -> None:
            hosted = self._hosted.get(session_id)
            if hosted is not None:
                self._enqueue(hosted, updates.available_commands_update())

        if self._transport is not None:
            self._transport.after_response(CURRENT_REQUEST_ID.get(), send)
        else:
            asyncio.get_running_loop().call_soon(send)

    def _enqueue_event(self, hosted: _Hosted, event: ev.SessionEvent) -> None:
        if isinstance(event, ev.UsageUpdate):
            _add_usage(hosted.usage, event)
        try:
            for update in updates.event_to_updates(event, self._presentation):
                hosted.queue.put_nowait(update)
        except Exception:
            log.exception("could not translate %s", type(event).__name__)

    def _enqueue(self, hosted: _Hosted, update: dict[str, Any]) -> None:
        hosted.queue.put_nowait(update)

    async def _flush(self, hosted: _Hosted) -> None:
        """Wait until every queued update of ``hosted`` has been written."""
        await hosted.queue.join()

    async def _pump(self, session_id: str, hosted: _Hosted) -> None:
        while True:
            update = await hosted.queue.get()
            try:
                if update is not None:
                    await self.conn.send_notification(
                        "session/update", {"sessionId": session_id, "update": update}
                    )
            except ConnectionError:
                log.debug("session/update after the connection closed dropped")
            except Exception:
                log.exception("session/update failed")
            finally:
                hosted.queue.task_done()

    async def _ask_permission(self, hosted: _Hosted, request: Any) -> Any:
        """``session/request_permission`` for one tool call (issue 7 item 6)."""
        from clio_acp.agent.permissions import PermissionDecision

        await self._flush(hosted)  # the tool_call update precedes the question
        tool_call: dict[str, Any] = {
            "toolCallId": request.tool_call_id,
            "title": request.title,
            "kind": request.kind,
            "status": "pending",
        }
        if request.arguments:
            tool_call["rawInput"] = request.arguments
        if request.locations:
            tool_call["locations"] = [{"path": p} for p in request.locations]
        params = {
            "sessionId": hosted.session.id,
            "toolCall": tool_call,
            "options": [
                {"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in request.options
            ],
        }
        raw = await self.conn.send_request("session/request_permission", params)
        try:
            outcome = RequestPermissionResponse.model_validate(raw).outcome
        except ValidationError:
            log.warning("malformed session/request_permission answer: %r", raw)
            return PermissionDecision(outcome="reject_once")
        if outcome.outcome == "cancelled":
            hosted.cancelling = True
            return PermissionDecision(outcome="cancelled")
        chosen = getattr(outcome, "option_id", None)
        valid = {o.option_id for o in request.options}
        if chosen not in valid:
            log.warning("permission answer names unknown option %r; rejecting", chosen)
            return PermissionDecision(outcome="reject_once")
        return PermissionDecision(outcome=chosen)

    # -- router glue ----------------------------------------------------------------

    def track(self, func: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """Make a request handler cancellable by ``$/cancel_request`` (→ ``-32800``)."""

        async def run(params: Any) -> Any:
            request_id = CURRENT_REQUEST_ID.get()
            task = asyncio.current_task()
            cancelled = False

            def cancel() -> None:
                nonlocal cancelled
                if task is not None and not task.done():
                    cancelled = True
                    task.cancel()

            key = _key(request_id) if request_id is not None else None
            if key is not None:
                self._inflight.setdefault(key, cancel)
            if task is not None:
                self._running.add(task)
            try:
                return await func(params)
            except asyncio.CancelledError:
                if not cancelled:
                    raise
                _uncancel()
                raise RequestError(REQUEST_CANCELLED, "Request cancelled", None) from None
            finally:
                if task is not None:
                    self._running.discard(task)
                if key is not None and self._inflight.get(key) is cancel:
                    self._inflight.pop(key, None)

        return run


def _add_usage(totals: dict[str, int], event: ev.UsageUpdate) -> None:
    totals["requests"] = totals.get("requests", 0) + 1
    totals["inputTokens"] = totals.get("inputTokens", 0) + event.input_tokens
    totals["outputTokens"] = totals.get("outputTokens", 0) + event.output_tokens
    totals["cachedTokens"] = totals.get("cachedTokens", 0) + event.cached_tokens
    if event.context_used is not None:
        totals["contextUsed"] = event.context_used
    if event.context_size is not None:
        totals["contextSize"] = event.context_size


def _message_of(exc: BaseException) -> str:
    # KeyError's str() is the repr of its argument; show the plain message.
    if isinstance(exc, KeyError) and type(exc).__str__ is KeyError.__str__ and exc.args:
        return str(exc.args[0])
    return str(exc)


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()


def _key(request_id: Any) -> Any:
    return (type(request_id).__name__, request_id)


def _is_not_found(exc: BaseException) -> bool:
    try:
        from clio_acp.session.manager import SessionNotFound
    except ImportError:  # pragma: no cover - the core always ships it
        return False
    return isinstance(exc, SessionNotFound)


def prompt_text(blocks: list[Any]) -> str:
    """The user's prompt as text: text blocks, embedded text resources (fenced with
    their URI) and resource links (as ``@uri``), in order.

    Attached content is not the user's typing: it is neutralised (MEMORY_SPEC §13.8,
    ``clio_acp.advisory``) and fenced with more backticks than it holds, so a file
    can neither close its fence nor pass for a ``Memory:`` line or a
    ``<system-reminder>`` block."""
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"@{_one_line_uri(block.uri)}")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            uri = _one_line_uri(res.uri)
            if text is not None:
                body = neutralize_untrusted(text)
                fence = fence_for(body + uri)
                parts.append(f"\n{fence}{uri}\n{body}\n{fence}\n")
            else:
                parts.append(f"@{uri}")
    return "\n".join(p for p in parts if p)


def _one_line_uri(uri: Any) -> str:
    return neutralize_untrusted(" ".join(str(uri).split()))


_SLASH = re.compile(r"^\s*/([a-z][a-z0-9_-]*)\b(.*)$", re.S)


def parse_slash(text: str) -> tuple[str, list[str]] | None:
    """``("memory", ["approve", "r1"])`` for ``/memory approve r1``; ``None`` when the
    prompt is not one of our slash commands (unknown ones go to the model)."""
    match = _SLASH.match(text)
    if match is None:
        return None
    name = match.group(1)
    if name not in {c.name for c in updates.SLASH_COMMANDS}:
        return None
    try:
        args = shlex.split(match.group(2))
    except ValueError:
        args = match.group(2).split()
    return name, args


async def run_slash_command(
    session: Any, paths: Any, name: str, args: list[str], *, usage: dict[str, int] | None = None
) -> str:
    """Run one of our slash commands against ``session``; the text to show.

    Raises ``ValueError`` / ``KeyError`` for bad usage or unknown ids (the message is
    shown to the user; the session goes on).
    """
    from clio_acp.acp.render import render_board, render_usage
    from clio_acp.session import memory_ops

    if name == "memory":
        if not args:
            board = dict(session.board())
            try:
                board["proposals"] = await memory_ops.pending_proposals(paths)
            except Exception as exc:  # a corrupt records.json is shown, not fatal
                board["proposals"] = [{"id": "?", "scope": "?", "content": f"unreadable: {exc}"}]
            return render_board(board)
        verb, rest = args[0], args[1:]
        if verb == "seed":
            return render_seed(await session.seed())
        if verb in ("approve", "reject"):
            if len(rest) != 1:
                raise ValueError(f"usage: /memory {verb} RECORD_ID")
            op = memory_ops.approve_record if verb == "approve" else memory_ops.reject_record
            record_id = await op(paths, rest[0])
            return f"{'Approved' if verb == 'approve' else 'Rejected'} {record_id}.\n"
        if verb == "promote":
            ack = rest[2:] == ["ack"]
            if (
                len(rest) not in (2, 3)
                or rest[1] not in ("repo", "global")
                or (len(rest) == 3 and not ack)
            ):
                raise ValueError("usage: /memory promote ENTRY_ID repo|global [ack]")
            result = await memory_ops.propose_entry(
                session, paths, rest[0], rest[1], acknowledge_global=ack
            )
            if result["status"] == "needs_acknowledgement":
                return (
                    "Global scope applies to every repository: repeat with "
                    f"`/memory promote {rest[0]} global ack` to confirm.\n"
                )
            return (
                f"Proposed {result['recordId']} ({rest[1]}, unapproved). "
                f"Approve with /memory approve {result['recordId']}.\n"
            )
        raise ValueError(
            f"unknown verb {verb!r}; use seed, approve ID, reject ID or promote ENTRY repo|global"
        )
    if name == "usage":
        return render_usage(session.board(), usage or {})
    if name == "handoff":
        path = await session.handoff()
        return f"Handoff written: {path}\n"
    if name == "compact":
        await session.compact()
        return "Compaction done.\n"
    raise ValueError(f"unknown command /{name}")


def render_seed(result: Any) -> str:
    if isinstance(result, dict):
        count = result.get("count", result.get("seeded"))
        source = result.get("source")
        if count is not None:
            text = f"Seeded {count} entries" + (f" from {source}" if source else "") + ".\n"
            for why in result.get("rejected") or []:
                text += f"Left out (invalid): {why}\n"
            return text
    return f"Seeded: {result}\n"


def build_router(agent: ClioAcpAgent) -> MessageRouter:
    """Our method table on the SDK's router: unknown methods are ``-32601``."""
    router = MessageRouter()

    def request(method: str, model: type[BaseModel] | None, func: Callable[..., Any]) -> None:
        async def handle(params: Any) -> Any:
            payload = params if params is not None else {}
            if model is None:
                if not isinstance(payload, dict):
                    raise RequestError.invalid_params({"details": "params must be an object"})
                return await func(payload)
            return await func(model.model_validate(payload))

        router.add_route(Route(method=method, func=agent.track(handle), kind="request"))

    def notification(method: str, model: type[BaseModel], func: Callable[..., Any]) -> None:
        async def handle(params: Any) -> Any:
            try:
                return await func(model.model_validate(params if params is not None else {}))
            except ValidationError as exc:
                log.warning("ignoring malformed %s: %s", method, exc)

        router.add_route(Route(method=method, func=handle, kind="notification"))

    async def initialize(params: Any) -> Any:
        raw = params if isinstance(params, dict) else {}
        return await agent.initialize(InitializeRequest.model_validate(raw), raw)

    router.add_route(Route(method="initialize", func=agent.track(initialize), kind="request"))
    request("authenticate", AuthenticateRequest, agent.authenticate)
    request("logout", LogoutRequest, agent.logout)
    request("session/new", NewSessionRequest, agent.new_session)
    request("session/load", LoadSessionRequest, agent.load_session)
    request("session/resume", ResumeSessionRequest, agent.resume_session)
    request("session/fork", ForkSessionRequest, agent.fork_session)
    request("session/list", ListSessionsRequest, agent.list_sessions)
    request("session/close", CloseSessionRequest, agent.close_session)
    request("session/delete", DeleteSessionRequest, agent.delete_session)
    request("session/set_mode", SetSessionModeRequest, agent.set_session_mode)
    request("session/set_config_option", None, agent.set_config_option)
    request("session/prompt", PromptRequest, agent.prompt)
    notification("session/cancel", CancelNotification, agent.cancel)
    notification("$/cancel_request", CancelRequestNotification, agent.cancel_request)
    router.handle_extension_request(agent.ext_method)
    router.handle_extension_notification(agent.ext_notification)
    return router
