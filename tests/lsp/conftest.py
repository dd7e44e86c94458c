"""pytest-lsp fixtures for the ``clio-acp lsp`` end-to-end suites.

Every test talks to a real ``python -m clio_acp lsp`` subprocess over stdio through
pytest-lsp's ``LanguageClient``. ``client_name`` parametrises a suite over the VS Code
and Neovim capability sets shipped with pytest-lsp (a module that cannot tell them apart
runs on ``NEUTRAL_CLIENT``); ``lsp`` is a started but not yet
initialized client (lifecycle tests drive ``initialize`` themselves); ``client`` is
initialized on a fresh workspace folder. Tests wait on notifications, never sleep for
a fixed time to let something happen.

Tests that are not about the process (its lifecycle, its stdout, what ``initialize``
does with its options) share one server per capability set and test process (an
xdist worker runs several modules): ``shared_client`` is that server moved onto the
test's own workspace folder (``workspace/didChangeWorkspaceFolders``), with the
default options plus ``shared_options`` (``workspace/didChangeConfiguration``), no
session bound, the client's records cleared, the durable memory store empty and no
settings file left by an earlier test. Such a module marks its tests
``pytest.mark.asyncio(loop_scope="session")`` (the server lives on the session's event
loop; ``shared_client`` fails a test on another loop); its data/state/config folders
are the server's (``server_home``), so ``isolated_dirs`` and ``install_settings`` point
at what the server reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

from clio_acp.lsp.options import InitializationOptions
from tests.conftest import make_home, subprocess_env

CLIENTS = ["visual-studio-code", "neovim"]
"""Capability sets the end-to-end suites run against (pytest-lsp ``clients/``)."""

NEUTRAL_CLIENT = "visual-studio-code"
"""The one capability set of a module whose tests cannot tell the two apart. The server
reads the client's capabilities only through ``client_supports`` (both sets declare
those alike) and the position encoding; ``tests/lsp/test_server.py`` fails if that
changes. Such a module overrides ``client_name`` (and ``shared_client_name``) with
this set (one test: ``parametrize("client_name", [NEUTRAL_CLIENT])``). Tests that look
at ranges (diagnostics, code actions, reminder locations on their shared servers) and
the test of the ``initialize`` answer keep both sets."""

STOP_TIMEOUT_S = 30


@pytest.fixture(params=CLIENTS)
def client_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "main.py").write_text("print('hello')\n", encoding="utf-8")
    return root


async def start_server(cwd: Path, extra_env: dict[str, str] | None = None) -> LanguageClient:
    """Start ``python -m clio_acp lsp`` under a pytest-lsp client (not initialized).

    The client records every ``clio/sessionUpdate`` as a plain dict in
    ``client.session_updates`` and every ``clio/status`` in ``client.statuses``."""
    client = make_test_lsp_client()
    updates: list[dict[str, Any]] = []
    client.session_updates = updates  # type: ignore[attr-defined]

    @client.feature("clio/sessionUpdate")
    def _record_update(params: Any) -> None:
        updates.append(plain(params))

    statuses: list[dict[str, Any]] = []
    client.statuses = statuses  # type: ignore[attr-defined]

    @client.feature("clio/status")
    def _record_status(params: Any) -> None:
        statuses.append(plain(params))

    # window/showMessageRequest: recorded in ``client.asked``; answered by
    # ``client.answer(params)`` (sync or async) when a test sets it, else "Dismiss".
    client.asked = []  # type: ignore[attr-defined]
    client.answer = None  # type: ignore[attr-defined]

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    async def _user(params: types.ShowMessageRequestParams) -> Any:
        client.asked.append(params)  # type: ignore[attr-defined]
        answer = client.answer  # type: ignore[attr-defined]
        if answer is None:
            return types.MessageActionItem(title="Dismiss")
        result = answer(params)
        return await result if asyncio.iscoroutine(result) else result

    await client.start_io(
        sys.executable,
        "-m",
        "clio_acp",
        "--log-level",
        "WARNING",
        "lsp",
        env=subprocess_env(extra_env),
        cwd=str(cwd),
    )
    return client


async def stop_server(client: LanguageClient) -> None:
    """Shut the server down politely if it still runs, else just reap it."""
    server = client._server
    if server is not None and server.returncode is None and client.capabilities is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), STOP_TIMEOUT_S)
    if server is not None and server.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            server.kill()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.stop(), STOP_TIMEOUT_S)


def initialize_params(
    client_name: str,
    workspace: Path,
    *,
    options: Any = None,
    process_id: int | None = None,
    capabilities: types.ClientCapabilities | None = None,
) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=capabilities or client_capabilities(client_name),
        process_id=process_id,
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
        initialization_options=options,
    )


@pytest_asyncio.fixture
async def lsp(workspace: Path) -> AsyncIterator[LanguageClient]:
    client = await start_server(workspace)
    yield client
    await stop_server(client)


@pytest_asyncio.fixture
async def client(lsp: LanguageClient, client_name: str, workspace: Path) -> LanguageClient:
    await lsp.initialize_session(initialize_params(client_name, workspace))
    return lsp


# -- one server per capability set --------------------------------------------------------


class SharedServer:
    """One ``clio-acp lsp`` for the tests of one capability set.

    ``checkout(workspace, options)`` hands a test the client in the state a fresh
    server would be in after ``initialize`` on ``workspace`` with ``options``, except
    that the options arrive by ``workspace/didChangeConfiguration`` (every key, so
    nothing a previous test set survives); ``checkin()`` ends the test's turn and
    session. A server that died (a test's fault) is started again at the next
    checkout."""

    def __init__(self, client_name: str, home: dict[str, Path]) -> None:
        self.client_name = client_name
        self.home = home
        self.folder = Path()  # the root: the first test's workspace once started
        self.client: LanguageClient | None = None
        self.folders: set[str] = set()
        """URIs of the workspace folders the server was told of (by us or a test)."""

    async def _start(self) -> LanguageClient:
        env = {f"CLIO_ACP_{name.upper()}_DIR": str(path) for name, path in self.home.items()}
        client = await start_server(self.folder, env)
        result = await client.initialize_session(initialize_params(self.client_name, self.folder))
        client.initialize_result = result  # type: ignore[attr-defined]
        self.folders = {self.folder.as_uri()}
        announce = client.workspace_did_change_workspace_folders

        def tracked(params: types.DidChangeWorkspaceFoldersParams) -> None:
            self.folders |= {f.uri for f in params.event.added or []}
            self.folders -= {f.uri for f in params.event.removed or []}
            announce(params)

        client.workspace_did_change_workspace_folders = tracked  # type: ignore[method-assign]
        return client

    def _alive(self) -> bool:
        client = self.client
        return (
            client is not None and client._server is not None and client._server.returncode is None
        )

    async def checkout(self, workspace: Path, options: dict[str, Any]) -> LanguageClient:
        if not self._alive():
            if self.client is not None:
                await stop_server(self.client)
            self.folder = workspace
            self.client = await self._start()
        client = self.client
        assert client is not None
        _forget_what_was_received(client)
        (self.home["data"] / "memory" / "records.json").unlink(missing_ok=True)
        if workspace != self.folder:
            self._move_to(client, workspace)
        await configure(client, **options)
        # Notifications have no answer: this round trip is handled after them.
        assert (await execute(client, "clio.usage"))["sessionId"] is None
        return client

    def _move_to(self, client: LanguageClient, workspace: Path) -> None:
        """Every folder out (the root too, even if a test removed it already, so the
        server's root moves), ``workspace`` in: it becomes the root."""
        gone = self.folders | {self.folder.as_uri()}
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
                    removed=[types.WorkspaceFolder(uri=uri, name="gone") for uri in sorted(gone)],
                )
            )
        )
        self.folder = workspace

    async def checkin(self) -> None:
        """End whatever turn and session the test left (a dead server stays dead) and
        remove the settings file it may have installed (the next test, perhaps of
        another module, starts without one, as in a fresh server's folders)."""
        (self.home["config"] / "settings.yaml").unlink(missing_ok=True)
        client = self.client
        if client is None or not self._alive():
            return
        client.answer = None  # type: ignore[attr-defined]
        with contextlib.suppress(JsonRpcException):
            await execute(client, "clio.cancel")
        with contextlib.suppress(JsonRpcException):
            await execute(client, "clio.session.close")

    async def stop(self) -> None:
        if self.client is not None:
            await stop_server(self.client)


def _forget_what_was_received(client: LanguageClient) -> None:
    for records in (
        client.session_updates,  # type: ignore[attr-defined]
        client.statuses,  # type: ignore[attr-defined]
        client.asked,  # type: ignore[attr-defined]
        client.messages,
        client.log_messages,
        client.shown_documents,
    ):
        records.clear()
    client.diagnostics.clear()
    client.progress_reports.clear()
    client.answer = None  # type: ignore[attr-defined]
    client.set_configuration({})  # what workspace/configuration answers


async def configure(client: LanguageClient, **options: Any) -> None:
    """Every ``clio`` option: the defaults with ``options`` (camelCase keys) over them,
    pushed with ``workspace/didChangeConfiguration``."""
    settings = InitializationOptions().model_dump(by_alias=True) | options
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"clio": settings})
    )


@pytest.fixture(scope="module", params=CLIENTS)
def shared_client_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_servers() -> AsyncIterator[dict[str, SharedServer]]:
    """This process's shared servers by capability set (filled by ``shared_server``),
    stopped at the end of the run."""
    servers: dict[str, SharedServer] = {}
    yield servers
    for server in servers.values():
        await server.stop()


@pytest.fixture(scope="module")
def shared_server(
    shared_servers: dict[str, SharedServer],
    shared_client_name: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> SharedServer:
    """The server of the module's capability set, shared with every other module of
    this process that uses the same set (it starts at its first checkout)."""
    if shared_client_name not in shared_servers:
        home = make_home(tmp_path_factory.mktemp("server-home"))
        shared_servers[shared_client_name] = SharedServer(shared_client_name, home)
    return shared_servers[shared_client_name]


@pytest.fixture(scope="module")
def server_home(shared_server: SharedServer) -> dict[str, Path]:
    """The shared server's data/state/config/cache folders."""
    return shared_server.home


@pytest.fixture
def shared_options() -> dict[str, Any]:
    """The options a module's tests start with (camelCase keys); override per module."""
    return {}


@pytest_asyncio.fixture(loop_scope="session")
async def shared_client(
    shared_server: SharedServer,
    workspace: Path,
    shared_options: dict[str, Any],
    request: pytest.FixtureRequest,
) -> AsyncIterator[LanguageClient]:
    require_session_loop(request)
    client = await shared_server.checkout(workspace, shared_options)
    yield client
    await shared_server.checkin()


def require_session_loop(request: pytest.FixtureRequest) -> None:
    """A shared server lives on the session's event loop; a test on another loop could
    not await its answers."""
    marker = request.node.get_closest_marker("asyncio")
    if marker is None or marker.kwargs.get("loop_scope") != "session":
        pytest.fail(
            f"{request.node.nodeid} uses a shared server: mark it "
            'pytest.mark.asyncio(loop_scope="session")'
        )


@pytest.fixture(autouse=True)
def isolated_dirs(isolated_dirs, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A test on the shared server uses the server's folders (settings it installs and
    records it reads must be the server's)."""
    if "shared_server" not in request.fixturenames:
        return isolated_dirs
    home = request.getfixturevalue("server_home")
    for name, path in home.items():
        monkeypatch.setenv(f"CLIO_ACP_{name.upper()}_DIR", str(path))
    return home


SESSION_UPDATE = "clio/sessionUpdate"
DIAGNOSTICS = "textDocument/publishDiagnostics"
PROGRESS = "$/progress"
SHOW_MESSAGE = "window/showMessage"


async def wait_for(
    client: LanguageClient, method: str, predicate: Callable[[], Any], limit_s: float = 20.0
) -> Any:
    """Wait until ``predicate()`` (over what the client recorded) is truthy, re-checking
    it on each ``method`` notification (pytest-lsp ``wait_for_notification``); returns
    its value. ``AssertionError`` after ``limit_s`` seconds without it."""

    async def watch() -> Any:
        while not (value := predicate()):
            await client.wait_for_notification(method)
        return value

    try:
        return await asyncio.wait_for(watch(), limit_s)
    except TimeoutError:
        raise AssertionError(f"no {method} made the condition true in {limit_s} s") from None


async def exit_code(client: LanguageClient, limit_s: float = 20.0) -> int:
    assert client._server is not None
    return await asyncio.wait_for(client._server.wait(), limit_s)


def raw_request(client: LanguageClient, method: str, params: Any, msg_id: Any = None):
    """Send a request with untyped (possibly invalid) params; await the reply as plain
    JSON. An error reply raises pygls' ``JsonRpcException`` (``.code``, ``.message``,
    ``.data``). Also used where lsprotocol's client-side parsing is wrong: it reads
    every ``CodeAction`` that has a ``command`` as a ``Command`` (lsprotocol 2025.0.0
    ``_code_action_hook``)."""
    msg_id = msg_id if msg_id is not None else f"raw-{uuid.uuid4()}"
    future: Future[Any] = Future()
    client.protocol._request_futures[msg_id] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    async def reply() -> Any:
        return plain(await asyncio.wrap_future(future))

    return reply()


def plain(value: Any) -> Any:
    """pygls hands untyped JSON over as namedtuples; turn them back into JSON values."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def updates_of(client: LanguageClient, type_: str) -> list[dict[str, Any]]:
    """The recorded ``clio/sessionUpdate`` params of one event type."""
    return [u for u in client.session_updates if u.get("type") == type_]  # type: ignore[attr-defined]


async def execute(client: LanguageClient, command: str, *arguments: Any) -> Any:
    """``workspace/executeCommand``; the result as plain JSON."""
    return plain(
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=list(arguments))
        )
    )
