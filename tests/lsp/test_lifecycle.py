"""LSP lifecycle over the wire (issue 8 item 7): shutdown, exit, editor death, requests
outside the initialized state. (Errors that leave the server running are in
``test_errors.py``, on a shared server.)

Each test drives a real ``clio-acp lsp`` subprocess and checks what the LSP 3.17 spec
says must happen on the wire, where pygls 2.1.1 alone would do otherwise.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

from tests.lsp.conftest import CLIENTS, NEUTRAL_CLIENT, exit_code, initialize_params

pytestmark = pytest.mark.asyncio


@pytest.fixture
def client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


def _usage(client: LanguageClient):
    return client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.usage", arguments=[])
    )


async def test_exit_without_shutdown_ends_the_process_with_code_1(client: LanguageClient):
    client.exit(None)
    assert await exit_code(client) == 1


async def test_requests_after_shutdown_get_invalid_request_then_exit_ends_with_code_0(
    client: LanguageClient,
):
    # Also the plain shutdown-then-exit path (the request in between changes nothing
    # about the exit; the test below sends exit before the shutdown answer).
    assert await client.shutdown_async(None) is None
    with pytest.raises(JsonRpcException) as caught:
        await _usage(client)
    assert caught.value.code == types.ErrorCodes.InvalidRequest.value  # -32600
    client.exit(None)
    assert await exit_code(client) == 0


async def test_server_exits_when_the_editor_process_dies(
    lsp: LanguageClient, client_name: str, workspace
):
    # An editor stand-in that lives until it is killed (it waits on a pipe nobody writes).
    editor = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import sys; sys.stdin.read()", stdin=asyncio.subprocess.PIPE
    )
    try:
        await lsp.initialize_session(
            initialize_params(client_name, workspace, process_id=editor.pid)
        )
        # Alive editor: the server keeps answering.
        assert (await _usage(lsp))["sessionId"] is None
        editor.kill()
        await editor.wait()
        assert await exit_code(lsp) == 1
    finally:
        if editor.returncode is None:
            editor.kill()


async def test_end_of_input_without_exit_ends_the_process_with_code_1(client: LanguageClient):
    assert client._server is not None and client._server.stdin is not None
    client._server.stdin.close()
    assert await exit_code(client) == 1


@pytest.mark.parametrize("client_name", CLIENTS)  # pygls builds the answer from them
async def test_a_request_before_initialize_is_refused_then_initialize_advertises_every_command(
    lsp: LanguageClient, client_name: str, workspace
):
    lsp.capabilities = client_capabilities(client_name)  # pytest-lsp's own pre-check
    with pytest.raises(JsonRpcException) as caught:
        await _usage(lsp)
    assert caught.value.code == types.ErrorCodes.ServerNotInitialized.value  # -32002
    result = await lsp.initialize_session(initialize_params(client_name, workspace))
    commands = set(result.capabilities.execute_command_provider.commands)
    assert {
        "clio.prompt",
        "clio.cancel",
        "clio.session.new",
        "clio.session.load",
        "clio.session.list",
        "clio.session.fork",
        "clio.session.close",
        "clio.memory.show",
        "clio.memory.approve",
        "clio.memory.reject",
        "clio.memory.promote",
        "clio.memory.seed",
        "clio.handoff",
        "clio.usage",
    } <= commands
    kinds = result.capabilities.code_action_provider.code_action_kinds
    assert types.CodeActionKind.QuickFix in kinds
    assert result.server_info.name == "clio-acp"


async def test_exit_sent_right_after_shutdown_still_gets_the_shutdown_answer_and_code_0(
    client: LanguageClient,
):
    answer = asyncio.wrap_future(client.shutdown(None))  # sent now
    client.exit(None)  # without waiting for the answer
    assert await asyncio.wait_for(answer, 20) is None
    assert await exit_code(client) == 0
