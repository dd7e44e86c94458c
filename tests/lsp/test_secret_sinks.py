"""Through a real ``clio-acp lsp`` process: secrets in the user's requirements and in a
failing command never reach what the LSP shows of memory — ``clio.memory.show`` and
the ``memory.md`` it writes inside the repository (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from tests.lsp.conftest import NEUTRAL_CLIENT, execute
from tests.support.model_server import Reply, ToolCall
from tests.support.secrets import corpus, leaked

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def shared_client_name() -> str:
    return NEUTRAL_CLIENT  # what is shown is text: the capability sets cannot change it


@pytest.fixture
def shared_options() -> dict:
    return {"permissionMode": "bypass"}


SAMPLES = tuple(s for s in corpus() if "\n" not in s.text and "'" not in s.text)[:8]


async def test_lsp_memory_views_hold_no_secret(
    shared_client: LanguageClient, workspace: Path, model_server
) -> None:
    lsp = shared_client  # the shared server on this workspace, permissionMode bypass
    model_server.install_settings(memory=False)
    model_server.default = Reply(text="ok")
    failing = json.dumps({"command": f"ls /missing-{SAMPLES[0].secret}"})
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", failing, id="c1")]),
        Reply(tool_calls=[ToolCall("run_command", failing, id="c2")]),
        Reply(text="giving up"),
    )
    requirements = "\n".join(f"- You must use {s.text}" for s in SAMPLES[1:])
    await execute(lsp, "clio.prompt", f"Deploy it.\nRequirements:\n{requirements}")
    shown = await execute(lsp, "clio.memory.show")
    document = (workspace / ".clio-coder" / "memory.md").read_text(encoding="utf-8")
    assert "[redacted:" in json.dumps(shown) and "[redacted:" in document
    assert leaked(json.dumps(shown, ensure_ascii=False), SAMPLES) == []
    assert leaked(document, SAMPLES) == []
