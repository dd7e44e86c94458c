"""``clio-acp acp``: wire stdio, the SDK connection, our router and the session core.

Owns process-level setup of the ACP face: stdio protection on the first line of
:func:`main`, the :class:`~clio_acp.acp.transport.LineTransport`, the SDK's
``acp.connection.Connection`` (JSON-RPC bookkeeping), and shutdown (cancel turns,
close the manager). It must not translate protocol methods (``server.py`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from clio_acp.acp.transport import LineTransport, ProtocolFds, protect_stdio
from clio_acp.paths import resolve_paths
from clio_acp.settings import SettingsStore, open_settings

log = logging.getLogger(__name__)

EOF_GRACE_S = 120.0
"""After end of input, how long requests already received may run before they are
cancelled, seconds (stdin from a file ends before its requests are answered)."""


def main(fds: ProtocolFds | None = None) -> int:
    """Run the ACP agent on this process's stdin/stdout until the client hangs up.

    ``fds``: descriptors already protected by the caller (``clio-acp acp`` protects
    them before importing anything else); otherwise this protects them first.
    """
    if fds is None:
        fds = protect_stdio()  # first: nothing may write to the protocol stream before this
    with _schema_docstrings_skipped():
        import acp  # noqa: F401  (the SDK's schema models are built here)
    try:
        asyncio.run(serve(fds))
    except KeyboardInterrupt:
        return 130
    return 0


def _manager_factory(settings: SettingsStore):
    def make(**kwargs: Any):
        from clio_acp.session import SessionManager  # deferred: fast initialize

        return SessionManager(
            paths=resolve_paths(), settings=settings, delivers_reminders=True, **kwargs
        )

    return make


@contextlib.contextmanager
def _schema_docstrings_skipped() -> Iterator[None]:
    """Import the SDK without pydantic's attribute-docstring extraction.

    Workaround for ``agent-client-protocol==0.12.1`` (pydantic 2.x): its schema base
    model sets ``use_attribute_docstrings=True``, so importing ``acp`` re-reads and
    parses the source of each of its ~270 models, about a third of the agent's cold
    start (bench/acp_startup.py). The docstrings only feed JSON-schema descriptions,
    which we never generate from the SDK models. The private pydantic hook is patched
    only for the duration of this import and restored; if pydantic moved it, the
    import simply runs at full cost.
    """
    try:
        from pydantic._internal import _fields
    except ImportError:
        yield
        return
    original = getattr(_fields, "extract_docstrings_from_cls", None)
    if original is None:
        yield
        return
    _fields.extract_docstrings_from_cls = lambda cls, use_inspect=False: {}
    try:
        yield
    finally:
        _fields.extract_docstrings_from_cls = original


async def serve(fds: ProtocolFds) -> None:
    """Serve one client over ``fds`` until end of input."""
    from acp.connection import Connection

    from clio_acp.acp.server import ClioAcpAgent, build_router

    transport = LineTransport(fds.read_fd, fds.write_fd)
    await transport.start()
    settings = open_settings(resolve_paths().config)
    if settings.error is not None:
        log.error("settings: %s (using defaults)", settings.error)
    watcher = asyncio.get_running_loop().create_task(_watch(settings))
    agent = ClioAcpAgent(_manager_factory(settings), settings=settings)
    conn = Connection(build_router(agent), transport, listening=False)
    agent.attach(conn, transport)
    try:
        await conn.main_loop()
        await agent.drain(EOF_GRACE_S)
    finally:
        watcher.cancel()
        await agent.aclose()
        await conn.close()


async def _watch(settings: SettingsStore) -> None:
    """Live reload of settings.yaml; a watcher failure only costs live reload."""
    try:
        await settings.watch()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.warning("settings live reload unavailable", exc_info=True)
