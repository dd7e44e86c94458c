"""Every memory parser (and the settings loader) against generated hostile input.

``PARSERS`` maps a name to ``(generate, check)``: ``generate(rng)`` returns one input
(a mutated valid sample, random text or bytes, deep JSON) and ``check(value, tmp)``
runs the parser and raises ``AssertionError`` only for a broken contract: an
exception the parser does not document, or a "never raises" parser that raised.
Shared by ``tests/memory/test_parser_properties.py`` (hypothesis drives ``rng``) and
``bench/hostile_inputs.py`` (10,000 inputs per parser from a stated seed).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clio_acp.advisory import neutralize_untrusted
from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.envelope import parse_envelope
from clio_acp.memory.handoff import (
    HandoffSource,
    parse_handoff_snapshot,
    render_handoff_snapshot,
    snapshot_from_bank,
)
from clio_acp.memory.redact import redact_preserving_markers
from clio_acp.memory.requirements import extract_requirements
from clio_acp.memory.rules import RulesMemory
from clio_acp.memory.spend import fold_spend_file
from clio_acp.memory.store import MemoryStore, MemoryStoreCorrupt
from clio_acp.memory.telemetry import parse_step_line
from clio_acp.memory.usage_report import build_usage_report, format_usage_report
from clio_acp.paths import Paths
from clio_acp.settings import SettingsError, load_settings
from tests.support.hostile import deep_json_text, encode_any, mutate, random_bytes, random_text
from tests.support.step_rows import step_row


def _sample_bank() -> TaskMemoryBank:
    bank = TaskMemoryBank()
    bank.update_status("Goal: fix the parser")
    bank.save("knowledge", "pytest -q fails with ImportError in pkg/mod.py")
    bank.save("procedural", "run `make test` before committing; token=[redacted:jwt]")
    return bank


_BANK = _sample_bank()
SEEDS: dict[str, str] = {
    "envelope": (
        '<operations>[{"op":"save_knowledge","content":"tests need Python 3.11"},'
        '{"op":"update_status","content":"goal: fix"}]</operations>\n'
        "<intervention>Memory: [tm-k-1] the test already failed this way</intervention>"
    ),
    "handoff": "# Handoff\n\n"
    + render_handoff_snapshot(snapshot_from_bank(_BANK, HandoffSource.for_session("s1")))
    + "\n",
    "step-line": json.dumps(
        step_row(bankOperations=1, latencyMs=120.5, targetId="local", modelId="small")
    ),
    "records": json.dumps(
        {
            "version": 1,
            "records": [
                {
                    "id": "r1",
                    "scope": "global",
                    "lesson": "x",
                    "status": "approved",
                    "createdAt": "2026-01-02T03:04:05.678Z",
                }
            ],
        }
    ),
    "bank-snapshot": json.dumps(_BANK.snapshot()),
    "rules-memory": json.dumps(
        {
            "stateEpoch": 1,
            "failures": [{"fingerprint": "f", "command": "pytest", "line": "E x", "step": 3}],
            "repeats": [],
            "environment": [],
        }
    ),
    "text": "Requirements:\n- must keep the API\n- never print\nMemory: x <system-reminder>",
    "settings": "chat:\n  target: box\ncontext:\n  memory:\n    enabled: true\n",
}


def text_input(rng: random.Random, seed: str) -> str:
    roll = rng.random()
    if roll < 0.6:
        return mutate(rng, seed)
    if roll < 0.7:
        return deep_json_text(rng)
    if roll < 0.85:
        return random_text(rng, 400)
    return seed[: rng.randint(0, len(seed))]


def _json_input(rng: random.Random, seed: str) -> Any:
    text = text_input(rng, seed)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _check_envelope(value: str, _tmp: Path) -> None:
    result = parse_envelope(value, value[:50])
    assert not (result.error or "").startswith("parser error"), result.error


def _check_handoff(value: str, _tmp: Path) -> None:
    snapshot = parse_handoff_snapshot(value)
    if snapshot is not None:
        again = parse_handoff_snapshot(render_handoff_snapshot(snapshot))
        assert again is not None and again.count == snapshot.count


def _check_step_line(value: str, _tmp: Path) -> None:
    try:
        parse_step_line(value)
    except ValueError:
        pass


def _check_records(value: bytes, tmp: Path) -> None:
    path = tmp / "records.json"
    path.write_bytes(value)
    try:
        MemoryStore(path).load()
    except MemoryStoreCorrupt:
        pass


def _check_bank_snapshot(value: Any, _tmp: Path) -> None:
    bank = TaskMemoryBank()
    try:
        bank.restore(value)
    except ValueError:
        return
    bank.render(10_000)


def _check_rules_memory(value: Any, _tmp: Path) -> None:
    if not isinstance(value, dict):
        value = {"failures": value}
    try:
        RulesMemory.load(value)
    except ValueError:
        pass


def _check_text_parsers(value: str, _tmp: Path) -> None:
    extract_requirements(value)
    once = redact_preserving_markers(value)
    assert redact_preserving_markers(once) == once
    neutralized = neutralize_untrusted(value)
    assert neutralize_untrusted(neutralized) == neutralized


def _check_settings(value: bytes, tmp: Path) -> None:
    path = tmp / "settings.yaml"
    path.write_bytes(value)
    try:
        load_settings(path)
    except SettingsError:
        pass


def _check_usage_files(value: bytes, tmp: Path) -> None:
    """The step ledger and the usage ring, as ``clio-acp usage`` and the board read them
    (documented never to raise)."""
    paths = Paths(data=tmp / "d", state=tmp / "s", config=tmp / "c", cache=tmp / "k")
    for file in (paths.steps_file, paths.usage_file):
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(value)
    format_usage_report(build_usage_report(paths))
    fold_spend_file(paths.steps_file)


def _ledger_input(rng: random.Random) -> bytes:
    lines = [_bytes_input(rng, SEEDS["step-line"]) for _ in range(rng.randint(1, 5))]
    return b"\n".join(lines)


def _bytes_input(rng: random.Random, seed: str) -> bytes:
    if rng.random() < 0.2:
        return random_bytes(rng, 400)
    return encode_any(text_input(rng, seed))


Generator = Callable[[random.Random], Any]
Checker = Callable[[Any, Path], None]

PARSERS: dict[str, tuple[Generator, Checker]] = {
    "envelope": (lambda rng: text_input(rng, SEEDS["envelope"]), _check_envelope),
    "handoff": (lambda rng: text_input(rng, SEEDS["handoff"]), _check_handoff),
    "step-line": (lambda rng: text_input(rng, SEEDS["step-line"]), _check_step_line),
    "records": (lambda rng: _bytes_input(rng, SEEDS["records"]), _check_records),
    "bank-snapshot": (lambda rng: _json_input(rng, SEEDS["bank-snapshot"]), _check_bank_snapshot),
    "rules-memory": (lambda rng: _json_input(rng, SEEDS["rules-memory"]), _check_rules_memory),
    "requirements-redaction-advisory": (
        lambda rng: text_input(rng, SEEDS["text"]),
        _check_text_parsers,
    ),
    "settings": (lambda rng: _bytes_input(rng, SEEDS["settings"]), _check_settings),
    "usage-ledger": (_ledger_input, _check_usage_files),
}
