"""Constrained tool calling (issue 20 item 3): phases, the shortlist, the schema and
the answer turned into a tool call."""

from __future__ import annotations

import json

from clio_acp.agent.tools import ToolRegistry
from clio_acp.models.client import ChatRequest, Completion
from clio_acp.models.tool_calling import (
    answer_request,
    call_request,
    call_schema,
    completion_as_tool_call,
    plain_history,
    shortlist,
    wants_tool_call,
)

TOOLS = ToolRegistry().schemas()
PROMPT = [{"role": "system", "content": "You are clio."}, {"role": "user", "content": "x"}]
CALLED = [
    *PROMPT,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "list_dir", "arguments": '{"path": "."}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "README.md\nsrc/"},
]  # fmt: skip


def test_the_phase_is_read_from_the_messages():
    assert wants_tool_call(PROMPT)
    assert not wants_tool_call(CALLED)
    reminder = {"role": "user", "content": "<system-reminder>\nnote\n</system-reminder>"}
    assert not wants_tool_call([*CALLED, reminder])  # a reminder is not a new prompt
    assert wants_tool_call([*CALLED, {"role": "assistant", "content": "ok"}, PROMPT[1]])


def test_the_shortlist_puts_the_matching_tool_first():
    names = [t["function"]["name"] for t in shortlist(TOOLS, "List the files in this folder.")]
    assert names[0] == "list_dir" and len(names) == 3
    grep = [t["function"]["name"] for t in shortlist(TOOLS, "Search the code for TODO")]
    assert grep[0] == "grep"
    assert shortlist(TOOLS, "zzz qqq") == TOOLS  # nothing matches: every tool, in order


def test_the_call_schema_offers_required_arguments_only():
    schema = call_schema([t for t in TOOLS if t["function"]["name"] in ("list_dir", "grep")])
    by_name = {
        o["properties"]["name"]["const"]: o["properties"]["arguments"] for o in schema["anyOf"]
    }
    assert by_name["list_dir"]["properties"] == {} and by_name["list_dir"]["required"] == []
    assert set(by_name["grep"]["properties"]) == {"pattern"}
    assert by_name["grep"]["additionalProperties"] is False


def test_the_call_request_describes_tools_and_constrains_the_answer():
    request = call_request(
        ChatRequest(
            messages=[PROMPT[0], {"role": "user", "content": "List the files."}], tools=TOOLS
        )
    )
    assert request.tools is None
    assert "- list_dir(): List a folder" in request.messages[0]["content"]
    fmt = request.extra["response_format"]
    assert fmt["type"] == "json_schema" and "anyOf" in fmt["json_schema"]["schema"]


def test_the_answer_request_carries_the_result_as_text():
    request = answer_request(ChatRequest(messages=list(CALLED), tools=TOOLS))
    assert request.tools is None and "response_format" not in request.extra
    roles = [m["role"] for m in request.messages]
    assert roles == ["system", "user", "user"]  # the call went into its result's message
    assert request.messages[-1]["content"].startswith(
        'Result of list_dir({"path": "."}):\nREADME.md'
    )
    assert plain_history(CALLED)[-1] == request.messages[-1]


def test_a_constrained_answer_becomes_one_tool_call():
    done = completion_as_tool_call(
        Completion(text='{"name": "list_dir", "arguments": {}}', finish_reason="stop"), TOOLS
    )
    (call,) = done.tool_calls
    assert call.name == "list_dir" and json.loads(call.arguments) == {} and done.text == ""
    assert done.finish_reason == "tool_calls" and call.id.startswith("call_")
    cut = Completion(text='{"name": "list_d', finish_reason="length")
    assert completion_as_tool_call(cut, TOOLS) is cut  # not a call: stays text
    unknown = Completion(text='{"name": "rm_rf", "arguments": {}}')
    assert completion_as_tool_call(unknown, TOOLS).tool_calls == []
