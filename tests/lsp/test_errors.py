"""Error hygiene on the wire (issue 8 item 7): clear messages, no tracebacks, no paths."""

from __future__ import annotations

import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from tests.lsp.conftest import NEUTRAL_CLIENT, raw_request

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT  # the capability sets cannot change what these tests see


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    """The shared server (``shared_client``): each test its own workspace."""
    return shared_client


REQUEST_FAILED = types.LSPErrorCodes.RequestFailed.value  # -32803


def _error_text(exc: JsonRpcException) -> str:
    return json.dumps({"message": exc.message, "data": exc.data}, default=str)


async def test_error_response_carries_no_traceback_and_no_local_path(
    client: LanguageClient, isolated_dirs
):
    records = isolated_dirs["data"] / "memory" / "records.json"
    records.parent.mkdir(parents=True, exist_ok=True)
    records.write_text("{ this is not json", encoding="utf-8")
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="clio.memory.approve", arguments=["mem-0123456789abcdef"]
            )
        )
    text = _error_text(caught.value)
    assert caught.value.code == REQUEST_FAILED
    assert "invalid" in caught.value.message  # the operator still learns what is wrong
    assert str(isolated_dirs["data"]) not in text
    assert "/tmp/" not in text and "<path>" in text
    assert "Traceback" not in text and "traceback" not in text and 'File "' not in text
    # The corrupt file is left untouched and the server goes on.
    assert records.read_text(encoding="utf-8") == "{ this is not json"
    assert "sessionId" in await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.usage", arguments=[])
    )


async def test_unknown_record_is_a_clear_request_failure(client: LanguageClient):
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="clio.memory.reject", arguments=["mem-ffffffffffffffff"]
            )
        )
    assert caught.value.code == REQUEST_FAILED
    assert "mem-ffffffffffffffff" in caught.value.message
    assert "traceback" not in _error_text(caught.value).lower()


async def test_invalid_command_arguments_name_the_bad_field(client: LanguageClient):
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.prompt", arguments=[{"txt": "hi"}])
        )
    assert caught.value.code == types.ErrorCodes.InvalidParams.value
    assert "text" in caught.value.message and "txt" in caught.value.message


async def test_command_that_needs_a_session_says_so_when_there_is_none(client: LanguageClient):
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.handoff", arguments=[])
        )
    assert caught.value.code == REQUEST_FAILED
    assert "no live session" in caught.value.message


async def test_loading_an_unknown_session_says_session_not_found(client: LanguageClient, capfd):
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.session.load", arguments=["sess-nope"])
        )
    assert caught.value.message == "session not found: sess-nope"
    # The server goes on, and logged no traceback for a client mistake.
    assert "sessionId" in await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.usage", arguments=[])
    )
    err = capfd.readouterr().err
    assert "Traceback" not in err


async def test_unknown_command_is_a_clear_error(client: LanguageClient, capfd):
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.nope", arguments=[])
        )
    assert "unknown command" in caught.value.message.lower()
    assert "clio.nope" in caught.value.message
    assert "sessionId" in await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.usage", arguments=[])
    )
    err = capfd.readouterr().err
    assert "Traceback" not in err


def _usage(client: LanguageClient):
    return client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="clio.usage", arguments=[])
    )


async def test_request_with_malformed_params_gets_invalid_params_and_server_goes_on(
    client: LanguageClient,
):
    with pytest.raises(JsonRpcException) as caught:
        await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": {"uri": 3}})
    assert caught.value.code == types.ErrorCodes.InvalidParams.value  # -32602
    assert "sessionId" in await _usage(client)


async def test_unknown_command_is_refused_without_stopping_the_server(client: LanguageClient):
    with pytest.raises(JsonRpcException) as caught:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="clio.nope", arguments=[])
        )
    assert caught.value.code == types.ErrorCodes.InvalidParams.value
    assert "clio.nope" in caught.value.message
    assert "sessionId" in await _usage(client)
