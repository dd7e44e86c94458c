"""records.json store (MEMORY_SPEC §6): schema, atomic locked writes, cap, corrupt files."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.store import (
    MemoryStore,
    MemoryStoreCorrupt,
    MemoryStoreError,
    MemoryStoreLimit,
    RecordNotFound,
)
from clio_acp.paths import resolve_paths
from clio_acp.timestamps import format_timestamp
from tests.conftest import subprocess_env

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def make_record(n: int, **overrides) -> MemoryRecord:
    data = {
        "id": f"mem-{n:016x}",
        "scope": "global",
        "key": f"key-{n:04d}",
        "lesson": f"Lesson number {n}.",
        "evidenceRefs": [f"session:s{n}"],
        "appliesWhen": [],
        "avoidWhen": [],
        "confidence": 0.6,
        "createdAt": format_timestamp(NOW),
        "approved": False,
    }
    data.update(overrides)
    return MemoryRecord.model_validate(data)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(resolve_paths().records_file, clock=lambda: NOW)


def test_missing_file_is_an_empty_store(store: MemoryStore) -> None:
    assert not store.path.exists()
    assert store.load() == []


def test_written_file_is_sorted_pretty_json_with_trailing_newline(store: MemoryStore) -> None:
    repo = {"repository": {"kind": "canonical-path", "key": "/tmp"}, "scope": "repo"}
    store.add_if_absent(make_record(3, key="b", **repo))
    store.add_if_absent(make_record(2, key="z"))
    store.add_if_absent(make_record(1, key="b", **repo, createdAt="2026-01-01T00:00:00.000Z"))
    text = store.path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n  "version": 1,\n  "records": [\n')
    data = json.loads(text)
    assert [r["id"] for r in data["records"]] == [
        "mem-0000000000000002",  # global first
        "mem-0000000000000001",  # repo, key b, older
        "mem-0000000000000003",
    ]
    assert "lastVerifiedAt" not in data["records"][0]  # absent, never null
    assert data["records"][0]["confidence"] == 0.6


def test_round_trip_preserves_every_field(store: MemoryStore) -> None:
    record = make_record(
        7,
        lastVerifiedAt="2026-11-01T00:00:00.000Z",
        regressions=["r1"],
        provenance={
            "sourceKind": "task-bank-entry",
            "sourceSessionId": "sess",
            "sourceEntryId": "tm-k-1",
            "sourceEntryKind": "knowledge",
            "sourceEntryCreatedAt": "2026-11-01T00:00:00.000Z",
            "sourceEntryLastTouchedAt": "2026-11-01T00:00:01.000Z",
            "redaction": {
                "appliedBeforePersistence": True,
                "replacementCount": 0,
                "sourceFields": [],
            },
        },
    )
    store.add_if_absent(record)
    assert store.load() == [record]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"surprise": 1}, "Extra inputs"),
        ({"id": "mem-ABC"}, "pattern"),
        ({"evidenceRefs": []}, "at least 1"),
        ({"evidenceRefs": [" "]}, "non-empty"),
        ({"confidence": 1.5}, "less than or equal"),
        ({"createdAt": "2026-11-29T12:00:00+05:00"}, "canonical"),
        ({"createdAt": "2026-02-30T00:00:00.000Z"}, "canonical"),
        ({"approved": True, "rejectedAt": "2026-11-29T12:00:00.000Z"}, "rejectedAt"),
        ({"scope": "repo"}, "requires repository"),
        ({"repository": {"kind": "canonical-path", "key": "/tmp"}}, "requires repository"),
        ({"scope": "repo", "repository": {"kind": "canonical-path", "key": "rel/x"}}, "absolute"),
        (
            {"scope": "repo", "repository": {"kind": "canonical-path", "key": "/a/../b"}},
            "normalized",
        ),
        ({"scope": "agent", "agent": {"kind": "agent", "key": "has space"}}, "whitespace"),
        ({"scope": "runtime"}, "requires runtime"),
        ({"provenance": {"sourceKind": "evidence"}}, "evidenceId"),
        (
            {"provenance": {"sourceKind": "evidence", "evidenceId": "e", "sourceEntryId": "x"}},
            "must not carry",
        ),
        ({"provenance": {"sourceKind": "handoff-snapshot", "sourceSessionId": "s"}}, "needs"),
        ({"provenance": {"sourceKind": "evidence", "evidenceId": "e", "extra": 1}}, "Extra"),
        ({"approved": "true"}, "boolean"),
        ({"rejectedAt": None}, "null"),
    ],
)
def test_invalid_records_are_rejected(change: dict, problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        make_record(1, **change)
    assert problem in str(info.value)


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"version": 2, "records": []}',
        b'{"version": 1, "records": [{"id": "mem-0000000000000001"}]}',
        b'{"version": 1, "records": [], "extra": true}',
        b"\xff\xfe garbage",
        b"",
    ],
)
def test_corrupt_file_is_reported_and_never_overwritten(store: MemoryStore, content: bytes) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(content)
    before = store.path.read_bytes()
    with pytest.raises(MemoryStoreCorrupt) as info:
        store.load()
    assert str(store.path) in str(info.value)
    with pytest.raises(MemoryStoreCorrupt):
        store.add_if_absent(make_record(1))
    with pytest.raises(MemoryStoreCorrupt):
        store.prune_stale()
    assert store.path.read_bytes() == before


def test_duplicate_ids_in_file_are_corrupt(store: MemoryStore) -> None:
    store.path.parent.mkdir(parents=True)
    one = make_record(1).to_json_dict()
    store.path.write_text(json.dumps({"version": 1, "records": [one, one]}))
    with pytest.raises(MemoryStoreCorrupt, match="duplicate"):
        store.load()


def test_add_is_idempotent_by_id(store: MemoryStore) -> None:
    first, created = store.add_if_absent(make_record(1))
    again, created_again = store.add_if_absent(make_record(1, lesson="different"))
    assert created and not created_again
    assert again == first
    assert len(store.load()) == 1


def test_cap_of_500_refuses_the_501st_record_and_keeps_the_file(store: MemoryStore) -> None:
    store.mutate(lambda records: ([make_record(n) for n in range(500)], None))
    before = store.path.read_bytes()
    with pytest.raises(MemoryStoreLimit, match=r"limit reached \(500\); run clio-acp memory prune"):
        store.add_if_absent(make_record(9999))
    assert store.path.read_bytes() == before
    # An existing id is still answered idempotently at the cap.
    assert store.add_if_absent(make_record(3))[1] is False


def test_approve_and_reject_lifecycle(store: MemoryStore) -> None:
    store.add_if_absent(make_record(1, regressions=["broke once"]))
    assert store.get("mem-0000000000000001").status == "proposed"
    rejected = store.reject("mem-0000000000000001")
    assert rejected.status == "rejected" and rejected.rejected_at == format_timestamp(NOW)
    approved = store.approve("mem-0000000000000001")
    assert approved.status == "approved"
    assert approved.rejected_at is None and approved.regressions is None
    assert approved.last_verified_at == format_timestamp(NOW)
    assert approved.approval is not None and approved.approval.by == "operator"
    assert store.load() == [approved]
    again = store.reject("mem-0000000000000001")
    assert again.approved is False and again.approval is None
    with pytest.raises(RecordNotFound, match="mem-00000000000000ff"):
        store.approve("mem-00000000000000ff")


def test_prune_stale_uses_180_days_for_approved_and_30_for_others(store: MemoryStore) -> None:
    def ago(days: float) -> str:
        return format_timestamp(NOW - timedelta(days=days))

    records = [
        make_record(1, approved=True, createdAt=ago(400), lastVerifiedAt=ago(179)),  # kept
        make_record(2, approved=True, createdAt=ago(181)),  # stale
        make_record(3, createdAt=ago(29)),  # kept
        make_record(4, createdAt=ago(31)),  # stale
        make_record(5, createdAt=ago(31), rejectedAt=ago(1)),  # stale (rejected, 30 days)
    ]
    store.mutate(lambda _: (records, None))
    removed = store.prune_stale()
    assert sorted(r.id[-1] for r in removed) == ["2", "4", "5"]
    assert sorted(r.id[-1] for r in store.load()) == ["1", "3"]
    assert store.prune_stale() == []


_CHILD_PRELUDE = textwrap.dedent(
    """
    import sys
    from clio_acp.memory.records import MemoryRecord
    from clio_acp.memory.store import MemoryStore
    from pathlib import Path

    def rec(n, **kw):
        d = {"id": f"mem-{n:016x}", "scope": "global", "key": f"key-{n:04d}", "lesson": "L",
             "evidenceRefs": ["e"], "appliesWhen": [], "avoidWhen": [], "confidence": 0.5,
             "createdAt": "2026-11-29T12:00:00.000Z", "approved": False}
        d.update(kw)
        return MemoryRecord.model_validate(d)

    store = MemoryStore(Path(sys.argv[1]))
    """
)


def test_two_processes_approving_and_proposing_at_once_lose_nothing(store: MemoryStore) -> None:
    store.mutate(lambda _: ([make_record(n) for n in range(40)], None))
    proposer = _CHILD_PRELUDE + "for n in range(1000, 1040):\n    store.add_if_absent(rec(n))\n"
    approver = _CHILD_PRELUDE + "for n in range(40):\n    store.approve(f'mem-{n:016x}')\n"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(store.path)], env=subprocess_env())
        for code in (proposer, approver)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    records = {r.id: r for r in store.load()}
    assert len(records) == 80
    assert all(records[f"mem-{n:016x}"].approved for n in range(40))
    assert all(f"mem-{n:016x}" in records for n in range(1000, 1040))


def test_process_killed_mid_write_leaves_a_valid_file(store: MemoryStore) -> None:
    store.add_if_absent(make_record(1))
    before = store.load()
    # The child stalls inside the write (after the temp file is written, before the
    # rename) and says so; it is then killed with SIGKILL.
    child = _CHILD_PRELUDE + textwrap.dedent(
        """
        import os, signal
        real_fsync = os.fsync
        def stalled_fsync(fd):
            real_fsync(fd)
            print("in-write", flush=True)
            signal.pause()  # until the parent's SIGKILL
        os.fsync = stalled_fsync
        store.add_if_absent(rec(2))
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(store.path)],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "in-write"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert store.load() == before  # the old whole file, still valid
    # The dead writer's lock is released and its temp file never shadows the store.
    store.add_if_absent(make_record(3))
    assert [r.id for r in store.load()] == ["mem-0000000000000001", "mem-0000000000000003"]
    leftovers = [p.name for p in Path(store.path.parent).iterdir() if p.suffix == ".tmp"]
    assert len(leftovers) <= 1


async def test_async_faces_run_off_the_loop(store: MemoryStore) -> None:
    record, created = await store.aadd_if_absent(make_record(1))
    assert created
    assert (await store.aapprove(record.id)).approved
    assert (await store.areject(record.id)).status == "rejected"
    assert [r.id for r in await store.aload()] == [record.id]


def test_a_change_producing_duplicate_ids_writes_nothing(store: MemoryStore) -> None:
    store.add_if_absent(make_record(1))
    before = store.path.read_bytes()
    with pytest.raises(MemoryStoreError, match="duplicate"):
        store.mutate(lambda records: ([*records, make_record(1)], None))
    assert store.path.read_bytes() == before


def test_layout_matches_json_dumps_indent_2(store: MemoryStore) -> None:
    record = make_record(1, lesson='é \u2028 \x1f " \\ / 😀 \x7f', confidence=1)
    store.add_if_absent(record)
    expected = {"version": 1, "records": [record.to_json_dict()]}
    assert store.path.read_text(encoding="utf-8") == (
        json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
    )
    assert '"confidence": 1,' in store.path.read_text(encoding="utf-8")


async def test_concurrent_async_writers_in_one_process_lose_nothing(store: MemoryStore) -> None:

    other = MemoryStore(store.path)  # a second handle on the same file, as a face would have
    await asyncio.gather(
        *((store if n % 2 else other).aadd_if_absent(make_record(n)) for n in range(30))
    )
    assert sorted(r.id for r in store.load()) == [f"mem-{n:016x}" for n in range(30)]


def test_unwritable_folder_is_a_clear_store_error(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("x")  # a file where the folder should be: fails even for root
        store = MemoryStore(blocker / "memory" / "records.json")
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
        store = MemoryStore(folder / "memory" / "records.json")
    with pytest.raises(MemoryStoreError, match="cannot write memory store"):
        store.add_if_absent(make_record(1))


# -- regressions from adversarial input ----------------------------------------


DEEP_JSON = "[" * 100_000


def _record(index: int, created_at: str) -> dict:
    return {
        "id": f"mem-{index:016x}",
        "scope": "global",
        "key": f"k{index}",
        "lesson": "a lesson",
        "evidenceRefs": ["session:s"],
        "appliesWhen": [],
        "avoidWhen": [],
        "confidence": 0.6,
        "createdAt": created_at,
        "approved": False,
    }


@pytest.mark.parametrize(
    "text",
    [
        DEEP_JSON,
        "{}",
        '{"records": []}',
        '{"version": 1}',
        '{"version": true, "records": []}',
    ],
    ids=["deep-nesting", "empty-object", "no-version", "no-records", "version-true"],
)
def test_invalid_records_file_is_reported_and_never_overwritten(tmp_path, text):
    path = tmp_path / "records.json"
    path.write_text(text, encoding="utf-8")
    before = path.read_bytes()
    store = MemoryStore(path)
    with pytest.raises(MemoryStoreCorrupt):
        store.load()
    with pytest.raises(MemoryStoreCorrupt):
        store.add_if_absent(MemoryRecord.model_validate(_record(1, "2026-01-01T00:00:00.000Z")))
    assert path.read_bytes() == before


def test_memory_list_cli_reports_a_deeply_nested_records_file(invoke_cli, isolated_dirs):
    path = isolated_dirs["data"] / "memory" / "records.json"
    path.parent.mkdir(parents=True)
    path.write_text(DEEP_JSON, encoding="utf-8")
    done = invoke_cli("memory", "list")
    assert done.returncode == 1
    assert "is invalid and was left untouched" in done.stderr
    assert "Traceback" not in done.stderr
    assert path.read_text(encoding="utf-8") == DEEP_JSON


def test_prune_and_approve_work_on_a_store_already_over_the_cap(tmp_path):
    path = tmp_path / "records.json"
    records = [
        _record(i, "2020-01-01T00:00:00.000Z" if i < 5 else "2099-01-01T00:00:00.000Z")
        for i in range(510)
    ]
    path.write_text(json.dumps({"version": 1, "records": records}), encoding="utf-8")
    store = MemoryStore(path)
    removed = store.prune_stale()  # the remedy the cap error names must not be refused
    assert len(removed) == 5
    assert len(store.load()) == 505
    assert store.approve(f"mem-{100:016x}").approved is True


def test_a_store_over_the_cap_still_refuses_to_grow(tmp_path):
    path = tmp_path / "records.json"
    records = [_record(i, "2099-01-01T00:00:00.000Z") for i in range(500)]
    path.write_text(json.dumps({"version": 1, "records": records}), encoding="utf-8")
    with pytest.raises(MemoryStoreLimit):
        MemoryStore(path).add_if_absent(
            MemoryRecord.model_validate(_record(999, "2099-01-01T00:00:00.000Z"))
        )


def test_store_still_writes_version_and_records(tmp_path):
    path = tmp_path / "records.json"
    MemoryStore(path).add_if_absent(
        MemoryRecord.model_validate(_record(1, "2026-01-01T00:00:00.000Z"))
    )
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 1 and len(data["records"]) == 1


def test_temp_files_of_killed_writers_are_swept(tmp_path) -> None:
    from clio_acp.memory.store import MemoryStore

    path = tmp_path / "records.json"
    stale = [tmp_path / ".records.json.abc123.tmp", tmp_path / ".records.json.zz.tmp"]
    for item in stale:
        item.write_text("{")
    other = tmp_path / "notes.tmp"
    other.write_text("keep")
    assert MemoryStore(path).sweep() == 2
    assert not any(item.exists() for item in stale) and other.exists()
    stale[0].write_text("{")
    MemoryStore(path).prune_stale()  # any write sweeps too (under the lock)
    assert not stale[0].exists()
