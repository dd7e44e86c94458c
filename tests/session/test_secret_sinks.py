"""No secret of the corpus reaches any memory sink (issue 17): handoff, records.json,
steps.jsonl, usage rows, the trace, the board, memory.md, the journal's bank column
and what the faces show of memory (reminders, annotations, proposals, the board).

Secrets enter the way real ones do: in the user's requirements (rules capture), in a
failing command's output (rules annotation), in the memory model's own save
operations (LLM tier), and straight into the bank for every corpus format."""

from __future__ import annotations

import json
import sqlite3

import pytest

from clio_acp.lsp.memory_doc import render_memory_document
from clio_acp.paths import resolve_paths
from clio_acp.session import commands
from clio_acp.session.manager import SessionManager
from clio_acp.settings import load_settings
from tests.support.model_server import Reply, ToolCall
from tests.support.secrets import corpus, leaked
from tests.support.waiting import wait_until

ONE_LINE = [s for s in corpus() if "\n" not in s.text and len(s.text) < 200]


def _is_memory_request(body: dict) -> bool:
    first = body["messages"][0]["content"] if body.get("messages") else ""
    return not body.get("tools") and "working summary" not in str(first)


def _chat(reply: Reply) -> Reply:
    reply.when = lambda b: not _is_memory_request(b)
    return reply


def _failing(secret_text: str, call_id: str) -> Reply:
    command = f"python3 -c \"raise SystemExit('Error: rejected {secret_text}')\""
    args = json.dumps({"command": command})
    return _chat(Reply(tool_calls=[ToolCall("run_command", args, id=call_id)]))


@pytest.fixture
async def session_env(workspace, model_server, monkeypatch, isolated_dirs):
    trace = isolated_dirs["state"] / "memory-trace.jsonl"
    monkeypatch.setenv("CLIO_ACP_MEMORY_TRACE", str(trace))
    model_server.install_settings(memory=True)
    settings = load_settings(resolve_paths().settings_file)
    settings.context.memory.cadence_tool_calls = 2
    manager = SessionManager(paths=resolve_paths(), settings=lambda: settings)
    yield manager, trace
    await manager.aclose()


async def test_no_corpus_secret_reaches_any_memory_sink(
    session_env, workspace, model_server, recorder
):
    manager, trace = session_env
    saved = [{"op": "save_knowledge", "content": f"note: {s.text}"} for s in ONE_LINE[:6]]
    envelope = (
        f"<operations>{json.dumps(saved)}</operations>\n"
        f"<context_for_action>Memory: [tm-k-1] the key was {ONE_LINE[0].secret}</context_for_action>"
    )
    failing = ONE_LINE[6].text.replace("'", "")
    model_server.push(
        Reply(text=envelope, when=_is_memory_request),
        _failing(failing, "f1"),
        _failing(failing, "f2"),
        _chat(Reply(text="done")),
    )
    requirements = "\n".join(f"- You must use {s.text}" for s in ONE_LINE[7:15])
    session = await manager.new_session(workspace, mode="bypass")
    session.subscribe(recorder)
    await session.prompt(f"Deploy the service.\nRequirements:\n{requirements}\n")
    await wait_until(
        lambda: (
            any(_is_memory_request(b) for b in model_server.bodies)
            and not session.memory.step_in_flight()
        )
    )
    bank = session.memory.task_bank()
    for sample in corpus():  # every format, as a rules or model entry would be saved
        bank.save("procedural", f"remember {sample.text}")
    await session.save_bank()
    sinks: dict[str, str] = {}
    sinks["board"] = json.dumps(session.board(), ensure_ascii=False)
    sinks["memory.md"] = render_memory_document(
        session_id=session.id,
        board=session.board(),
        reminders=recorder.of("memory_reminder"),
        proposals=recorder.of("memory_proposal"),
    ).text
    faces = [e.text for e in recorder.of("memory_reminder")]
    faces += [e.annotation or "" for e in recorder.of("tool_call_finished")]
    faces += [e.content for e in recorder.of("memory_proposal")]
    sinks["faces"] = "\n".join(faces)
    with sqlite3.connect(resolve_paths().journal_file) as db:
        sinks["journal bank"] = "\n".join(
            str(r[0]) for r in db.execute("SELECT bank FROM sessions")
        )
    sinks["handoff"] = (await session.handoff()).read_text(encoding="utf-8")
    for entry in [*bank.knowledge, *bank.procedural][:20]:
        await commands.promote(session, resolve_paths(), entry.id, "repo")
    paths = resolve_paths()
    for name, path in (
        ("records.json", paths.records_file),
        ("steps.jsonl", paths.steps_file),
        ("usage rows", paths.usage_file),
        ("trace", trace),
    ):
        sinks[name] = path.read_text(encoding="utf-8") if path.exists() else ""
    # The secrets really entered memory: requirements, the annotation, the model's saves.
    assert "[redacted:" in sinks["board"] and "[redacted:" in sinks["faces"]
    assert sinks["records.json"] and sinks["steps.jsonl"] and sinks["trace"]
    for name, text in sinks.items():
        assert leaked(text) == [], name
