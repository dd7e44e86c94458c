"""Auto-proposal end to end (MEMORY_SPEC §6): an LLM-tier reminder from the real
middleware and router, answered by the scripted model server, proposes its cited
entries as unapproved repo records; a rules-tier reminder proposes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clio_acp.agent import memory_hooks as port
from clio_acp.agent.memory_hooks import create_hooks
from clio_acp.memory.store import MemoryStore
from clio_acp.memory.telemetry import parse_step_line
from clio_acp.paths import resolve_paths
from clio_acp.settings import load_settings
from tests.support.model_server import Reply, usage

REMIND = (
    '<operations>[{"op":"save_knowledge","content":"Run the parser tests with pytest -x."}]'
    "</operations>\n"
    "<context_for_action>[tm-k-1] Run the parser tests with pytest -x.</context_for_action>"
)


def hooks_for(cwd: Path, settings):
    return create_hooks(
        session_id="S1",
        cwd=cwd,
        settings=lambda: settings,
        delivers_reminders=True,
        paths=resolve_paths(),
    )


def observe(h, call_id: str, command: str, ok: bool = True):
    h.before_tool("S1", call_id, "run_command", {"command": command})
    return h.after_tool(
        "S1",
        port.ToolObservation(
            tool_call_id=call_id,
            tool_name="run_command",
            arguments={"command": command},
            ok=ok,
            digest="" if ok else "ValueError: boom",
            exit_code=0 if ok else 1,
            output="ok\n" if ok else "ValueError: boom\n",
            category="execute",
        ),
    )


async def test_llm_tier_injection_proposes_cited_entries(model_server, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    model_server.install_settings()
    settings = load_settings(resolve_paths().settings_file)
    settings.context.memory.cadence_tool_calls = 2
    settings.context.memory.capture_requirements = False
    model_server.push(Reply(text=REMIND, usage=usage(100, 20)))
    h = hooks_for(repo, settings)
    h.turn_start("S1", "t1", "fix the parser")
    observe(h, "c1", "ls src")
    observe(h, "c2", "ls tests")
    h.turn_end("S1", "t1")
    h.evaluate_turn_end("S1", "t1")
    store = MemoryStore(resolve_paths().records_file)
    for _ in range(500):
        if store.path.exists():
            break
        await asyncio.sleep(0.02)
    await h.middleware.wait_idle()
    rows = [parse_step_line(line) for line in resolve_paths().steps_file.read_text().splitlines()]
    assert (rows[-1].tier, rows[-1].decision) == ("llm", "injected")
    (record,) = store.load()
    assert record.status == "proposed" and record.scope == "repo"
    assert record.repository.key == str(repo.resolve())
    assert record.lesson == "Run the parser tests with pytest -x."
    assert record.evidence_refs == ["session:S1"]
    assert record.provenance.source_entry_id == "tm-k-1"
    h.dispose()


async def test_rules_tier_injection_proposes_nothing(tmp_path: Path) -> None:
    settings = load_settings(resolve_paths().settings_file)  # no memory target: rules only
    h = hooks_for(tmp_path, settings)
    h.turn_start("S1", "t1", "make the tests pass")
    observe(h, "c1", "python repro.py", ok=False)
    (effect,) = observe(h, "c2", "python repro.py", ok=False)
    assert isinstance(effect, port.AnnotateToolResult) and effect.cited
    await asyncio.sleep(0.2)
    assert not resolve_paths().records_file.exists()
    h.dispose()
