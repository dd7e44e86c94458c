"""The repetition guard (issue 20 item 2): degenerate streams trip it, real answers
(listings, tables, rules, numbered steps) do not."""

from __future__ import annotations

from clio_acp.models.repetition import RepetitionGuard


def _feed(text: str, piece: int = 5) -> RepetitionGuard:
    guard = RepetitionGuard()
    for i in range(0, len(text), piece):
        guard.feed(text[i : i + piece])
    return guard


def test_the_same_line_again_and_again_trips_it():
    guard = _feed("Here are the files:\n" + "- checkout-1.2\n" * 8)
    assert guard.tripped and "same line" in guard.why and "checkout-1.2" in guard.why


def test_lines_that_only_count_up_trip_it_late():
    text = "".join(f"- item_{i}.bak\n" for i in range(15))
    assert not _feed(text).tripped  # 15 numbered lines may be a real listing
    assert _feed(text + "- item_15.bak\n- item_16.bak\n").tripped


def test_a_loop_inside_one_line_trips_it():
    guard = _feed("1.1.0_v1.0.1 " + "_v1.3.1" * 60)
    assert guard.tripped and "repeated" in guard.why


def test_real_answers_do_not_trip_it():
    listing = "".join(f"- {name}\n" for name in ["README.md", "src/", "tests/", "LICENSE"])
    table = "| a | b |\n|---|---|\n" + "".join(f"| {i} | x{i} |\n" for i in range(12))
    rule = "=" * 300 + "\nSection\n" + "-" * 300 + "\n"
    steps = "".join(f"{i}. run step {i} of the build\n" for i in range(1, 12))
    prose = "The project has a README, a src folder and tests. " * 2
    for text in (listing, table, rule, steps, prose):
        guard = _feed(text)
        assert not guard.tripped, (text[:60], guard.why)


def test_it_stays_tripped_and_ignores_empty_pieces():
    guard = _feed("ab" * 200)
    assert guard.tripped
    assert guard.feed("") is True and guard.feed("new text") is True
