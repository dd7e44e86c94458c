"""MCP tool specs (``agent/tools/mcp.py``): names the model can call and schemas a
grammar-constrained local model can compile."""

from __future__ import annotations

from clio_acp.agent.tools.mcp import NAME_MAX, inline_refs, tool_name


def test_tool_names_keep_to_the_function_name_alphabet_and_length():
    assert tool_name("my server", "do.it") == "mcp__my_server__do_it"
    assert len(tool_name("s" * 50, "t" * 50)) == NAME_MAX


def test_local_references_are_inlined_and_definitions_dropped():
    schema = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}, "old": {"$ref": "#/definitions/Old"}},
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        "definitions": {"Old": {"type": "string"}},
    }
    inlined = inline_refs(schema)
    assert inlined["properties"]["item"]["properties"]["n"] == {"type": "integer"}
    assert inlined["properties"]["old"] == {"type": "string"}
    assert "$defs" not in inlined and "definitions" not in inlined
    assert "$ref" not in str(inlined)


def test_a_recursive_reference_ends_as_any_value():
    schema = {
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {"properties": {"next": {"$ref": "#/$defs/Node"}}}},
    }
    assert "$ref" not in str(inline_refs(schema, depth=3))
