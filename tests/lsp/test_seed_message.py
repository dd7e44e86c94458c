"""``/memory seed`` text in the LSP face names the handoff entries left out as invalid."""

from clio_acp.lsp.features.resume_offer import describe_seed as _describe_seed


def test_seed_description_names_rejected_entries() -> None:
    text = _describe_seed({"seeded": 2, "skipped": 1, "rejected": ["procedural[0]: id is bad"]})
    assert text == "2 seeded, 1 skipped; left out as invalid: procedural[0]: id is bad"
    assert _describe_seed({"seeded": 2, "skipped": 1}) == "2 seeded, 1 skipped"
