"""``clio/status`` (issue 16 item 4): the status a status bar shows (idle/working,
memory tier, last decision, pending proposals), sent when it changes so clients do
not poll; and the ``memory_cleared`` update a session change sends (on the shared
server: the first test is about the status sent at start, so it has its own)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from tests.lsp.conftest import NEUTRAL_CLIENT, SESSION_UPDATE, execute, initialize_params, wait_for
from tests.support.model_server import Reply

pytestmark = pytest.mark.asyncio


@pytest.fixture
def client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT


STATUS = "clio/status"


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)  # rules tier only
    model_server.default = Reply(text="ok")
    return model_server


async def test_status_is_sent_at_start_and_on_each_change_of_a_turn(
    lsp: LanguageClient, client_name: str, workspace: Path
):
    options = {"permissionMode": "bypass"}
    await lsp.initialize_session(initialize_params(client_name, workspace, options=options))
    first = await wait_for(lsp, STATUS, lambda: lsp.statuses and lsp.statuses[0])
    assert first == {
        "sessionId": None,
        "state": "idle",
        "tier": None,
        "lastDecision": None,
        "pendingProposals": 0,
    }
    result = await execute(lsp, "clio.prompt", "hello")
    states = await wait_for(
        lsp,
        STATUS,
        lambda: (
            [s["state"] for s in lsp.statuses if s["sessionId"] == result["sessionId"]][-1:]
            == ["idle"]
            and lsp.statuses
        ),
    )
    seen = [s["state"] for s in states]
    assert "working" in seen and seen[-1] == "idle"
    assert states[-1]["tier"] is not None  # the bound session's memory tier
    # Only changes are sent: no two consecutive statuses are equal.
    assert all(a != b for a, b in itertools.pairwise(states))


@pytest.mark.asyncio(loop_scope="session")
async def test_a_session_change_sends_memory_cleared_for_the_session_left(
    shared_client: LanguageClient,
):
    lsp = shared_client  # the shared server, moved onto this test's workspace
    old = (await execute(lsp, "clio.session.new"))["sessionId"]
    new = (await execute(lsp, "clio.session.new"))["sessionId"]
    cleared = await wait_for(
        lsp,
        SESSION_UPDATE,
        lambda: [u for u in lsp.session_updates if u["type"] == "memory_cleared"],
    )
    assert cleared[0]["sessionId"] == old
    statuses = await wait_for(
        lsp, STATUS, lambda: [s for s in lsp.statuses if s["sessionId"] == new]
    )
    assert statuses[-1]["state"] == "idle"
