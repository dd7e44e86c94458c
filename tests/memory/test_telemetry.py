"""Telemetry v2 rows, strict parser, rotation, trace, spend fold and usage rows
(MEMORY_SPEC §5, §11 items 5, 7, 13, 15; §12 spend denominator)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.middleware import render_activity
from clio_acp.memory.spend import (
    USAGE_RING_ROWS,
    UsageFigures,
    UsageRow,
    UsageTiming,
    append_usage_row,
    fold_spend,
    fold_spend_file,
    format_spend,
)
from clio_acp.memory.telemetry import (
    NO_WRITES,
    ROTATE_BYTES,
    MemorySinkList,
    MemoryTrace,
    StepCounts,
    StepFields,
    StepRecord,
    TelemetrySink,
    bank_delta,
    parse_step_line,
    step_line,
    step_record,
)
from tests.support.step_rows import step_row

EXACT_KEYS = {
    "version",
    "at",
    "triggerReasons",
    "tier",
    "bankDelta",
    "decision",
    "reason",
    "bankOperations",
    "droppedOperations",
    "citedEntries",
    "tokenCost",
    "latencyMs",
}


def row(**over):
    return step_row(
        **{**dict(bankOperations=1, latencyMs=120.5, targetId="local", modelId="small"), **over}
    )


def test_rules_row_has_exactly_the_v2_key_set():
    data = row(tier="rules")
    del data["targetId"], data["modelId"]
    assert set(json.loads(StepRecord.model_validate(data).to_json())) == EXACT_KEYS


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"version": 1}, "v1 rows are rejected"),
        ({"at": "2026-01-02T08:04:05.678+05:00"}, "offset timestamps sort wrong"),
        ({"at": "2026-01-02T03:04:05Z"}, "no milliseconds: not canonical"),
        ({"tokenCost": {"input": 1, "output": 1, "total": 3}}, "total must be input+output"),
        ({"decision": "maybe"}, "unknown decision"),
        ({"reason": "vibes"}, "unknown reason"),
        ({"triggerReasons": []}, "at least one trigger"),
        ({"triggerReasons": ["interval", "interval"]}, "unique triggers"),
        ({"triggerReasons": ["interval", "loop_signal", "manual", "turn_end"]}, "at most three"),
        ({"triggerReasons": ["whim"]}, "unknown trigger"),
        ({"extra": 1}, "unknown key"),
        ({"modelId": None}, "half a pair"),
        ({"latencyMs": -1}, "negative latency"),
        ({"citedEntries": True}, "booleans are not counts"),
    ],
)
def test_parser_rejects(change, why):
    data = row(**change)
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ValueError):
        parse_step_line(json.dumps(data))


def test_parser_rejects_a_missing_reason_instead_of_defaulting():
    data = row()
    del data["reason"]
    with pytest.raises(ValueError):
        parse_step_line(json.dumps(data))


def test_parser_accepts_the_reasons_the_code_emits():
    for reason in (
        "environmental_failure",
        "loop_stop",
        "no_consumer",
        "step_in_flight",
        "bank_empty",
    ):
        assert parse_step_line(json.dumps(row(reason=reason))).reason == reason


def test_bank_delta_ignores_citation_bumps_and_counts_real_writes():
    bank = TaskMemoryBank()
    k = bank.save("knowledge", "A fact")
    p = bank.save("procedural", "An attempt")
    before = bank.snapshot()
    bank.record_injection([k.id, p.id])
    assert bank_delta(before, bank.snapshot()).writes == 0
    bank.save("knowledge", "A changed fact", k.id)
    bank.delete_entry(p.id)
    bank.update_status("now")
    delta = bank_delta(before, bank.snapshot())
    assert delta.knowledge.updated == 1
    assert delta.procedural.deleted == 1
    assert delta.status.added == 1


def test_sink_rotates_past_one_mib_keeping_one_generation(tmp_path):
    path = tmp_path / "memory" / "steps.jsonl"
    sink = TelemetrySink(path)
    record = StepRecord.model_validate(row())
    sink.emit(record)
    path.write_text("x" * (ROTATE_BYTES + 1))
    (tmp_path / "memory" / "steps.jsonl.1").write_text("old generation\n")
    sink.emit(record)
    assert (tmp_path / "memory" / "steps.jsonl.1").stat().st_size == ROTATE_BYTES + 1
    assert [parse_step_line(line).reason for line in path.read_text().splitlines()] == [
        "intervened"
    ]


def test_sink_is_best_effort(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    TelemetrySink(blocker / "steps.jsonl").emit(StepRecord.model_validate(row()))  # no raise


def test_spend_fold_counts_llm_steps_that_reached_the_model():
    rows = [
        StepRecord.model_validate(row()),
        StepRecord.model_validate(row(decision="silent", reason="model_silent", latencyMs=300)),
        StepRecord.model_validate(row(decision="dropped", reason="step_in_flight")),
        StepRecord.model_validate(row(decision="dropped", reason="endpoint_busy")),
        StepRecord.model_validate(row(decision="timeout", reason="deadline")),
        StepRecord.model_validate(
            {
                k: v
                for k, v in row(tier="rules", reason="intervened").items()
                if k not in ("targetId", "modelId")
            }
        ),
    ]
    summary = fold_spend(rows)
    assert summary.llm_steps == 3
    assert summary.injections == 1 and summary.timeouts == 1
    assert summary.hit_rate == pytest.approx(1 / 3)
    assert summary.endpoint_busy_skips == 1
    assert summary.total_tokens == 45
    assert summary.slowest_step_ms == 300
    assert format_spend(summary) == "spend 3 steps · 45 tok · 0.5s · hit 1/3 (33%)"
    assert format_spend(fold_spend([])) == ""


def test_spend_line_formats_thousands_and_minutes():
    rows = [
        StepRecord.model_validate(
            row(tokenCost={"input": 1500, "output": 0, "total": 1500}, latencyMs=61000)
        )
    ]
    assert format_spend(fold_spend(rows)) == "spend 1 steps · 1.5k tok · 1.0m · hit 1/1 (100%)"


def test_spend_file_fold_skips_torn_and_foreign_lines(tmp_path):
    path = tmp_path / "steps.jsonl"
    good = StepRecord.model_validate(row()).to_json()
    path.write_text(good + "\n" + "{not json\n" + json.dumps(row(version=1)) + "\n" + good[:20])
    (tmp_path / "steps.jsonl.1").write_text(good + "\n")
    summary = fold_spend_file(path)
    assert summary.llm_steps == 2
    assert fold_spend_file(tmp_path / "missing.jsonl").llm_steps == 0


def test_usage_rows_are_a_ring_of_1000(tmp_path):
    path = tmp_path / "usage" / "out-of-turn.jsonl"
    lines = [
        json.dumps({"label": "background-memory", "sessionId": f"s{i}"})
        for i in range(USAGE_RING_ROWS)
    ]
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    usage = UsageFigures(input=3, output=2, total_tokens=5)
    append_usage_row(
        path, UsageRow(session_id="origin", usage=usage, timing=UsageTiming(duration_ms=5))
    )
    rows = path.read_text().splitlines()
    assert len(rows) == USAGE_RING_ROWS
    assert json.loads(rows[0])["sessionId"] == "s1"
    last = json.loads(rows[-1])
    assert last["sessionId"] == "origin" and last["label"] == "background-memory"
    assert last["usage"]["totalTokens"] == 5 and last["timing"]["durationMs"] == 5


def test_trace_is_opt_in_truncated_once_per_process_and_redacted(tmp_path, monkeypatch):
    assert not MemoryTrace.from_env({}).enabled
    path = tmp_path / "trace.jsonl"
    path.write_text("left over from a previous process\n")
    MemoryTrace._opened.discard(str(path))
    trace = MemoryTrace.from_env({"CLIO_ACP_MEMORY_TRACE": str(path)})
    trace.write(
        decision="injected", reminder="x" * 9000, userPrompt="use API_KEY=super-secret-value"
    )
    trace.write(decision="silent", reminder="")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 2
    assert len(lines[0]["reminder"]) == 8000 and lines[0]["reminderChars"] == 9000
    assert "super-secret-value" not in lines[0]["userPrompt"]


def test_activity_line_rendering():
    event = {
        "triggerReasons": ["interval", "tool_error_streak"],
        "decision": "gated",
        "reason": "uncited",
        "bankWrites": 2,
        "citedEntries": 0,
    }
    assert render_activity(event) == "interval+tool_error_streak gated uncited 2w"
    event.update(decision="injected", reason="intervened", bankWrites=0, citedEntries=1)
    assert render_activity(event) == "interval+tool_error_streak injected 1 cited"


# -- regressions from adversarial input ----------------------------------------


DEEP_JSON = "[" * 100_000


def test_deeply_nested_step_line_is_a_value_error():
    with pytest.raises(ValueError):
        parse_step_line(DEEP_JSON)


def test_trace_file_is_readable_by_the_user_only(tmp_path) -> None:
    import stat

    from clio_acp.memory.telemetry import MemoryTrace

    path = tmp_path / "trace.jsonl"
    path.write_text("")
    path.chmod(0o644)
    trace = MemoryTrace(path)
    trace.write(kind="x", reminder="hello")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fresh = tmp_path / "sub" / "trace2.jsonl"
    MemoryTrace(fresh).write(kind="x")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600


def _row(**change):
    from clio_acp.memory.telemetry import empty_delta

    row = {
        "version": 2,
        "at": "2026-01-02T03:04:05.678Z",
        "triggerReasons": ["turn_end"],
        "tier": "rules",
        "bankDelta": empty_delta(),
        "decision": "silent",
        "reason": "no_repeated_failure",
        "bankOperations": 0,
        "droppedOperations": 0,
        "citedEntries": 0,
        "tokenCost": {"input": 0, "output": 0, "total": 0},
        "latencyMs": 0.0,
    }
    return {**row, **change}


def test_the_sink_validates_each_row_once_and_drops_an_invalid_one(tmp_path):
    sink = MemorySinkList()
    sink.emit_row(_row())
    sink.emit_row(_row(reason="not_a_reason"))  # a vocabulary drift: dropped, no raise
    assert [r.reason for r in sink.rows] == ["no_repeated_failure"]
    path = tmp_path / "steps.jsonl"
    TelemetrySink(path).emit_row(_row())
    assert parse_step_line(path.read_text().splitlines()[0]).reason == "no_repeated_failure"


def test_a_sink_without_a_path_keeps_nothing():
    sink = TelemetrySink(None)
    assert not sink.keeps_rows
    sink.emit_row(_row(reason="not_a_reason"))  # not even validated


# -- step_record: the schema once per distinct row (MEMORY_SPEC §5) ------------------


class _Text(str):
    """A str subclass: equal to its text, yet not a plain str to the cache."""


_ANY_TRIGGER = st.sampled_from(["turn_end", "interval", "loop_signal", "manual", "whim"])
_COUNT = st.one_of(st.integers(-1, 3), st.booleans(), st.just(1.0))
_FIELDS = st.builds(
    StepFields,
    at=st.sampled_from(
        ["2026-01-02T03:04:05.678Z", "2026-01-02T03:04:05.679Z", "2026-02-30T00:00:00.000Z", ""]
    ),
    trigger_reasons=st.lists(_ANY_TRIGGER, max_size=4).map(tuple),
    tier=st.sampled_from(["rules", "llm", "both"]),
    bank_delta=st.one_of(
        st.just(NO_WRITES), st.lists(st.integers(0, 2), min_size=9, max_size=9).map(tuple)
    ),
    decision=st.sampled_from(["silent", "injected", "maybe"]),
    reason=st.sampled_from(["no_repeated_failure", "intervened", "no_client", "vibes"]),
    bank_operations=_COUNT,
    dropped_operations=_COUNT,
    cited_entries=_COUNT,
    input_tokens=_COUNT,
    output_tokens=_COUNT,
    latency_ms=st.one_of(st.sampled_from([0.0, 1.5, -1.0, float("nan")]), st.integers(0, 2)),
    target_id=st.sampled_from([None, "", "local", "x" * 257]),
    model_id=st.sampled_from([None, "small"]),
    decoding=st.sampled_from([None, "grammar", "beam"]),
)


def _equal_but_not_plain(fields):
    """Variants equal to ``fields`` (same dict key) whose values the strict schema
    may judge differently: bool for int, int for float, a str subclass."""
    yield fields._replace(cited_entries=bool(fields.cited_entries) or fields.cited_entries)
    if isinstance(fields.latency_ms, float) and fields.latency_ms.is_integer():
        yield fields._replace(latency_ms=int(fields.latency_ms))
    yield fields._replace(trigger_reasons=tuple(_Text(t) for t in fields.trigger_reasons))
    yield fields._replace(
        bank_delta=tuple(bool(c) if c in (0, 1) else c for c in fields.bank_delta)
    )
    yield fields._replace(decision=_Text(fields.decision))


def _validated(fields):
    try:
        return StepRecord.model_validate(fields.to_row())
    except ValueError:
        return None


def _cached(fields):
    try:
        return step_record(fields)
    except ValueError:
        return None


def _same(fast, slow):
    assert (fast is None) == (slow is None)
    if slow is not None:
        assert fast == slow
        assert fast.to_json() == slow.to_json()
        assert fast.model_fields_set == slow.model_fields_set
        assert type(fast.latency_ms) is type(slow.latency_ms)


@settings(max_examples=150)
@given(_FIELDS, st.sampled_from(["2026-01-02T03:04:06.000Z", "2026-01-02T03:04:05Z", ""]))
def test_step_record_equals_the_schema_for_every_row_and_its_look_alikes(fields, later):
    """Accepted or rejected exactly as ``StepRecord.model_validate(fields.to_row())``:
    first sight, second sight (from the remembered record), another time, and rows
    equal to it whose types differ (``True`` for 1, ``0`` for 0.0, a str subclass)."""
    for candidate in (fields, fields, fields._replace(at=later), *_equal_but_not_plain(fields)):
        _same(_cached(candidate), _validated(candidate))


_DIGITS = "0123456789٣²"  # an Arabic-Indic and a superscript digit: str.isdigit
_AT_HEAD = st.sampled_from(
    ["2026-01-02T03:04:05.", "2026-01-02T03:04:06.", "2026-02-30T00:00:00.", "2026-01-02T24:00:00."]
)
_AT_TAIL = st.one_of(
    st.tuples(*[st.sampled_from(_DIGITS)] * 3, st.sampled_from("ZZZz ")).map("".join),
    st.text(_DIGITS + "Z", max_size=5),
)
_AT = st.one_of(
    st.tuples(_AT_HEAD, _AT_TAIL).map("".join),
    st.sampled_from(["", "2026-01-02T03:04:05Z"]),
    st.builds(_Text, st.sampled_from(["2026-01-02T03:04:05.679Z", "2026-01-02T03:04:05.6"])),
)


@settings(max_examples=200)
@given(st.lists(_AT, max_size=10))
def test_canonical_at_is_the_timestamp_check_for_any_sequence(values):
    """The remembered answers (the last text that passed, and its second with any
    other milliseconds) give ``is_canonical_timestamp``'s verdict in any order:
    impossible dates and hours, non-ASCII digits, wrong lengths, str subclasses."""
    from clio_acp.memory import telemetry
    from clio_acp.timestamps import is_canonical_timestamp

    for value in values:
        assert telemetry._canonical_at(value) == is_canonical_timestamp(value), value


def test_rows_from_one_remembered_record_do_not_share_their_trigger_list():
    fields = StepFields(
        "2026-01-02T03:04:05.678Z", ("turn_end",), "rules", NO_WRITES, "silent",
        "no_repeated_failure",
    )  # fmt: skip
    first, second = step_record(fields), step_record(fields._replace(at="2026-01-02T03:04:05.679Z"))
    first.trigger_reasons.append("manual")
    assert second.trigger_reasons == ["turn_end"]
    assert step_record(fields).trigger_reasons == ["turn_end"]
    assert second.at == "2026-01-02T03:04:05.679Z" and first.at == "2026-01-02T03:04:05.678Z"


def test_the_sink_takes_fields_validated_once_and_drops_an_invalid_row(tmp_path):
    fields = StepFields(
        "2026-01-02T03:04:05.678Z", ("turn_end",), "rules", NO_WRITES, "silent",
        "no_repeated_failure",
    )  # fmt: skip
    sink = MemorySinkList()
    sink.emit_fields(fields)
    sink.emit_fields(fields._replace(reason="not_a_reason"))
    assert [r.reason for r in sink.rows] == ["no_repeated_failure"]
    path = tmp_path / "steps.jsonl"
    TelemetrySink(path).emit_fields(fields)
    assert parse_step_line(path.read_text().splitlines()[0]) == sink.rows[0]
    TelemetrySink(None).emit_fields(fields._replace(reason="not_a_reason"))  # nowhere: no-op


@settings(max_examples=40)
@given(st.lists(_FIELDS, max_size=12))
def test_step_counts_count_what_a_list_sink_keeps(rows):
    """``StepCounts`` (replay) counts exactly the rows a ``MemorySinkList`` keeps, by
    decision/reason in order of first sight; each row twice (the second from the
    remembered record), and once as a dict through ``emit_row``."""
    counts, kept = StepCounts(), MemorySinkList()
    for fields in rows:
        for sink in (counts, kept):
            sink.emit_fields(fields)
            sink.emit_fields(fields)
            sink.emit_row(fields.to_row())
    expected = {}
    for record in kept.rows:
        key = f"{record.decision}/{record.reason}"
        expected[key] = expected.get(key, 0) + 1
    assert list(counts.counts.items()) == list(expected.items())
    assert counts.rows_written == kept.rows_written == len(kept.rows)


def _line_or_none(make, fields):
    try:
        return make(fields)
    except ValueError:
        return None


@settings(max_examples=100)
@given(_FIELDS, st.sampled_from(["2026-01-02T03:04:06.000Z", "2026-01-02T03:04:05Z", ""]))
def test_step_line_is_the_records_json_for_every_row(fields, later):
    """The file sink's line: ``step_record(fields).to_json()`` (or rejected alike),
    first sight, from the remembered record, and with another time."""
    for candidate in (fields, fields, fields._replace(at=later), *_equal_but_not_plain(fields)):
        expected = _line_or_none(lambda f: step_record(f).to_json(), candidate)
        assert _line_or_none(step_line, candidate) == expected


def test_the_file_sink_writes_each_rows_json_and_remakes_a_removed_folder(tmp_path):
    import shutil

    path = tmp_path / "memory" / "steps.jsonl"
    sink = TelemetrySink(path)
    first = StepFields(
        "2026-01-02T03:04:05.678Z", ("turn_end",), "rules", NO_WRITES, "silent",
        "no_repeated_failure",
    )  # fmt: skip
    rows = [first, first._replace(at="2026-01-02T03:04:05.679Z"), first._replace(cited_entries=2)]
    for fields in rows:
        sink.emit_fields(fields)
    assert path.read_text().splitlines() == [step_record(f).to_json() for f in rows]
    shutil.rmtree(path.parent)
    sink.emit_fields(rows[1])
    assert path.read_text().splitlines() == [step_record(rows[1]).to_json()]
    assert sink.rows_written == 4


def _append_by_definition(path, line):
    """The sink's append as first written: a text file opened for appending."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@settings(max_examples=60)
@given(
    st.lists(st.text(max_size=40) | st.sampled_from(["\ud800", "a\udfffé"]), min_size=1, max_size=6)
)
def test_the_file_sink_appends_what_a_text_file_appends(tmp_path_factory, lines):
    """Bytes, rows counted and refusals (a lone surrogate cannot be UTF-8) as
    ``open(path, "a", encoding="utf-8").write(line + "\\n")``; the first line
    also makes the folder."""
    folder = tmp_path_factory.mktemp("sink")
    sink = TelemetrySink(folder / "memory" / "steps.jsonl")
    expected = folder / "expected.jsonl"
    written = 0
    for line in lines:
        sink._append(line)
        try:
            _append_by_definition(expected, line)
            written += 1
        except UnicodeEncodeError:
            pass
    assert sink.path.read_bytes() == expected.read_bytes()
    assert sink.rows_written == written


def test_the_file_sink_finishes_a_short_write(tmp_path, monkeypatch):
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    sink = TelemetrySink(tmp_path / "steps.jsonl")
    sink._append('{"row":"één"}')
    assert sink.path.read_text(encoding="utf-8") == '{"row":"één"}\n'


_ENTRY = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "c"])},
    optional={
        "content": st.sampled_from(["x", "y", None]),
        "createdAt": st.sampled_from(["1", "2"]),
    },
)
_CLASS = st.lists(_ENTRY, max_size=4)


def _counts_by_definition(before, after):
    """§5 bankDelta: per class, ids added/deleted, updated when (content, createdAt)
    differ; entries keyed by id (a later duplicate wins)."""
    counts = []
    for kind in ("status", "knowledge", "procedural"):

        def keyed(snapshot, kind=kind):
            value = (snapshot or {}).get(kind)
            if kind == "status":
                value = [value] if value else []
            return {e["id"]: (e.get("content"), e.get("createdAt")) for e in value or []}

        old, new = keyed(before), keyed(after)
        common = old.keys() & new.keys()
        counts += [
            len(new) - len(common),
            sum(1 for k in common if old[k] != new[k]),
            len(old) - len(common),
        ]
    return tuple(counts)


@settings(max_examples=120)
@given(_CLASS, _CLASS, _CLASS, _CLASS, st.one_of(st.none(), _ENTRY))
def test_delta_counts_equal_the_definition_for_any_class_lists(k1, k2, p1, p2, status):
    """Whatever the class lists hold (entries rewritten in place, duplicate ids,
    missing fields, moved entries), the counts are the §5 definition's."""
    from clio_acp.memory.telemetry import delta_counts

    before = {"status": status, "knowledge": k1, "procedural": p1}
    for after in (
        {"status": status, "knowledge": k2, "procedural": p2},
        {"status": None, "knowledge": [dict(e, content="z") for e in k1], "procedural": p1[::-1]},
        {"status": status, "knowledge": [dict(e, injectionCount=9) for e in k1], "procedural": p1},
    ):
        assert delta_counts(before, after) == _counts_by_definition(before, after)


def _append_rotating_by_definition(path, line):
    """The sink's append as first written: rotate a file past the limit, then open,
    append and close."""
    from clio_acp.memory import telemetry

    try:
        if os.stat(path).st_size > telemetry.ROTATE_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


_OUTSIDE = st.sampled_from(["rows", "rows", "rows", "remove folder", "rotate", "replace", "delete"])


@settings(max_examples=60)
@given(st.lists(st.tuples(_OUTSIDE, st.integers(1, 4)), max_size=12))
def test_the_file_sink_writes_where_a_text_file_append_would(tmp_path_factory, steps):
    """Every row lands where a text-file append to ``path`` would put it, whatever happens to the file
    between rows: the folder removed, the file rotated or replaced or deleted by
    another writer, and rotation past the limit (120 bytes here)."""
    import shutil

    from clio_acp.memory import telemetry

    base = tmp_path_factory.mktemp("sink")
    sunk, fresh = base / "sink" / "memory", base / "fresh" / "memory"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(telemetry, "ROTATE_BYTES", 120)
        sink = TelemetrySink(sunk / "steps.jsonl")
        for number, (event, count) in enumerate(steps):
            for folder in (sunk, fresh):
                path = folder / "steps.jsonl"
                if event == "remove folder":
                    shutil.rmtree(folder, ignore_errors=True)
                elif event == "rotate" and path.exists():
                    os.replace(path, folder / "steps.jsonl.1")
                elif event == "replace" and folder.exists():
                    (folder / "other").write_text(f"another writer {number}\n")
                    os.replace(folder / "other", path)
                elif event == "delete" and path.exists():
                    path.unlink()
            if event == "rows":
                for row in range(count):
                    line = f'{{"row":{number}.{row},"pad":"{"x" * (count * 10)}"}}'
                    sink._append(line)
                    _append_rotating_by_definition(fresh / "steps.jsonl", line)
            assert _files(sunk) == _files(fresh)
    assert sink.rows_written == sum(count for event, count in steps if event == "rows")


def test_the_file_sink_takes_rows_from_several_threads(tmp_path):
    """Threads sharing one sink lose no row and cut none."""
    import threading

    sink = TelemetrySink(tmp_path / "memory" / "steps.jsonl")

    def write(name):
        for number in range(150):
            sink._append(f'{{"thread":"{name}","row":{number}}}')

    threads = [threading.Thread(target=write, args=(str(n),)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = [json.loads(line) for line in sink.path.read_text().splitlines()]
    assert sorted((r["thread"], r["row"]) for r in rows) == sorted(
        (str(n), number) for n in range(4) for number in range(150)
    )
