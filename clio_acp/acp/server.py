"""The ACP agent's method table: reading this file tells you what it serves.

ACP v1 (``agent-client-protocol==0.12.1``, schema 1.19.0). :class:`ClioAcpAgent` has
one small method per ACP method; each parses its params (the SDK's schema models)
and delegates: sessions to ``clio_acp.session`` (``SessionManager``), the session's
verbs to ``clio_acp.session.commands``, per-session state to ``hosting``, options to
``config_options``, slash commands to ``slash``, request cancellation to
``requests``. :func:`build_router` maps each method onto it with the SDK's
``MessageRouter``, so a method we do not serve is ``-32601``; the class is
deliberately not a subclass of the SDK's ``Agent`` protocol (whose defaults turn
unimplemented methods into fake successes). Process plumbing is in ``stdio.py``.

Sessions: ``session/new`` answers first and sends ``available_commands_update`` only
after its response; ``session/load`` replays the whole history as ``session/update``
before responding; ``session/resume`` never replays; ``session/close`` cancels then
frees; ``session/delete`` is idempotent; an unknown session is ``-32002``. The bank
reset on every session change (MEMORY_SPEC §10) is the manager's job.

Turns: one at a time per session; ``session/cancel`` (or ``$/cancel_request`` on the
prompt) cancels the model stream and any running command through ``Session.cancel``,
flushes pending updates, and the prompt answers ``stopReason: "cancelled"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
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
    ResumeSessionRequest,
    SetSessionModeRequest,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clio_acp import __version__
from clio_acp import session as core  # names resolve on first use: a fast initialize
from clio_acp.acp import config_options as co
from clio_acp.acp import updates
from clio_acp.acp.errors import (
    REQUEST_CANCELLED,
    absolute,
    invalid_params,
    message_of,
    not_found,
    storage_unavailable,
)
from clio_acp.acp.hosting import ClientTools, Hosted, Hosting, cancel_turn, run_turn
from clio_acp.acp.requests import RequestTracker, uncancel_current
from clio_acp.acp.slash import parse_slash, prompt_text, run_slash_command
from clio_acp.acp.transport import LineTransport
from clio_acp.settings import settings_error_notice

if TYPE_CHECKING:
    from clio_acp.session import SessionManager

__all__ = ["REQUEST_CANCELLED", "ClioAcpAgent", "build_router"]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
"""ACP v1: the only version we speak (``acp.meta.PROTOCOL_VERSION``)."""

CANCEL_WIND_DOWN_S = 30.0
"""How long a prompt sent right after ``session/cancel`` waits for the cancelled turn
to answer before it is refused as concurrent, seconds."""

BOARD_METHOD = "clio/session/board"
PROPOSE_METHOD = "clio/memory/propose"
"""MEMORY_SPEC §10 (ACP) with the ``_clio/`` prefix of §12 (names without the leading
underscore: the SDK router strips it before calling ``ext_method``)."""


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
    """``_clio/session/board`` params."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")
    session_id: str = Field(alias="sessionId")


def agent_capabilities() -> dict[str, Any]:
    """``initialize`` ``agentCapabilities``: what works, honestly."""
    return {
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
    }


def client_tools(req: InitializeRequest) -> ClientTools:
    """The client's ``fs``/``terminal`` capabilities from ``initialize``."""
    caps = req.client_capabilities
    fs = caps.fs if caps is not None and caps.fs is not None else None
    return ClientTools(
        read_text_file=bool(fs and fs.read_text_file),
        write_text_file=bool(fs and fs.write_text_file),
        terminal=bool(caps and caps.terminal),
    )


class ClioAcpAgent:
    """Serves ACP methods for one client connection (one process).

    ``manager_factory(host_factory=…)`` is called once, on the first session method,
    so ``initialize`` does not pay for opening the journal. ``settings`` is the
    settings store (a callable returning ``Settings``, with ``set_overrides``)."""

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
        self.hosting = Hosting()
        self.requests = RequestTracker()
        self._tools: ClientTools | None = None
        self._overrides = co.SettingsOverrides(settings)
        self._settings_told: dict[str, str] = {}
        """Per session id: the settings problem it was told about."""
        now = self._file_settings()
        self._llm_memory_target = now.context.memory.target if now is not None else None

    # -- wiring ---------------------------------------------------------------------

    def attach(self, conn: Connection, transport: LineTransport | None) -> None:
        """Use ``conn`` for notifications and requests to the client."""
        self._conn = conn
        self.hosting.conn = conn
        self.hosting.transport = transport

    @property
    def conn(self) -> Connection:
        """The SDK connection to the client (``attach`` first)."""
        assert self._conn is not None, "attach() first"
        return self._conn

    def manager(self) -> SessionManager:
        """The session manager (made on first use, with the client's tool host)."""
        if self._manager is None:
            self._manager = self._manager_factory(host_factory=self._host_factory())
        return self._manager

    def _host_factory(self) -> Callable[..., Any] | None:
        tools = self._tools
        if tools is None or not tools.any:
            return None
        from clio_acp.acp.host import AcpToolHost

        conn = self.conn
        return lambda session_id, *args, **kwargs: AcpToolHost(conn, session_id, tools)

    async def drain(self, grace_s: float) -> None:
        """End of input: let requests already received finish (at most ``grace_s`` s)."""
        await self.requests.drain(grace_s)

    async def aclose(self) -> None:
        """Release every hosted session (cancelling turns) and close the manager."""
        for sid in self.hosting.ids():
            with contextlib.suppress(Exception):
                await self.hosting.release(sid, cancel=True)
        if self._manager is not None:
            with contextlib.suppress(Exception):
                await self._manager.aclose()

    # -- initialize / auth ----------------------------------------------------------

    async def initialize(self, req: InitializeRequest, raw: dict[str, Any]) -> dict[str, Any]:
        """ACP ``initialize``: protocol version 1, what works, ``agentInfo``."""
        self._tools = client_tools(req)
        extras = _InitializeExtras.model_validate(raw)
        session_caps = extras.client_capabilities.session if extras.client_capabilities else None
        notices = bool(session_caps is not None and session_caps.notices is not None)
        self.hosting.presentation = updates.Presentation(notices=notices)
        info = req.client_info
        log.info(
            "initialize from %s %s (protocol %s, tools %s, notices %s)",
            info.name if info else "?",
            info.version if info else "?",
            req.protocol_version,
            self._tools,
            notices,
        )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": agent_capabilities(),
            "authMethods": [],
            "agentInfo": {"name": "clio-acp", "title": "Clio", "version": __version__},
        }

    async def authenticate(self, req: AuthenticateRequest) -> dict[str, Any]:
        """ACP ``authenticate``: we advertise no auth methods, so any id is unknown."""
        raise invalid_params(f"unknown auth method {req.method_id!r}; clio-acp needs no login")

    async def logout(self, req: LogoutRequest) -> dict[str, Any]:
        """ACP ``logout``: nothing to forget (no credentials are held); always succeeds."""
        return {}

    # -- session lifecycle ----------------------------------------------------------

    async def new_session(self, req: NewSessionRequest) -> dict[str, Any]:
        """ACP ``session/new``: ``{sessionId, modes, configOptions}``."""
        cwd = absolute(req.cwd)
        roots = [absolute(p, "additionalDirectories") for p in req.additional_directories or []]
        session = await self.manager().new_session(cwd, extra_roots=roots)
        await self.hosting.attach_mcp(self.hosting.host(session), req.mcp_servers)
        self.hosting.after_response(session.id, self._tell_settings_problem)
        return {"sessionId": session.id, **self._session_state(session)}

    def _tell_settings_problem(self, hosted: Hosted) -> None:
        """Queue a visible notice when the settings file is unusable (once per session
        and problem; issue 20 item 5). The session runs on the last good settings."""
        error = getattr(self._settings, "error", None)
        session_id = hosted.session.id
        if error is None:
            self._settings_told.pop(session_id, None)
            return
        if self._settings_told.get(session_id) == str(error):
            return
        self._settings_told[session_id] = str(error)
        text = settings_error_notice(error)
        for update in updates.notice_updates(session_id, "error", text, self.hosting.presentation):
            hosted.enqueue(update)

    async def load_session(self, req: LoadSessionRequest) -> dict[str, Any]:
        """ACP ``session/load``: replay the history as ``session/update``, then answer."""
        absolute(req.cwd)
        await self.hosting.release(req.session_id, cancel=True)
        session, history = await self._call(self.manager().load_session, req.session_id)
        hosted = self.hosting.host(session)
        await self.hosting.attach_mcp(hosted, req.mcp_servers)
        for event in history:
            self.hosting.enqueue_event(hosted, event)
        await hosted.flush()
        self.hosting.after_response(session.id)
        return self._session_state(session)

    async def resume_session(self, req: ResumeSessionRequest) -> dict[str, Any]:
        """ACP ``session/resume``: reopen without replay (the current one: no change)."""
        absolute(req.cwd)
        hosted = self.hosting.find(req.session_id)
        if hosted is not None:
            session = hosted.session
        else:
            session = await self._call(self.manager().resume_session, req.session_id)
            await self.hosting.attach_mcp(self.hosting.host(session), req.mcp_servers)
        self.hosting.after_response(session.id)
        return self._session_state(session)

    async def fork_session(self, req: ForkSessionRequest) -> dict[str, Any]:
        """ACP ``session/fork``: a new session with a copy of the history."""
        absolute(req.cwd)
        session = await self._call(self.manager().fork_session, req.session_id)
        self.hosting.host(session)
        self.hosting.after_response(session.id)
        return {"sessionId": session.id, **self._session_state(session)}

    async def list_sessions(self, req: ListSessionsRequest) -> dict[str, Any]:
        """ACP ``session/list``: ``{sessions: [{sessionId, cwd, title?, updatedAt?}],
        nextCursor?}``; a cursor we did not issue is ``-32602``."""
        cwd = absolute(req.cwd) if req.cwd else None
        try:
            infos, cursor = await self.manager().list_sessions(cwd=cwd, cursor=req.cursor)
        except ValueError as exc:
            raise invalid_params(str(exc)) from None
        result: dict[str, Any] = {"sessions": [_listed(info) for info in infos]}
        if cursor:
            result["nextCursor"] = cursor
        return result

    async def close_session(self, req: CloseSessionRequest) -> dict[str, Any]:
        """ACP ``session/close``: cancel any running turn, then free the session."""
        if req.session_id not in self.hosting:
            raise not_found(req.session_id)
        await self.hosting.release(req.session_id, cancel=True)
        await self._call(self.manager().close_session, req.session_id)
        return {}

    async def delete_session(self, req: DeleteSessionRequest) -> dict[str, Any]:
        """ACP ``session/delete``: deleting an unknown or deleted session succeeds."""
        await self.hosting.release(req.session_id, cancel=True)
        await self.manager().delete_session(req.session_id)
        return {}

    # -- modes and config options ---------------------------------------------------

    async def set_session_mode(self, req: SetSessionModeRequest) -> dict[str, Any]:
        """ACP ``session/set_mode`` (legacy modes = our permission modes)."""
        hosted = self.hosting.get(req.session_id)
        co.set_mode(hosted.session, req.mode_id)
        hosted.enqueue(updates.config_option_update(self._options(hosted.session)))
        return {}

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        """ACP ``session/set_config_option``: ``{configOptions}`` after the change."""
        p = co.SetConfigOptionParams.parse(params)
        hosted = self.hosting.get(p.session_id)
        choices = self._choices()
        if p.config_id == co.CONFIG_MODE:
            co.set_mode(hosted.session, p.value)
            hosted.enqueue(updates.current_mode_update(hosted.session.mode))
        elif p.config_id == co.CONFIG_MODEL and choices.models:
            co.set_model(hosted.session, p.value, choices)
        elif p.config_id == co.CONFIG_MEMORY and self._settings is not None:
            self._overrides.set_memory_tier(p.value, choices)
        else:
            raise invalid_params(f"unknown config option {p.config_id!r}")
        return {"configOptions": self._options(hosted.session)}

    # -- prompt turn ----------------------------------------------------------------

    async def prompt(self, req: PromptRequest) -> dict[str, Any]:
        """ACP ``session/prompt``: one turn (or one slash command); ``{stopReason}``."""
        hosted = self.hosting.get(req.session_id)
        if hosted.turn_running and hosted.cancelling:  # session/cancel then prompt: queue
            await hosted.wait_turn(CANCEL_WIND_DOWN_S)
        if hosted.turn_running:
            raise RequestError.invalid_request(
                {"details": "a prompt turn is already running in this session"}
            )
        text = prompt_text(req.prompt)
        self._tell_settings_problem(hosted)
        title_before = hosted.session.title
        hosted.turn = asyncio.current_task()
        hosted.cancelling = False
        forget = self.requests.on_cancel(lambda: cancel_turn(hosted))
        try:
            command = parse_slash(text)
            if command is not None:
                stop = await self._slash(hosted, *command)
            else:
                stop = await run_turn(hosted, text)
            if hosted.cancelling:
                stop = "cancelled"
            title = hosted.session.title
            if title and title != title_before:  # the first prompt names the session
                hosted.enqueue(updates.session_info_update(title))
            await hosted.flush()
            return {"stopReason": stop}
        finally:
            hosted.turn = None
            forget()

    async def cancel(self, req: CancelNotification) -> None:
        """ACP ``session/cancel`` (notification): the running turn ends ``cancelled``."""
        hosted = self.hosting.find(req.session_id)
        if hosted is None:
            log.info("session/cancel for unknown session %s ignored", req.session_id)
            return
        await cancel_turn(hosted)

    async def cancel_request(self, req: CancelRequestNotification) -> None:
        """``$/cancel_request``: stop the request with that id (ACP cancellation)."""
        await self.requests.cancel(req.request_id)

    async def _slash(self, hosted: Hosted, name: str, args: list[str]) -> str:
        paths = self.manager().paths
        hosted.in_command = True
        try:
            text = await run_slash_command(hosted.session, paths, name, args, usage=hosted.usage)
        except asyncio.CancelledError:
            if not hosted.cancelling:
                raise
            uncancel_current()
            return "cancelled"
        except (core.CommandError, ValueError, LookupError, RuntimeError) as exc:
            text = f"/{name}: {message_of(exc)}\n"
        finally:
            hosted.in_command = False
        hosted.enqueue(updates.message_update(text, uuid.uuid4().hex))
        return "end_turn"

    # -- extension methods ----------------------------------------------------------

    async def ext_method(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """``_clio/session/board`` (the ``/memory`` board) and ``_clio/memory/propose``
        (``commands.promote``: ``{status}`` or ``{status, recordId, created}``)."""
        if name == BOARD_METHOD:
            board = BoardParams.model_validate(params)
            return self.hosting.get(board.session_id).session.board()
        if name == PROPOSE_METHOD:
            p = ProposeParams.model_validate(params)
            session = self.hosting.get(p.session_id).session
            try:
                result = await core.commands.promote(
                    session,
                    self.manager().paths,
                    p.entry_id,
                    p.scope,
                    acknowledge_global=p.acknowledge_global,
                )
            except core.CommandError as exc:
                raise invalid_params(str(exc)) from None
            return result.to_wire()
        raise RequestError.method_not_found("_" + name)

    async def ext_notification(self, name: str, params: dict[str, Any]) -> None:
        """Extension notifications: none is served (logged and ignored)."""
        log.debug("extension notification _%s ignored", name)

    # -- helpers --------------------------------------------------------------------

    async def _call(self, fn: Callable[..., Awaitable[Any]], session_id: str) -> Any:
        try:
            return await fn(session_id)
        except core.SessionNotFound:
            raise not_found(session_id) from None

    def _file_settings(self) -> Any:
        if self._settings is None:
            return None
        try:
            return self._settings()
        except Exception:
            return None

    def _choices(self) -> co.ConfigChoices:
        return co.ConfigChoices.from_settings(self._file_settings(), self._llm_memory_target)

    def _options(self, session: Any) -> list[dict[str, Any]]:
        return co.config_options(session, self._choices())

    def _session_state(self, session: Any) -> dict[str, Any]:
        return co.session_state(session, self._choices())


def _listed(info: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"sessionId": info.session_id, "cwd": str(info.cwd)}
    if info.title:
        item["title"] = info.title
    if info.updated_at:
        item["updatedAt"] = str(info.updated_at)
    return item


def validated(model: type[BaseModel], payload: Any) -> Any:
    """``payload`` as ``model``; ``-32602`` naming each bad field (``cwd: Field
    required``) when it does not fit (ACP: invalid params)."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()
        )
        raise invalid_params(problems) from None


def build_router(agent: ClioAcpAgent) -> MessageRouter:
    """Our method table on the SDK's router: unknown methods are ``-32601``."""
    router = MessageRouter()
    track = agent.requests.track

    def request(method: str, model: type[BaseModel] | None, func: Callable[..., Any]) -> None:
        async def handle(params: Any) -> Any:
            payload = params if params is not None else {}
            try:
                if model is None:
                    if not isinstance(payload, dict):
                        raise invalid_params("params must be an object")
                    return await func(payload)
                return await func(validated(model, payload))
            except core.JournalUnavailable as exc:
                raise storage_unavailable(exc.reason, str(exc)) from None

        router.add_route(Route(method=method, func=track(handle), kind="request"))

    def notification(method: str, model: type[BaseModel], func: Callable[..., Any]) -> None:
        async def handle(params: Any) -> Any:
            try:
                return await func(model.model_validate(params if params is not None else {}))
            except ValidationError as exc:
                log.warning("ignoring malformed %s: %s", method, exc)

        router.add_route(Route(method=method, func=handle, kind="notification"))

    async def initialize(params: Any) -> Any:
        raw = params if isinstance(params, dict) else {}
        caps = raw.get("clientCapabilities")
        if caps is not None and not isinstance(caps, dict):  # the SDK model lets it through
            raise invalid_params("clientCapabilities: must be an object")
        return await agent.initialize(validated(InitializeRequest, raw), raw)

    router.add_route(Route(method="initialize", func=track(initialize), kind="request"))
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
