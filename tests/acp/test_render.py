"""The ``/memory`` board and ``/usage`` read as text for people (issue 20 item 7): no
JSON blobs and no Python reprs, whatever shape a board value has."""

from __future__ import annotations

from clio_acp.acp.render import render_board, render_seed, render_usage


def test_the_board_renders_nested_values_as_words():
    board = {
        "enabled": True,
        "tier": "llm",
        "size": 2,
        "lastDecision": {"decision": "remind", "reason": "repeated_failure", "tier": "rules",
                         "triggerReasons": ["tool_failure"]},
        "stepInFlight": {"startedAt": "2026-12-01T10:00:00Z", "triggerReasons": ["interval"]},
        "bank": {"knowledge": [{"id": "tm-k-1", "content": "Tests live in tests/."}],
                 "procedural": []},
        "activity": [{"line": "10:00 reminded about pytest"}, {"kind": "restore", "count": 2}],
        "spend": {"llmSteps": 3, "inputTokens": 900, "timeouts": 0, "byRoute": {"t": 1}},
        "proposals": [{"id": "mem-1", "scope": "repo", "content": "Use uv."}],
    }  # fmt: skip
    text = render_board(board)
    assert "- enabled: yes" in text
    assert "- step in flight: started at 2026-12-01T10:00:00Z, trigger reasons interval" in text
    assert "- kind restore, count 2" in text
    assert "**spend** llm steps 3, input tokens 900, timeouts 0, by route t 1" in text
    assert "`tm-k-1` Tests live in tests/." in text and "`mem-1` [repo] Use uv." in text
    for blob in ("{", "}", "[", "'", '"', "True", "None"):
        assert blob not in text.replace("[repo]", ""), blob


def test_usage_without_a_spend_line_lists_words():
    text = render_usage({"session": {}, "memory": ["odd", None], "spendLine": None})
    assert "- memory spend: odd, -" in text and "[" not in text


def test_seed_message_names_rejected_entries() -> None:
    text = render_seed(
        {"status": "seeded", "seeded": 2, "skipped": 0, "source": "handoff-1.md",
         "rejected": ["knowledge[1]: content is 1300 characters (limit 1200)"]}
    )  # fmt: skip
    assert text.startswith("Seeded 2 entries from handoff-1.md.\n")
    assert "Left out (invalid): knowledge[1]: content is 1300 characters" in text
    assert "Left out" not in render_seed({"status": "seeded", "seeded": 1, "skipped": 0})
