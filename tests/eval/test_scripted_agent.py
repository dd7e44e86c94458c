"""The scripted agent recovers on content, not presence (issue 15 item 3)."""

from __future__ import annotations

import json

from clio_acp.eval.scripted_agent import ScriptedAgent, memory_text
from clio_acp.eval.tasks import ScriptedPlay
from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.prompts import POLICY_SYSTEM_PROMPT, build_user_prompt

PLAY = ScriptedPlay.model_validate(
    {
        "turns": [
            {
                "steps": [{"run": "python3 app.py"}, {"run": "python3 app.py"}, {"say": "gave up"}],
                "onMemory": [{"write": "config.ini", "content": "x"}, {"say": "fixed"}],
            }
        ],
        "memory": [{"whenInputContains": "not found", "reply": "[{cite}] remember"}],
    }
)
TOOLS = [{"type": "function", "function": {"name": "run_command"}}]


def _body(*messages):
    return {"tools": TOOLS, "messages": [{"role": "system", "content": "sys"}, *messages]}


def _agent(seed=0, negative=False):
    key = None if negative else (lambda text: "config.ini" in text)
    return ScriptedAgent(PLAY, ["Run it."], key_fact=key, seed=seed)


def _step(reply):
    if reply.tool_calls:
        call = reply.tool_calls[0]
        return call.name, json.loads(call.arguments)
    return "say", reply.text


USER = {"role": "user", "content": "Run it."}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}


def test_memory_without_the_key_fact_changes_nothing():
    agent = _agent()
    tool = {"role": "tool", "content": "exit 1\n\nMemory: [tm-p-1] python3 app.py failed twice."}
    assert _step(agent(_body(USER, CALL, tool))) == ("run_command", {"command": "python3 app.py"})
    assert not agent.recovered


def test_memory_with_the_key_fact_switches_to_the_recovery():
    agent = _agent()
    tool = {"role": "tool", "content": "exit 1\n\nMemory: [tm-p-1] Error: config.ini not found."}
    name, args = _step(agent(_body(USER, CALL, tool)))
    assert (name, args["path"]) == ("write_file", "config.ini") and agent.recovered


def test_the_key_fact_in_the_tool_output_itself_is_not_memory():
    agent = _agent()
    tool = {"role": "tool", "content": "Error: config.ini not found"}
    assert _step(agent(_body(USER, CALL, tool)))[0] == "run_command"
    reminder = {
        "role": "user",
        "content": "<system-reminder>\nMemory: config.ini is missing\n</system-reminder>\nRun it.",
    }
    assert _step(_agent()(_body(reminder)))[0] == "write_file"


def test_a_negative_task_takes_a_detour_then_goes_on():
    agent = _agent(negative=True)
    tool = {"role": "tool", "content": "ok\n\nMemory: something unrelated"}
    assert _step(agent(_body(USER, CALL, tool)))[0] == "write_file"  # the detour
    detour = {"role": "assistant", "content": "", "tool_calls": [{"id": "d"}]}
    assert _step(agent(_body(USER, CALL, tool, detour, {"role": "tool", "content": "ok"}))) == (
        "say",
        "fixed",
    )
    again = [USER, CALL, tool, detour, {"role": "tool", "content": "ok"}, detour]
    assert _step(agent(_body(*again, {"role": "tool", "content": "ok"}))) == (
        "run_command",
        {"command": "python3 app.py"},
    )  # then the rest of the plan


def test_seeds_prepend_harmless_steps():
    assert _step(_agent(seed=0)(_body(USER)))[1] == {"command": "python3 app.py"}
    assert _step(_agent(seed=2)(_body(USER)))[1] == {"command": "pwd"}
    second = _agent(seed=2)(_body(USER, CALL, {"role": "tool", "content": "/w"}))
    assert _step(second)[1] == {"command": "pwd"}


def test_memory_answers_cite_the_bank_not_the_worked_examples():
    bank = TaskMemoryBank()
    bank.save("knowledge", "k")
    entry = bank.save("procedural", "python3 app.py failed: not found")
    user = build_user_prompt("Run it.", bank, 2000, [])
    agent = _agent()
    body = {
        "messages": [
            {"role": "system", "content": POLICY_SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ]
    }
    assert "[tm-p-1]" in POLICY_SYSTEM_PROMPT  # the trap: the example cites tm-p-1
    assert agent(body).text in (f"[{entry.id}] remember", "[tm-k-1] remember")
    assert agent(body).text != "[tm-p-1] remember"


def test_memory_text_reads_reminder_blocks_and_tool_memory_lines_only():
    assert memory_text({"role": "system", "content": "Memory: x"}) == ""
    assert memory_text({"role": "user", "content": "Memory: typed by the user"}) == ""
    block = "<system-reminder>\nMemory: a\n</system-reminder>\nhi"
    assert memory_text({"role": "user", "content": block}) == "Memory: a"
    assert memory_text({"role": "tool", "content": "out\n\nMemory: b\nmore"}) == "Memory: b\nmore"
