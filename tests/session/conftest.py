"""Fixtures for session-core tests: a SessionManager routed to the scripted model
server, a workspace folder, and an event recorder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clio_acp.paths import resolve_paths
from clio_acp.session.manager import SessionManager
from clio_acp.settings import load_settings
from tests.support.model_server import ScriptedModelServer


class Recorder:
    """Collects a session's events; ``wait_for`` waits until some have arrived."""

    def __init__(self) -> None:
        self.events: list = []
        self._arrived = asyncio.Event()

    def __call__(self, event) -> None:
        self.events.append(event)
        self._arrived.set()

    async def wait_for(self, type_: str, count: int = 1, *, timeout_s: float = 20.0) -> list:
        """The events of ``type_`` once there are at least ``count`` of them (woken by
        each new event, no polling); ``TimeoutError`` after ``timeout_s`` seconds."""
        async with asyncio.timeout(timeout_s):
            while len(self.of(type_)) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return self.of(type_)

    def of(self, type_: str) -> list:
        return [e for e in self.events if e.type == type_]

    def text(self) -> str:
        return "".join(e.text for e in self.of("message_chunk"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def settings_getter(model_server: ScriptedModelServer):
    model_server.install_settings(memory=False)
    settings = load_settings(resolve_paths().settings_file)
    return lambda: settings


@pytest.fixture
async def manager(settings_getter) -> AsyncIterator[SessionManager]:
    mgr = SessionManager(paths=resolve_paths(), settings=settings_getter)
    yield mgr
    await mgr.aclose()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
