"""``clio-acp lsp``: the language server. Reading this file tells you what it offers.

The server object is made once (``SERVER``); every LSP method, notification and
``workspace/executeCommand`` command below is one small function that parses its
arguments and delegates to ``SessionFace`` (session state and event translation),
``translate`` (pure LSP shapes) or ``options``. Lifecycle rules (cancellation,
shutdown, exit, editor death, error hygiene) live in ``protocol.py``; process plumbing
in ``stdio.py``. Protocol translation only: no agent or memory logic here.

Commands (arguments are one JSON object, or a bare string for the obvious field):
``clio.prompt``, ``clio.cancel``, ``clio.session.new|load|list|fork|close``,
``clio.memory.show|approve|reject|promote|proposeEvent|seed``, ``clio.handoff``,
``clio.usage``, ``clio.workspace``.
Notifications: ``clio/sessionUpdate`` (server→client, one session event),
``clio/sessionChanged`` (client→server). See ``docs/editors/lsp.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from clio_acp import __version__
from clio_acp.lsp import translate
from clio_acp.lsp.diagnostics import DiagnosticsStore
from clio_acp.lsp.protocol import ClioLanguageServerProtocol, scrub_paths

# Answering ``initialize`` needs none of the core: the session face, the editor options
# (pydantic), the settings, the paths and the session's verbs are imported on first use
# (issue 18; ``tests/lsp/test_startup_imports.py`` pins it).
if TYPE_CHECKING:
    from pydantic import BaseModel

    from clio_acp.lsp.options import InitializationOptions
    from clio_acp.lsp.session_face import SessionFace
    from clio_acp.paths import Paths
    from clio_acp.session import MemoryProposal
    from clio_acp.settings import Settings, SettingsStore

logger = logging.getLogger(__name__)

M = TypeVar("M", bound="BaseModel")
F = TypeVar("F", bound=Callable[..., Any])


class _Verbs:
    """``clio_acp.session.commands``, imported when a command first calls a verb."""

    def __getattr__(self, name: str) -> Any:
        from clio_acp.session import commands as verbs

        return getattr(verbs, name)


commands = _Verbs()


class ClioLanguageServer(LanguageServer):
    """The pygls server plus the face's state: options, diagnostics, the session face."""

    def __init__(self) -> None:
        super().__init__(
            name="clio-acp",
            version=__version__,
            protocol_cls=ClioLanguageServerProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.None_,
        )
        self.protocol: ClioLanguageServerProtocol
        self._options: InitializationOptions | None = None
        self._raw_options: Any = None
        self._paths: Paths | None = None
        self.workspace_root = Path.cwd()
        self.diagnostics = DiagnosticsStore(self._publish_diagnostics)
        self._face: SessionFace | None = None
        self._settings_cache: tuple[tuple[int, int, int] | None, Settings] | None = None
        self._settings_store: SettingsStore | None = None
        self._settings_error_shown: str | None = None
        self.configured = asyncio.Event()
        """Set once the initial ``workspace/configuration`` pull is done (or skipped) and
        the pending proposals are loaded; commands wait for it so the first one already
        sees the editor's settings and the store's proposals."""

    # -- state built on first use (answering ``initialize`` needs none of it) -----------

    @property
    def options(self) -> InitializationOptions:
        """The editor's options. Those ``initialize`` received are validated on first
        use (their problem, if any, is shown then): ``initialized`` uses them at once."""
        if self._options is None:
            raw, self._raw_options = self._raw_options, None
            self._apply_options(raw, base=None)
        assert self._options is not None
        return self._options

    @options.setter
    def options(self, value: InitializationOptions) -> None:
        """Replace the options (already validated)."""
        self._options = value

    @property
    def paths(self) -> Paths:
        """Where data, state, config and cache live (``resolve_paths``)."""
        if self._paths is None:
            from clio_acp.paths import resolve_paths

            self._paths = resolve_paths()
        return self._paths

    @property
    def face(self) -> SessionFace:
        """This window's session face (sessions, turns, features)."""
        if self._face is None:
            from clio_acp.lsp.session_face import SessionFace

            self._face = SessionFace(self)
        return self._face

    # -- helpers the features use ------------------------------------------------------

    def settings_reader(self) -> Settings:
        """The settings (``open_settings``: ``$CLIO_ACP_SETTINGS`` or the config
        folder's file, then environment overrides), re-read when the file changes
        (its inode, size or mtime in ns: two writes within one timestamp tick differ in
        size, an editor's save-by-rename in inode); a broken file keeps the last good
        settings (or the defaults)."""
        from clio_acp.settings import open_settings

        if self._settings_store is None:
            self._settings_store = open_settings(self.paths.config)
        store = self._settings_store
        try:
            info = store.path.stat()
            version: tuple[int, int, int] | None = (info.st_ino, info.st_size, info.st_mtime_ns)
        except OSError:
            version = None
        if self._settings_cache is None or self._settings_cache[0] != version:
            if self._settings_cache is not None:
                store.reload()
            if store.error is not None:
                logger.warning("Settings are invalid, keeping the last good ones: %s", store.error)
            self._settings_cache = (version, store())
        self._report_settings_error(store.error)
        return self._settings_cache[1]

    def _report_settings_error(self, error: Exception | None) -> None:
        """``window/showMessage`` (Error) once per distinct settings problem."""
        text = None if error is None else str(error)
        if text is not None and text != self._settings_error_shown:
            from clio_acp.settings import settings_error_notice

            self.show_message(settings_error_notice(error), types.MessageType.Error)
        self._settings_error_shown = text

    def client_supports(self, dotted: str) -> bool:
        """Whether the client declared capability ``dotted`` (snake_case path)."""
        try:
            return bool(get_capability(self.client_capabilities, dotted, False))
        except Exception:
            return False

    def show_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """``window/showMessage`` with ``message`` (type ``kind``)."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def apply_options(self, raw: Any, *, base: InitializationOptions | None) -> None:
        """Use the editor options ``raw`` (over ``base``); a problem is shown as a warning
        and defaults are used. Without ``base`` (``initialize``) they are validated on
        first use of ``options``."""
        if base is None:
            self._options, self._raw_options = None, raw
            return
        self._apply_options(raw, base=base)

    def _apply_options(self, raw: Any, *, base: InitializationOptions | None) -> None:
        from clio_acp.lsp.options import parse_options

        options, problem = parse_options(raw, base=base)
        self.options = options
        if problem:
            self.show_message(problem, types.MessageType.Warning)

    def _publish_diagnostics(self, uri: str, diagnostics: list[types.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
        )

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls 2.1.1 shows "Error in server: <raw exception>" for notification
        # failures; the raw text may hold local paths, so it is scrubbed first.
        """pygls hook: log the error; for notifications show a scrubbed ``internal error``
        message. A body the reader could not handle (``source`` is
        ``JsonRpcException``: pygls' reader loop) is protocol noise: ``-32700`` with
        ``id: null`` when it is not JSON, a log line otherwise, never a popup."""
        if source is JsonRpcException:
            self.protocol.report_unreadable(error)
            return
        logger.error("Server error (%s): %s", getattr(source, "__name__", source), error)
        if source is not None and "Request" in getattr(source, "__name__", ""):
            return
        try:
            self.show_message(
                scrub_paths(f"clio: internal error ({type(error).__name__})"),
                types.MessageType.Error,
            )
        except Exception:
            logger.debug("Could not report the error to the client")

    async def pull_configuration(self) -> None:
        """``workspace/configuration`` for section ``clio``, only when the client
        declares ``workspace.configuration`` (LSP 3.17)."""
        from clio_acp.lsp.options import CONFIG_SECTION

        if not self.client_supports("workspace.configuration"):
            return
        try:
            result = await self.protocol.request(
                types.WORKSPACE_CONFIGURATION,
                types.ConfigurationParams(items=[types.ConfigurationItem(section=CONFIG_SECTION)]),
                timeout_s=10,
            )
        except Exception as exc:
            logger.info("workspace/configuration failed: %s", exc)
            return
        if isinstance(result, list | tuple) and result and result[0] is not None:
            self.apply_options(_plain(result[0]), base=self.options)

    async def aclose(self) -> None:
        """Process end: stop turns and close the session manager (nothing more is sent)."""
        await self.face.aclose()


SERVER = ClioLanguageServer()

CONFIGURED_WAIT_S = 15.0
"""Longest a command waits for the initial configuration pull, seconds."""


def command(name: str) -> Callable[[F], F]:
    """``SERVER.command`` for an ``async (ls, *args)`` handler that first waits for the
    initial configuration (bounded by ``CONFIGURED_WAIT_S``)."""

    def decorator(handler: F) -> F:
        @functools.wraps(handler)
        async def wrapped(ls: ClioLanguageServer, *args: Any) -> Any:
            if not ls.configured.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ls.configured.wait(), CONFIGURED_WAIT_S)
            return await handler(ls, *args)

        SERVER.command(name)(wrapped)
        return handler

    return decorator


# -- argument models -----------------------------------------------------------------

# The models are pydantic classes in ``command_args``, imported by the first command
# that parses arguments (``_args``): ``initialize`` must not pay for pydantic. Here each
# is named by its class name, which ``_args`` resolves.
if TYPE_CHECKING:
    from clio_acp.lsp.command_args import (
        ListArgs,
        LoadArgs,
        NewSessionArgs,
        PromoteArgs,
        PromptArgs,
        ProposeEventArgs,
        RecordArgs,
        SessionArgs,
        ShowArgs,
        WorkspaceArgs,
    )
else:
    ListArgs = "ListArgs"
    LoadArgs = "LoadArgs"
    NewSessionArgs = "NewSessionArgs"
    PromoteArgs = "PromoteArgs"
    PromptArgs = "PromptArgs"
    ProposeEventArgs = "ProposeEventArgs"
    RecordArgs = "RecordArgs"
    SessionArgs = "SessionArgs"
    ShowArgs = "ShowArgs"
    WorkspaceArgs = "WorkspaceArgs"


def _plain(value: Any) -> Any:
    """pygls hands custom params over as namedtuples; turn them back into JSON values."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _args(model: type[M] | str, args: tuple[Any, ...], bare: str | None = None) -> M:
    """Parse command arguments: none, one object, or one bare string for ``bare``;
    ``model`` is a ``command_args`` model or its name."""
    from pydantic import ValidationError

    from clio_acp.lsp import command_args

    if isinstance(model, str):
        model = getattr(command_args, model)
    if len(args) > 1:
        raise JsonRpcInvalidParams(f"expected at most one argument, got {len(args)}")
    raw = _plain(args[0]) if args else {}
    if raw is None or raw == [] or raw == [[]]:
        raw = {}  # Neovim encodes an empty table ``{}`` as ``[]``: no arguments
    if isinstance(raw, str) and bare is not None:
        raw = {bare: raw}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'argument'}: {e['msg']}" for e in exc.errors()
        )
        raise JsonRpcInvalidParams(f"invalid arguments ({problems})") from None


async def _core(call: Any) -> Any:
    """Await a core call; its failures become ``RequestFailed`` with a clean message."""
    from clio_acp.lsp.session_face import FaceError
    from clio_acp.session import CommandError

    try:
        return await call
    except (JsonRpcException, asyncio.CancelledError):
        raise
    except CommandError as exc:  # the verb's own message, the same in the ACP face
        raise FaceError(str(exc)) from None
    except KeyError as exc:
        # A KeyError subclass with its own message (``SessionNotFound``: "session not
        # found: <id>") keeps it; a bare KeyError carries just the missing key.
        if type(exc).__str__ is not KeyError.__str__:
            raise FaceError(str(exc)) from None
        raise FaceError(str(exc.args[0]) if exc.args else "not found") from None
    except Exception as exc:
        logger.exception("Core call failed")
        raise FaceError(f"{type(exc).__name__}: {exc}") from None


def _prompt_text(args: PromptArgs, ls: ClioLanguageServer) -> str:
    if args.text_document is None:
        return args.text
    path = Path(to_fs_path(args.text_document.uri) or args.text_document.uri)
    with_root = path
    try:
        with_root = path.relative_to(ls.workspace_root)
    except ValueError:
        pass
    where = str(with_root)
    if args.position is not None:
        where += f":{args.position.line + 1}:{args.position.character + 1}"
    selection = args.selection
    if selection is not None and selection.start != selection.end:
        start, end = selection.start, selection.end
        where += (
            f", selection {start.line + 1}:{start.character + 1}-{end.line + 1}:{end.character + 1}"
        )
    from clio_acp.session import neutralize_untrusted

    # A path is not the user's typing (MEMORY_SPEC §13.8): one line, neutralised.
    return f"{args.text}\n\n[Active document: {neutralize_untrusted(' '.join(where.split()))}]"


def _session_info(info: Any) -> Any:
    """A ``SessionInfo`` (pydantic) as camelCase JSON."""
    from pydantic import BaseModel

    if isinstance(info, BaseModel):
        return translate.camel_keys(info.model_dump(mode="json"))
    return info


# -- lifecycle -----------------------------------------------------------------------


@SERVER.feature(types.INITIALIZE)
def initialize(ls: ClioLanguageServer, params: types.InitializeParams) -> None:
    """LSP ``initialize``: editor options and the workspace root (first folder, else
    ``rootUri``/``rootPath``)."""
    ls.apply_options(params.initialization_options, base=None)
    folders = params.workspace_folders or []
    root = folders[0].uri if folders else (params.root_uri or None)
    if root:
        ls.workspace_root = Path(to_fs_path(root) or os.getcwd())
    elif params.root_path:
        ls.workspace_root = Path(params.root_path)


@SERVER.feature(types.INITIALIZED)
async def initialized(ls: ClioLanguageServer, params: types.InitializedParams) -> None:
    """LSP ``initialized``: pull ``workspace/configuration`` (section ``clio``), then show
    pending proposals."""
    _ = ls.options  # initialize's options are validated now: a problem is shown at once
    try:
        await ls.pull_configuration()
        ls.settings_reader()  # a broken settings file is shown now, not at the first command
        # Before commands run: clio.memory.show writes the document from these proposals.
        await ls.face.proposals.refresh()
    finally:
        ls.configured.set()


@SERVER.feature(types.SHUTDOWN)
async def shutdown(ls: ClioLanguageServer, *args: Any) -> None:
    """LSP ``shutdown``: stop turns, close the session, clear memory diagnostics."""
    await ls.face.shutdown()


@SERVER.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(
    ls: ClioLanguageServer, params: types.DidChangeConfigurationParams
) -> None:
    """LSP ``workspace/didChangeConfiguration``: new options (pushed, or pulled when the
    push is empty)."""
    from clio_acp.lsp.options import CONFIG_SECTION, names_options

    settings = _plain(params.settings)
    if isinstance(settings, dict) and CONFIG_SECTION in settings:
        ls.apply_options(settings[CONFIG_SECTION], base=ls.options)
    elif names_options(settings):
        ls.apply_options(settings, base=ls.options)
    elif settings:
        # Another server's section (eglot sends every server's): not ours, no popup.
        logger.info("didChangeConfiguration without a %r section ignored", CONFIG_SECTION)
    else:
        await ls.pull_configuration()


@SERVER.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def did_change_workspace_folders(
    ls: ClioLanguageServer, params: types.DidChangeWorkspaceFoldersParams
) -> None:
    """LSP ``workspace/didChangeWorkspaceFolders``: removing the session's folder ends the
    binding (a session change)."""
    removed = [Path(to_fs_path(f.uri) or f.uri) for f in params.event.removed or []]
    session = ls.face.session
    if session is not None and any(_inside(Path(session.cwd), r) for r in removed):
        await ls.face.leave_session("its workspace folder was removed")
    if any(_inside(ls.workspace_root, r) for r in removed):
        remaining = list(ls.workspace.folders.values())
        if remaining:
            ls.workspace_root = Path(to_fs_path(remaining[0].uri) or remaining[0].uri)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@SERVER.feature(translate.SESSION_CHANGED)
async def session_changed(ls: ClioLanguageServer, params: Any) -> None:
    """``clio/sessionChanged`` ``{editorSessionId}``: a different editor session leaves
    the bound session."""
    raw = _plain(params) or {}
    editor_id = raw.get("editorSessionId") if isinstance(raw, dict) else None
    if editor_id is not None and editor_id == ls.options.editor_session_id:
        return
    ls.options = ls.options.model_copy(update={"editor_session_id": editor_id})
    await ls.face.leave_session("the editor session changed")


# -- memory as code actions ---------------------------------------------------------


@SERVER.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, translate.PROPOSALS_ACTION_KIND]
    ),
)
async def code_action(ls: ClioLanguageServer, params: types.CodeActionParams) -> list[Any]:
    """LSP ``textDocument/codeAction``: Approve/Reject quick fixes on memory diagnostics
    that name a pending proposal, and a source action listing every pending proposal
    (on the memory document, or when ``context.only`` asks for source actions)."""
    only = params.context.only
    actions: list[types.CodeAction] = []
    wants_fixes = not only or any(str(k).startswith("quickfix") for k in only)
    if wants_fixes:
        known = ls.diagnostics.get(params.text_document.uri, translate.MEMORY_SOURCE)
        seen: set[str] = set()
        for echoed in params.context.diagnostics:
            if echoed.source != translate.MEMORY_SOURCE:
                continue
            proposal_id = translate.diagnostic_proposal_id(echoed) or next(
                (
                    translate.diagnostic_proposal_id(d)
                    for d in known
                    if translate.same_diagnostic(d, echoed)
                ),
                None,
            )
            proposal = ls.face.proposals.pending.get(proposal_id or "")
            if proposal is None or proposal.record_id in seen:
                continue
            seen.add(proposal.record_id)
            actions.extend(translate.proposal_quick_fixes(proposal, echoed))
    on_document = params.text_document.uri == ls.face.document.path.as_uri()
    asked = bool(only) and any(translate.PROPOSALS_ACTION_KIND.startswith(str(k)) for k in only)
    if asked or (on_document and not only):
        pending = await _pending_proposals(ls)
        if pending:
            actions.append(translate.proposals_source_action(pending))
    return actions


async def _pending_proposals(ls: ClioLanguageServer) -> list[MemoryProposal]:
    """Every pending proposal: unapproved, unrejected durable records (re-read when
    records.json changed)."""
    await ls.face.proposals.refresh(only_if_changed=True)
    return list(ls.face.proposals.pending.values())


# -- commands: turns -------------------------------------------------------------------


@command("clio.prompt")
async def prompt(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.prompt`` ``{text, sessionId?, textDocument?, position?}`` (or a bare text):
    one turn; ``{sessionId, stopReason}``."""
    parsed = _args(PromptArgs, args, bare="text")
    return await _core(ls.face.prompt(_prompt_text(parsed, ls), parsed.session_id))


@command("clio.cancel")
async def cancel(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.cancel`` ``{sessionId?}``: cancel the running turn; ``{cancelled: bool}``."""
    parsed = _args(SessionArgs, args, bare="sessionId")
    return {"cancelled": await ls.face.cancel(parsed.session_id)}


# -- commands: sessions (each one is a session change: the bank is cleared) -------------


@command("clio.session.new")
async def session_new(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.session.new`` ``{cwd?, mode?}``: a new session (a session change);
    ``{sessionId}``."""
    parsed = _args(NewSessionArgs, args, bare="cwd")
    cwd = Path(parsed.cwd) if parsed.cwd else ls.workspace_root
    mode = parsed.mode or ls.options.permission_mode
    session = await _core(ls.face.change_session(lambda m: m.new_session(cwd, mode=mode)))
    return {"sessionId": session.id}


@command("clio.session.load")
async def session_load(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.session.load`` ``{sessionId}``: load with history replay as
    ``clio/sessionUpdate``; ``{sessionId, events}``."""
    parsed = _args(LoadArgs, args, bare="sessionId")
    history: list[Any] = []

    async def load(manager: Any) -> Any:
        session, events = await manager.load_session(parsed.session_id)
        history.extend(events)
        return session

    session = await _core(ls.face.change_session(load))
    ls.face.replay(history)
    return {"sessionId": session.id, "events": len(history)}


@command("clio.session.list")
async def session_list(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.session.list`` ``{cwd?, cursor?, limit?}``: ``{sessions: [SessionInfo],
    nextCursor}``."""
    parsed = _args(ListArgs, args, bare="cwd")
    manager = ls.face.ensure_manager()
    cwd = Path(parsed.cwd) if parsed.cwd else None
    infos, next_cursor = await _core(
        manager.list_sessions(cwd=cwd, cursor=parsed.cursor, limit=parsed.limit)
    )
    return {"sessions": [_session_info(i) for i in infos], "nextCursor": next_cursor}


@command("clio.session.fork")
async def session_fork(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.session.fork`` ``{sessionId?}``: fork the given (else the bound) session;
    ``{sessionId, forkedFrom}``."""
    parsed = _args(SessionArgs, args, bare="sessionId")
    source = parsed.session_id or ls.face.require_session().id
    session = await _core(ls.face.change_session(lambda m: m.fork_session(source)))
    return {"sessionId": session.id, "forkedFrom": source}


@command("clio.session.close")
async def session_close(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.session.close`` ``{sessionId?}``: leave and close the bound session;
    ``{sessionId, closed}``."""
    parsed = _args(SessionArgs, args, bare="sessionId")
    session = ls.face.require_session(parsed.session_id)
    await ls.face.leave_session("closed by the user")
    return {"sessionId": session.id, "closed": True}


# -- commands: memory ------------------------------------------------------------------


@command("clio.memory.show")
async def memory_show(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.memory.show``: write the memory document; ``{sessionId, board, proposals:
    [{recordId, scope, content}], document}``."""
    ls.face.document.arm()
    _args(ShowArgs, args)
    await ls.face.document.write_now()
    pending = await _pending_proposals(ls)
    return {
        "sessionId": ls.face.session.id if ls.face.session is not None else None,
        "board": ls.face.board(),
        "proposals": [
            {"recordId": p.record_id, "scope": p.scope, "content": p.content} for p in pending
        ],
        "document": ls.face.document.path.as_uri(),
    }


@command("clio.memory.approve")
async def memory_approve(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.memory.approve`` ``{recordId}``: ``commands.approve``; ``{recordId,
    status}``; unknown id is ``RequestFailed``."""
    ls.face.document.arm()
    parsed = _args(RecordArgs, args, bare="recordId")
    outcome = await _core(commands.approve(ls.paths, parsed.record_id))
    ls.face.proposals.resolve(parsed.record_id)
    return {"recordId": outcome.record_id, "status": outcome.status}


@command("clio.memory.reject")
async def memory_reject(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.memory.reject`` ``{recordId}``: ``commands.reject``; ``{recordId, status}``;
    unknown id is ``RequestFailed``."""
    ls.face.document.arm()
    parsed = _args(RecordArgs, args, bare="recordId")
    outcome = await _core(commands.reject(ls.paths, parsed.record_id))
    ls.face.proposals.resolve(parsed.record_id)
    return {"recordId": outcome.record_id, "status": outcome.status}


@command("clio.memory.promote")
async def memory_promote(ls: ClioLanguageServer, *args: Any) -> Any:
    """``clio.memory.promote`` ``{entryId, scope, acknowledgeGlobal?, sessionId?}``:
    ``commands.promote``; ``{status}`` or ``{status, recordId, created}``."""
    ls.face.document.arm()
    parsed = _args(PromoteArgs, args, bare="entryId")
    session = ls.face.require_session(parsed.session_id)
    result = await _core(
        commands.promote(
            session,
            ls.paths,
            parsed.entry_id,
            parsed.scope,
            acknowledge_global=parsed.acknowledge_global,
        )
    )
    await ls.face.proposals.refresh()
    return result.to_wire()


@command("clio.memory.proposeEvent")
async def memory_propose_event(ls: ClioLanguageServer, *args: Any) -> Any:
    """``clio.memory.proposeEvent`` ``{event, scope?, acknowledgeGlobal?, content?,
    sessionId?}``: a journal event becomes an unapproved record
    (``commands.propose_event``)."""
    ls.face.document.arm()
    parsed = _args(ProposeEventArgs, args, bare="event")
    session = ls.face.require_session(parsed.session_id)
    result = await _core(
        commands.propose_event(
            session,
            ls.paths,
            parsed.event,
            parsed.scope,
            acknowledge_global=parsed.acknowledge_global,
            content=parsed.content,
        )
    )
    await ls.face.proposals.refresh()
    return result


@command("clio.memory.seed")
async def memory_seed(ls: ClioLanguageServer, *args: Any) -> Any:
    """``clio.memory.seed`` ``{sessionId?}``: ``commands.seed``; ``{status}`` or
    ``{status, seeded, skipped, source}``."""
    ls.face.document.arm()
    parsed = _args(SessionArgs, args, bare="sessionId")
    result = await _core(commands.seed(ls.face.require_session(parsed.session_id)))
    ls.face.document.schedule()
    return result


@command("clio.handoff")
async def handoff(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.handoff`` ``{sessionId?}``: ``commands.handoff``; ``{path, uri}``."""
    parsed = _args(SessionArgs, args, bare="sessionId")
    path = await _core(commands.handoff(ls.face.require_session(parsed.session_id)))
    return {"path": str(path), "uri": Path(path).as_uri()}


@command("clio.usage")
async def usage(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.usage``: ``{sessionId, session: token totals, memory: spend}``
    (``commands.usage``)."""
    _args(SessionArgs, args, bare="sessionId")
    report = commands.usage(ls.face.session, ls.face.usage.totals)
    return {key: report[key] for key in ("sessionId", "session", "memory")}


@command("clio.workspace")
async def workspace(ls: ClioLanguageServer, *args: Any) -> dict[str, Any]:
    """``clio.workspace`` ``{key?, offset?, cursor?, sessionId?}``: the session's named
    text values (``commands.workspace``)."""
    parsed = _args(WorkspaceArgs, args, bare="key")
    session = ls.face.require_session(parsed.session_id)
    return await _core(
        commands.workspace(
            session,
            parsed.key,
            offset=parsed.offset,
            cursor=parsed.cursor,
            max_chars=parsed.max_chars,
        )
    )
