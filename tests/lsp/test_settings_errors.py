"""An unusable settings file reaches the editor (issue 20 item 5): ``clio-acp lsp``
shows it with ``window/showMessage`` (Error) after ``initialized``, once, and keeps
serving on the last good settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.conftest import (
    NEUTRAL_CLIENT,
    SHOW_MESSAGE,
    initialize_params,
    start_server,
    stop_server,
    wait_for,
)

pytestmark = pytest.mark.asyncio


@pytest.fixture
def client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


async def test_a_broken_settings_file_is_shown_as_an_error_message(
    workspace: Path, client_name: str
):
    settings = Path(os.environ["CLIO_ACP_CONFIG_DIR"]) / "settings.yaml"
    settings.write_text("chat:\n  targte: lab\n", encoding="utf-8")  # a typo
    client = await start_server(workspace)
    try:
        await client.initialize_session(initialize_params(client_name, workspace))
        await wait_for(client, SHOW_MESSAGE, lambda: client.messages)
        (message,) = [m for m in client.messages if "settings not applied" in m.message]
        assert message.type == types.MessageType.Error
        assert "targte" in message.message and "previous good settings" in message.message
        shown = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.memory.show", arguments=[])
        )
        assert shown is not None  # still serving, on the defaults
        assert len([m for m in client.messages if "settings not applied" in m.message]) == 1
    finally:
        await stop_server(client)


async def test_good_settings_show_no_message(workspace: Path, client_name: str):
    client = await start_server(workspace)
    try:
        await client.initialize_session(initialize_params(client_name, workspace))
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.memory.show", arguments=[])
        )
        assert not [m for m in client.messages if "settings" in m.message]
    finally:
        await stop_server(client)
