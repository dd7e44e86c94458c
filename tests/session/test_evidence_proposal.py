"""A durable record proposed from a journal event (issue 19 item 3, done-when): it appears
unapproved with an ``event`` evidence reference and, once approved, in the next
session's ``# Memory`` prompt section. The CLI runs as a real subprocess."""

from __future__ import annotations

import json

from tests.support.model_server import Reply, ToolCall

FAILING = "echo 'ModuleNotFoundError: No module named yaml' >&2; exit 3"


def _system(body: dict) -> str:
    return body["messages"][0]["content"]


async def _failing_turn(manager, workspace, model_server):
    model_server.push(
        Reply(tool_calls=[ToolCall("run_command", json.dumps({"command": FAILING}), id="c1")]),
        Reply(text="the import failed"),
    )
    session = await manager.new_session(workspace, mode="bypass")
    await session.prompt("run the tool")
    result = next(r for r in session.rows() if r.type == "tool_result")
    assert result.data["status"] == "failed"
    return session, result.seq


async def test_an_event_proposal_is_unapproved_then_reaches_the_next_prompt_once_approved(
    manager, workspace, model_server, invoke_cli
):
    session, seq = await _failing_turn(manager, workspace, model_server)
    ref = f"{session.id}:{seq}"
    proposed = invoke_cli("memory", "propose", "--from-evidence", ref, "--scope", "repo", "--json")
    assert proposed.returncode == 0, proposed.stderr
    result = json.loads(proposed.stdout)
    assert result["status"] == "proposed" and result["created"] is True
    assert result["evidenceRef"] == f"event:{session.id}:{seq}"
    assert "ModuleNotFoundError: No module named yaml" in result["lesson"]
    assert result["lesson"].startswith("Run `echo")

    listed = json.loads(invoke_cli("memory", "list", "--json").stdout)
    (record,) = listed
    assert record["approved"] is False and record["evidenceRefs"] == [f"event:{session.id}:{seq}"]
    assert record["provenance"]["sourceKind"] == "evidence"

    # Unapproved: the next turn's prompt has no such memory.
    model_server.push(Reply(text="ok"))
    await session.prompt("again")
    assert "No module named yaml" not in _system(model_server.bodies[-1])

    again = invoke_cli("memory", "propose", "--from-evidence", ref, "--scope", "repo", "--json")
    assert json.loads(again.stdout)["created"] is False  # idempotent id

    approved = invoke_cli("memory", "approve", result["recordId"])
    assert approved.returncode == 0, approved.stderr
    model_server.push(Reply(text="hello"))
    fresh = await manager.new_session(workspace)
    await fresh.prompt("start")
    system = _system(model_server.bodies[-1])
    assert "# Memory" in system
    assert f"[{result['recordId']}]" in system and "No module named yaml" in system
    assert f"event:{session.id}:{seq}" in system


async def test_operator_content_replaces_the_event_text(
    manager, workspace, model_server, invoke_cli
):
    session, seq = await _failing_turn(manager, workspace, model_server)
    short = session.id[:12]  # a unique prefix is enough
    out = invoke_cli(
        "memory",
        "propose",
        "--from-evidence",
        f"{short}:{seq}",
        "--scope",
        "global",
        "--acknowledge-global",
        "--content",
        "Install PyYAML before running the suite.",
    )
    assert out.returncode == 0, out.stderr
    assert "lesson: Install PyYAML before running the suite." in out.stdout
    (record,) = json.loads(invoke_cli("memory", "list", "--json").stdout)
    assert record["scope"] == "global" and record["approved"] is False


async def test_a_user_message_is_evidence_too(manager, workspace, model_server, invoke_cli):
    model_server.push(Reply(text="noted"))
    session = await manager.new_session(workspace)
    await session.prompt("Always run the tests with -p no:cacheprovider in this repo.")
    prompt_row = next(r for r in session.rows() if r.type == "prompt")
    out = invoke_cli(
        "memory", "propose", "--from-evidence", f"{session.id}:{prompt_row.seq}", "--scope", "repo"
    )
    assert out.returncode == 0, out.stderr
    assert "lesson: Always run the tests with -p no:cacheprovider in this repo." in out.stdout


async def test_cli_errors_name_the_problem(manager, workspace, model_server, invoke_cli):
    session, seq = await _failing_turn(manager, workspace, model_server)
    unknown = invoke_cli(
        "memory", "propose", "--from-evidence", f"{session.id}:999", "--scope", "repo"
    )
    assert unknown.returncode == 1 and "has no event 999" in unknown.stderr
    malformed = invoke_cli("memory", "propose", "--from-evidence", "nonsense", "--scope", "repo")
    assert malformed.returncode == 2 and "SESSION:EVENT" in malformed.stderr
    no_ack = invoke_cli(
        "memory", "propose", "--from-evidence", f"{session.id}:{seq}", "--scope", "global"
    )
    assert no_ack.returncode == 2 and "--acknowledge-global" in no_ack.stderr
    no_session = invoke_cli("memory", "propose", "--from-evidence", "sess_zzz:1", "--scope", "repo")
    assert no_session.returncode == 1 and "session not found" in no_session.stderr
    turn_end = next(r for r in session.rows() if r.type == "turn_ended")
    empty = invoke_cli(
        "memory", "propose", "--from-evidence", f"{session.id}:{turn_end.seq}", "--scope", "repo"
    )
    assert empty.returncode == 1 and "no text" in empty.stderr
    assert json.loads(invoke_cli("memory", "list", "--json").stdout) == []
