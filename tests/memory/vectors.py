"""MEMORY_SPEC §2 test vectors, restated as data.

Each vector is one model answer and the outcome the policy step must give for it.
Used by the parser tests (parse-level expectations), the policy tests (the real
step against a real bank) and the ``clio-acp memory parse`` subprocess tests.

Keys of a vector:
- ``id``: the spec's row number (with a letter for variants);
- ``response``: the raw answer; ``bank``: ``"B"`` (knowledge tm-k-1), ``"fresh"``
  or ``"KP"`` (tm-k-1 knowledge, tm-p-2 procedural);
- ``trigger``: ``"interval"`` (default) or ``"deterministic"``; optional ``task``,
  ``suppress``, ``previous_reminder``;
- ``decision``/``reason``: the expected outcome; optional ``bank_operations``,
  ``dropped``, ``reminder`` (exact text, ``None`` for none);
- bank expectations: ``bank_unchanged``, ``knowledge`` (contents in order),
  ``procedural``, ``status`` (content), ``ids`` (the exact id set afterwards),
  ``injections`` ({id: injectionCount}).
"""

from __future__ import annotations

import json
from typing import Any

BASE_FACT = "The operator requires visible reminders."
T0 = "2026-01-01T00:00:00.000Z"


def E(ops: str) -> str:
    return f"<operations>{ops}</operations>\n<no_intervention/>"


def C(ops: str, reminder: str) -> str:
    return f"<operations>{ops}</operations>\n<context_for_action>{reminder}</context_for_action>"


def _entry(entry_id: str, kind: str, content: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "kind": kind,
        "content": content,
        "createdAt": T0,
        "lastTouchedAt": T0,
        "injectionCount": 0,
        "origin": "model",
    }


BANKS: dict[str, dict[str, Any]] = {
    "fresh": {"version": 1, "status": None, "knowledge": [], "procedural": []},
    "B": {
        "version": 1,
        "status": None,
        "knowledge": [_entry("tm-k-1", "knowledge", BASE_FACT)],
        "procedural": [],
    },
    "KP": {
        "version": 1,
        "status": None,
        "knowledge": [_entry("tm-k-1", "knowledge", "K")],
        "procedural": [_entry("tm-p-2", "procedural", "P")],
    },
}

SAVE_F = '[{"op":"save_knowledge","content":"F"}]'
STATUS_S = '{"op":"update_status","content":"s"}'
PRETTY = """[
  {
    "op": "save_knowledge",
    "content": "F"
  },
  {
    "op": "save_procedural",
    "content": "G"
  }
]"""
LONG_450 = "Keep the reminder visible " + "x" * (450 - 26)
LONG_800 = "Keep the reminder visible " + "y" * (800 - 26)

VECTORS: list[dict[str, Any]] = [
    {
        "id": "1",
        "response": "",
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "2",
        "response": "I should save something.",
        "decision": "malformed",
        "reason": "unparseable",
    },
    {
        "id": "3",
        "response": "<operations>not-json</operations>\n<no_intervention/>",
        "decision": "malformed",
        "reason": "unparseable",
    },
    {
        "id": "4",
        "response": '<operations>[{"op":"save_knowledge","content":"A"}]',
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "5",
        "response": '<operations>{"op":"update_status","content":"x"}</operations>',
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "6",
        "response": "<operations> Sure [ ]</operations>",
        "decision": "malformed",
        "reason": "unparseable",
    },
    {
        "id": "8",
        "response": E("[]"),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 0,
        "dropped": 0,
        "bank_unchanged": True,
    },
    {
        "id": "9a",
        "response": E("[" + ",".join([STATUS_S] * 9) + "]"),
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "9b",
        "response": E("[" + ",".join([STATUS_S] * 8) + "]"),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 8,
        "status": "s",
    },
    {
        "id": "10",
        "response": E(
            '[{"op":"save_knowledge","content":"ok","extra":1},{"op":"update_status","content":"x"}]'
        ),
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "12a",
        "response": E('[{"op":"save_knowledge","content":"A","id":""}]'),
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "12b",
        "response": E('[{"op":"save_knowledge","content":"A","id":null}]'),
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "13a",
        "response": E('[{"op":"delete"}]'),
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "13b",
        "response": E('[{"op":"delete","id":"tm-k-1","content":"x"}]'),
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {"id": "15a", "response": E('["x"]'), "decision": "malformed", "reason": "unparseable"},
    {"id": "15b", "response": E('[{"op":5}]'), "decision": "malformed", "reason": "unparseable"},
    {
        "id": "16",
        "response": E(
            '[{"op":"save_knowledge","content":"F"},{"op":"read","path":"a.ts"},{"op":"save_procedural","content":"G"}]'
        ),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 2,
        "dropped": 1,
        "knowledge": [BASE_FACT, "F"],
        "procedural": ["G"],
    },
    {
        "id": "17",
        "response": E('[{"op":"read","path":"a"},{"op":"grep","pattern":"b"}]'),
        "decision": "malformed",
        "reason": "all_operations_invalid",
        "dropped": 2,
        "bank_unchanged": True,
    },
    {
        "id": "18",
        "response": "```xml\n" + E(SAVE_F) + "\n```",
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 1,
        "reminder": None,
    },
    {
        "id": "19",
        "response": '<THINKING a="1">x</THINKING>\n' + E(SAVE_F),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 1,
    },
    {
        "id": "20",
        "response": "<think>I should consider whether the",
        "decision": "malformed",
        "reason": "unparseable",
        "bank_unchanged": True,
    },
    {
        "id": "22",
        "response": "Here is my step:\n" + E(SAVE_F) + "\n\nLet me know!",
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 1,
    },
    {
        "id": "23",
        "response": E(PRETTY),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 2,
        "procedural": ["G"],
    },
    {
        "id": "24",
        "response": E(
            '[{"op":"save_knowledge","content":"needs <operations>[]</operations> then <no_intervention/>"}]'
        ),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 1,
        "knowledge": [BASE_FACT, "needs <operations>[]</operations> then <no_intervention/>"],
    },
    {
        "id": "26",
        "response": '<operations>[{"op":"delete","id":"tm-k-1"}]</operations>',
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 1,
        "knowledge": [],
        "ids": [],
    },
    {
        "id": "27",
        "response": C("[]", ""),
        "decision": "silent",
        "reason": "model_silent",
        "bank_unchanged": True,
    },
    {
        "id": "29",
        "response": "<operations>[]</operations>\n<context_for_action>[tm-k-1] x",
        "decision": "gated",
        "reason": "invalid_reminder",
        "reminder": None,
        "bank_unchanged": True,
    },
    {
        "id": "29b",
        "response": '<operations>[{"op":"save_knowledge","content":"F"}]</operations>\n<context_for_action>[tm-k-1] x',
        "decision": "gated",
        "reason": "invalid_reminder",
        "bank_operations": 1,
        "knowledge": [BASE_FACT, "F"],
    },
    {
        "id": "30",
        "response": C("[]", "[tm-k-1] Keep it visible."),
        "decision": "injected",
        "reason": "intervened",
        "reminder": "Memory: [tm-k-1] Keep it visible.",
        "injections": {"tm-k-1": 1},
    },
    {
        "id": "31",
        "response": C("[]", "Memory: [tm-k-1] x y z"),
        "decision": "injected",
        "reason": "intervened",
        "reminder": "Memory: [tm-k-1] x y z",
    },
    {
        "id": "32",
        "response": C('[{"op":"save_knowledge","content":"K2"}]', "Run the whole suite."),
        "decision": "gated",
        "reason": "uncited",
        "reminder": None,
        "bank_operations": 1,
        "knowledge": [BASE_FACT, "K2"],
    },
    {
        "id": "33",
        "response": C('[{"op":"save_knowledge","content":"K2"}]', "Run the whole suite."),
        "trigger": "deterministic",
        "decision": "injected",
        "reason": "intervened",
        "reminder": "Memory: Run the whole suite.",
        "knowledge": [BASE_FACT, "K2"],
    },
    {
        "id": "34",
        "response": C("[]", "[tm-k-99] x"),
        "decision": "gated",
        "reason": "uncited",
        "reminder": None,
    },
    {
        "id": "35",
        "bank": "fresh",
        "response": C('[{"op":"save_knowledge","content":"F"}]', "[tm-k-1] use F"),
        "decision": "injected",
        "reason": "intervened",
        "reminder": "Memory: [tm-k-1] use F",
        "injections": {"tm-k-1": 1},
    },
    {
        "id": "37",
        "response": C('[{"op":"save_knowledge","content":"K2"}]', LONG_450),
        "trigger": "deterministic",
        "decision": "gated",
        "reason": "over_budget",
        "reminder": None,
        "bank_operations": 1,
        "knowledge": [BASE_FACT, "K2"],
    },
    {
        "id": "38",
        "response": C('[{"op":"save_knowledge","content":"K2"}]', LONG_800),
        "trigger": "deterministic",
        "decision": "gated",
        "reason": "invalid_reminder",
        "reminder": None,
        "bank_operations": 1,
        "knowledge": [BASE_FACT, "K2"],
    },
    {
        "id": "40",
        "response": C("[]", "Check why </operations> is missing"),
        "trigger": "deterministic",
        "decision": "gated",
        "reason": "invalid_reminder",
    },
    {
        "id": "42a",
        "response": C("[]", "[tm-k-1] one\n[tm-k-1] two\n[tm-k-1] three\n[tm-k-1] four"),
        "trigger": "deterministic",
        "decision": "gated",
        "reason": "invalid_reminder",
    },
    {
        "id": "42b",
        "response": C("[]", '{"a":1}'),
        "trigger": "deterministic",
        "decision": "gated",
        "reason": "invalid_reminder",
    },
    {
        "id": "42c",
        "response": C("[]", "Let me restate [tm-k-1]"),
        "trigger": "deterministic",
        "decision": "gated",
        "reason": "invalid_reminder",
    },
    {
        "id": "43a",
        "response": C("[]", "[tm-k-1] Проверь напоминания."),
        "decision": "gated",
        "reason": "invalid_reminder",
    },
    {
        "id": "43b",
        "task": "Сделай напоминания видимыми.",
        "response": C("[]", "[tm-k-1] Проверь напоминания."),
        "decision": "injected",
        "reason": "intervened",
        "reminder": "Memory: [tm-k-1] Проверь напоминания.",
    },
    {
        "id": "45",
        "suppress": True,
        "response": C('[{"op":"save_knowledge","content":"K2"}]', "[tm-k-1] Keep it visible."),
        "decision": "silent",
        "reason": "suppressed",
        "reminder": None,
        "knowledge": [BASE_FACT, "K2"],
        "injections": {"tm-k-1": 0},
    },
    {
        "id": "46",
        "previous_reminder": "Memory: [tm-k-1] Keep it visible.",
        "response": C("[]", "[tm-k-1] Keep it visible."),
        "decision": "silent",
        "reason": "duplicate_reminder",
        "reminder": None,
        "injections": {"tm-k-1": 0},
    },
    {
        "id": "48",
        "bank": "KP",
        "response": E(
            '[{"op":"update_status","content":"S"},{"op":"save_knowledge","content":"K2"},{"op":"save_procedural","content":"P2"},{"op":"delete","id":"tm-p-2"}]'
        ),
        "decision": "silent",
        "reason": "model_silent",
        "bank_operations": 4,
        "dropped": 0,
        "status": "S",
        "ids": ["tm-k-1", "tm-k-4", "tm-p-5", "tm-s-3"],
        "knowledge": ["K", "K2"],
        "procedural": ["P2"],
    },
]

# Vectors that use options the CLI does not have (none since --suppress and
# --previous-reminder exist).
CLI_UNSUPPORTED: set[str] = set()


def vector_ids() -> list[str]:
    return [v["id"] for v in VECTORS]


def bank_json(name: str) -> str:
    return json.dumps(BANKS[name])
