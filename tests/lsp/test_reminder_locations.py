"""Reminders land on the user's code (issue 16 item 1): the files and lines a failing
command's output names (a Python traceback, ``path:line:`` from a checker) become the
reminder's paths and lines, and the ``clio-memory`` diagnostic sits on that file and
line, its range counted in the negotiated position encoding (UTF-16 for both
capability sets pytest-lsp ships; UTF-8 when the client asks for it). Memory.md
diagnostics are published after the file holds their line and follow their reminder
when the document is rewritten.

Reminders come from the real rules tier: the scripted model repeats a failing command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from tests.lsp.conftest import DIAGNOSTICS, NEUTRAL_CLIENT, execute, initialize_params, wait_for
from tests.support.model_server import Reply, ToolCall

pytestmark = pytest.mark.asyncio(loop_scope="session")

SOURCE = "import os\n\n    value = undefined_name  # 😀\n"
BAD = "src/bäd_😀.py"
CRASH = f"python3 '{BAD}'"
CHECKER = f"printf '%s\\n' '{BAD}:3:5: error: Name \"undefined_name\" is not defined'; exit 1"


@pytest.fixture
def client(shared_client: LanguageClient) -> LanguageClient:
    """The shared server (``shared_client``); the UTF-8 test has its own."""
    return shared_client


@pytest.fixture
def shared_options() -> dict:
    return {"permissionMode": "bypass"}


@pytest.fixture(autouse=True)
def _model(model_server):
    model_server.install_settings(memory=False)  # rules tier only
    model_server.default = Reply(text="ok")
    return model_server


@pytest.fixture
def bad_file(workspace: Path) -> Path:
    path = workspace / BAD
    path.parent.mkdir()
    path.write_text(SOURCE, encoding="utf-8")
    return path


def _script(model_server, command: str) -> None:
    call = json.dumps({"command": command})
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", call, id="c1")]),
        Reply(tool_calls=[ToolCall("run_command", call, id="c2")]),
        Reply(text="I will look at the file instead."),
    )


def _encoding(result: types.InitializeResult) -> str:
    return str(result.capabilities.position_encoding or "utf-16")


def _memory(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.source == "clio-memory"]


EMOJI_UNITS = {"utf-8": 4, "utf-16": 2, "utf-32": 1}
"""Code units of 😀 in each position encoding."""


async def _start(lsp, client_name, workspace, capabilities=None) -> str:
    """Initialize; returns the negotiated position encoding."""
    params = initialize_params(
        client_name, workspace, options={"permissionMode": "bypass"}, capabilities=capabilities
    )
    return _encoding(await lsp.initialize_session(params))


@pytest.mark.parametrize("command", [CRASH, CHECKER], ids=["traceback", "path-line-col"])
async def test_failure_output_puts_the_reminder_on_that_file_and_line(
    client: LanguageClient, workspace: Path, model_server, bad_file, command
):
    encoding = _encoding(client.initialize_result)
    _script(model_server, command)
    await execute(client, "clio.prompt", "run it")
    uri = bad_file.as_uri()
    diagnostics = await wait_for(client, DIAGNOSTICS, lambda: _memory(client, uri))
    on_file = diagnostics[0]
    assert on_file.message.startswith("Memory:")
    assert on_file.range.start.line == on_file.range.end.line == 2  # line 3, 0-based
    # From the first non-blank character to the end of the line, in negotiated units
    # (VS Code's set: UTF-16; pytest-client's Neovim set prefers UTF-8).
    assert on_file.range.start.character == 4
    assert (
        on_file.range.end.character == len("    value = undefined_name  # ") + EMOJI_UNITS[encoding]
    )
    reminders = [u for u in client.session_updates if u["type"] == "memory_reminder"]
    assert reminders[0]["paths"][0] == str(bad_file) and reminders[0]["line"] == 2
    # The reminder named a workspace file: memory.md carries no copy of it.
    doc = (workspace / ".clio-coder" / "memory.md").as_uri()
    assert not [d for d in _memory(client, doc) if d.data.get("kind") == "reminder"]


@pytest.mark.asyncio(loop_scope="function")
@pytest.mark.parametrize("client_name", [NEUTRAL_CLIENT])  # both sets: UTF-8 forced below
async def test_utf8_ranges_when_the_client_negotiates_utf8(
    lsp: LanguageClient, client_name: str, workspace: Path, model_server, bad_file
):
    """Its own server: the encoding is negotiated at ``initialize``."""
    capabilities = client_capabilities(client_name)
    capabilities.general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8]
    )
    assert await _start(lsp, client_name, workspace, capabilities=capabilities) == "utf-8"
    _script(model_server, CHECKER)
    await execute(lsp, "clio.prompt", "check it")
    uri = bad_file.as_uri()
    on_file = (await wait_for(lsp, DIAGNOSTICS, lambda: _memory(lsp, uri)))[0]
    assert on_file.range.start.line == 2
    assert on_file.range.end.character == len("    value = undefined_name  # ") + 4


async def test_memory_document_diagnostics_follow_their_reminder_when_it_is_rewritten(
    client: LanguageClient, workspace: Path, model_server
):
    failing = "python3 -c \"import sys; sys.exit('ModuleNotFoundError: No module named foo')\""
    _script(model_server, failing)
    await execute(client, "clio.prompt", "go")
    doc = workspace / ".clio-coder" / "memory.md"
    uri = doc.as_uri()

    def on_its_line() -> bool:
        """Every reminder diagnostic on memory.md sits on the line holding its text
        (read when the publish arrives: the file is written first)."""
        found = [d for d in _memory(client, uri) if d.data.get("kind") == "reminder"]
        lines = doc.read_text(encoding="utf-8").splitlines() if doc.exists() else []
        return bool(found) and all(
            d.range.start.line < len(lines) and "No module named foo" in lines[d.range.start.line]
            for d in found
        )

    await wait_for(client, DIAGNOSTICS, on_its_line)
    # A second failure adds a reminder; the document is rewritten and the earlier
    # diagnostics are re-placed on the lines that now hold their text.
    second = "python3 -c \"import sys; sys.exit('ModuleNotFoundError: No module named bar')\""
    _script(model_server, second)
    await execute(client, "clio.prompt", "go again")

    def both_on_their_lines() -> bool:
        found = [d for d in _memory(client, uri) if d.data.get("kind") == "reminder"]
        lines = doc.read_text(encoding="utf-8").splitlines()
        return len(found) >= 2 and all(
            " ".join(d.message.split())[:60] in lines[d.range.start.line] for d in found
        )

    await wait_for(client, DIAGNOSTICS, both_on_their_lines)
    messages = {d.message for d in _memory(client, uri) if d.data.get("kind") == "reminder"}
    assert any("foo" in m for m in messages) and any("bar" in m for m in messages)
