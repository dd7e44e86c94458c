"""The pure gate chain and the one reason vocabulary (MEMORY_SPEC §3 gates, §5)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import clio_acp.memory.middleware as middleware_package
from clio_acp.memory import gates, telemetry
from clio_acp.memory.gates import GateInput, gate_reminder

PASSING = GateInput(reminder="[tm-p-1] pytest -x failed twice.", cited=("tm-p-1",))


def test_a_cited_reminder_passes_every_pure_gate():
    assert gate_reminder(PASSING) == ("injected", "intervened", None)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"reminder_error": "two reminders"}, ("gated", "invalid_reminder")),
        ({"reminder": None}, ("silent", "model_silent")),
        ({"max_tokens": 5}, ("gated", "over_budget")),
        ({"suppress_intervention": True}, ("silent", "suppressed")),
        (
            {"previous_reminder": "Memory: [tm-p-1] pytest -x failed twice."},
            ("silent", "duplicate_reminder"),
        ),
        ({"cited": ()}, ("gated", "uncited")),
        ({"resolved_call": "pytest -x"}, ("gated", "resolved_failure")),
    ],
)
def test_each_gate_stops_the_reminder(change, expected):
    verdict = gate_reminder(GateInput(**{**PASSING.__dict__, **change}))
    assert (verdict.decision, verdict.reason) == expected


def test_gates_run_in_spec_order():
    # Over budget and suppressed and uncited at once: the budget gate (3) speaks first.
    both = GateInput(reminder="x" * 100, max_tokens=5, suppress_intervention=True)
    assert gate_reminder(both).reason == "over_budget"
    assert gate_reminder(GateInput(reminder="x", suppress_intervention=True)).reason == (
        "suppressed"
    )


def test_an_uncited_reminder_passes_on_a_deterministic_trigger():
    verdict = gate_reminder(GateInput(reminder="check the config", deterministic_trigger=True))
    assert verdict.decision == "injected"


def test_telemetry_validates_against_the_one_vocabulary():
    assert telemetry.REASONS is gates.REASONS
    assert telemetry.DECISIONS is gates.DECISIONS


def _emitted_reasons() -> set[str]:
    reasons: set[str] = set()
    folder = Path(middleware_package.__file__).parent
    for source in folder.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_emit"
                and len(node.args) >= 4
                and isinstance(node.args[3], ast.Constant)
            ):
                reasons.add(node.args[3].value)
    return reasons


def test_every_reason_the_middleware_emits_is_in_the_vocabulary():
    emitted = _emitted_reasons()
    assert {"no_repeated_failure", "loop_stop", "bank_empty"} <= emitted  # the scan works
    assert emitted <= gates.REASONS
