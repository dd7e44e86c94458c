"""Spill refs and read-back helpers (seed 004 rules)."""

from __future__ import annotations

from clio_acp.context.spill import GREP_MAX_MATCHES, grep_text, make_ref, needs_spill, read_slice


def test_spill_refs_differ_for_results_that_share_a_long_prefix():
    head = "x" * 10_000
    assert make_ref("s", "call_0", head + "A") != make_ref("s", "call_0", head + "B")


def test_threshold_counts_utf8_bytes_not_characters():
    assert not needs_spill("a" * 8192)
    assert needs_spill("a" * 8193)
    assert needs_spill("é" * 4097)  # 8,194 bytes in 4,097 characters


def test_read_slice_caps_length_and_grep_caps_matches():
    text = "ab" * 40_000
    assert len(read_slice(text, 0, 100_000)) == 32_768
    assert len(grep_text("x " * 500, "x")) == GREP_MAX_MATCHES
