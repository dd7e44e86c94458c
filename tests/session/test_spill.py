"""Spill of oversized tool results and read-back (seed 004 rules)."""

from __future__ import annotations

import json
import re

from tests.support.model_server import Reply, ToolCall


async def test_spilled_result_reads_back_byte_identical(manager, workspace, model_server, recorder):
    # A result well over 8,192 bytes with multi-byte characters.
    big = "".join(f"line {i} · é ✓ {'x' * (i % 40)}\n" for i in range(1200))
    (workspace / "big.txt").write_text(big, encoding="utf-8")
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "big.txt"}), id="big")])
    )
    session = await manager.new_session(workspace)
    session.subscribe(recorder)

    def ref_from(body):
        tool_msg = body["messages"][-1]
        match = re.search(r"spill-[0-9a-f]{16}", tool_msg["content"])
        return match.group(0) if match else None

    def next_read(body):
        ref = ref_from(body) or ref_holder["ref"]
        ref_holder["ref"] = ref
        offset = ref_holder["offset"]
        if offset >= len(big):
            return Reply(text="read all")
        ref_holder["offset"] += 32_768
        args = {"ref": ref, "offset": offset, "length": 32_768}
        return Reply(tool_calls=[ToolCall("read_spill", json.dumps(args), id=f"r{offset}")])

    ref_holder = {"ref": None, "offset": 0}
    model_server.responder = next_read
    await session.prompt("read big.txt")
    first = model_server.bodies[1]["messages"][-1]["content"]
    assert first.startswith(big[:500])
    assert len(first) < 1_000 and "read_spill" in first
    reads = [e for e in recorder.of("tool_call_finished") if e.tool_call_id.startswith("r")]
    assert "".join(e.output for e in reads) == big


async def test_grep_spill_returns_context_and_caps_matches(
    manager, workspace, model_server, recorder
):
    big = "".join(f"row {i} {'needle' if i % 3 == 0 else 'hay'} {'.' * 50}\n" for i in range(600))
    (workspace / "big.txt").write_text(big)
    model_server.push(
        Reply(tool_calls=[ToolCall("read_file", json.dumps({"path": "big.txt"}), id="big")])
    )
    captured = {}

    def responder(body):
        content = body["messages"][-1]["content"]
        if "ref" not in captured:
            captured["ref"] = re.search(r"spill-[0-9a-f]{16}", content).group(0)
            return Reply(
                tool_calls=[
                    ToolCall(
                        "grep_spill",
                        json.dumps({"ref": captured["ref"], "pattern": "needle"}),
                        id="g",
                    )
                ]
            )
        captured["grep"] = content
        return Reply(text="found")

    model_server.responder = responder
    session = await manager.new_session(workspace)
    await session.prompt("find needles")
    assert captured["grep"].count("--- offset") == 50
