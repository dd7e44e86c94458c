"""``/memory seed`` text in ACP names the handoff entries left out as invalid."""

from clio_acp.acp.render import render_seed


def test_seed_message_names_rejected_entries() -> None:
    text = render_seed(
        {"status": "seeded", "seeded": 2, "skipped": 0, "source": "handoff-1.md",
         "rejected": ["knowledge[1]: content is 1300 characters (limit 1200)"]}
    )  # fmt: skip
    assert text.startswith("Seeded 2 entries from handoff-1.md.\n")
    assert "Left out (invalid): knowledge[1]: content is 1300 characters" in text
    assert "Left out" not in render_seed({"status": "seeded", "seeded": 1, "skipped": 0})
