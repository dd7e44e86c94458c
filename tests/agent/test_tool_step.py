"""The tool step's pure parts: preparing a call from the model's text, the journal
row and the memory observation of a result. The step itself runs end to end through
a session in tests/session (turns, spill, memory in the loop)."""

from __future__ import annotations

from pathlib import Path

from clio_acp.agent.memory_hooks import AnnotateToolResult
from clio_acp.agent.tool_step import loose_args, observation_of, prepare_call, result_row
from clio_acp.agent.tools import ToolRegistry, Workspace, error_result, ok_result


def _workspace(tmp_path: Path) -> Workspace:
    return Workspace.create(tmp_path)


def test_a_valid_call_is_parsed_and_described(tmp_path):
    call = prepare_call(
        ToolRegistry(), _workspace(tmp_path), "c1", "read_file", '{"path": "a.txt"}'
    )
    assert call.parse_error is None and call.args_model is not None
    assert call.arguments["path"] == "a.txt"
    assert call.title == "Read a.txt"
    assert call.locations == [str(tmp_path.resolve() / "a.txt")]
    assert (call.kind, call.category, call.spillable) == ("read", "read", True)


def test_bad_arguments_keep_what_the_model_sent_and_say_why(tmp_path):
    call = prepare_call(ToolRegistry(), _workspace(tmp_path), "c1", "read_file", '{"pathh": 1}')
    assert call.args_model is None
    assert "invalid arguments for read_file" in (call.parse_error or "")
    assert call.arguments == {"pathh": 1}


def test_an_unknown_tool_is_prepared_as_a_harmless_read(tmp_path):
    call = prepare_call(ToolRegistry(), _workspace(tmp_path), "c1", "rm_rf", "not json")
    assert call.spec is None and "unknown tool 'rm_rf'" in (call.parse_error or "")
    assert (call.kind, call.category) == ("other", "read")
    assert call.arguments == {"_raw": "not json"}


def test_loose_args_wraps_non_objects():
    assert loose_args("") == {}
    assert loose_args("[1, 2]") == {"_value": [1, 2]}
    assert loose_args("{") == {"_raw": "{"}


def test_result_row_carries_the_visible_text_and_the_cited_entries(tmp_path):
    call = prepare_call(
        ToolRegistry(), _workspace(tmp_path), "c1", "run_command", '{"command": "false"}'
    )
    result = error_result("exit 1: boom", exit_code=1, output="exit code: 1\nboom")
    notes = [AnnotateToolResult(tool_call_id="c1", text="Memory: seen before", cited=("tm-k-1",))]
    row = result_row(
        call, result, "visible", spill_ref="spill-0123456789abcdef", note="n", annotations=notes
    )
    assert row["status"] == "failed" and row["exit_code"] == 1
    assert row["output"] == "visible" and row["spill_ref"] == "spill-0123456789abcdef"
    assert row["cited"] == ["tm-k-1"] and row["annotation"] == "n"


def test_the_memory_observation_sees_the_full_output_and_disposition(tmp_path):
    call = prepare_call(ToolRegistry(), _workspace(tmp_path), "c1", "list_dir", "{}")
    observation = observation_of(call, ok_result("x" * 20_000))
    assert observation.ok and observation.output == "x" * 20_000
    assert observation.metadata["resultKind"] == "ok"
    assert observation.category == "read"
