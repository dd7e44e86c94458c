"""Property: every memory parser (and the settings loader) keeps its contract on any
generated input — no undocumented exception, "never raises" parsers never raise
(issue 17; 10,000 inputs per parser: ``bench/hostile_inputs.py``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.parser_fuzz import PARSERS

EXAMPLES = 150


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parser_keeps_its_contract_on_hostile_input(name: str, tmp_path) -> None:
    generate, check = PARSERS[name]

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=False))
    def run(rng) -> None:
        check(generate(rng), tmp_path)

    run()
