"""``clio_acp.atomic``: temp file in the same folder, fsync, rename, folder fsync
(ARCHITECTURE.md invariant 8), and the only place in the package that does it."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from clio_acp.atomic import atomic_open, write_atomic
from tests.conftest import REPO_ROOT


def test_write_replaces_contents_and_leaves_no_temp_file(tmp_path: Path):
    target = tmp_path / "records.json"
    target.write_text("old\n", encoding="utf-8")
    write_atomic(target, "new ✓\n")
    assert target.read_bytes() == "new ✓\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.json"]


def test_bytes_are_written_unchanged(tmp_path: Path):
    target = tmp_path / "model.gguf"
    write_atomic(target, b"\x00\xff\r\n")
    assert target.read_bytes() == b"\x00\xff\r\n"


def test_surrogateescape_carries_undecodable_bytes_through(tmp_path: Path):
    raw = b"ok\n\xff\xfe broken\n"
    target = tmp_path / "ring.jsonl"
    text = raw.decode("utf-8", errors="surrogateescape")
    write_atomic(target, text, errors="surrogateescape")
    assert target.read_bytes() == raw


def test_a_failing_write_leaves_the_old_file_and_no_temp(tmp_path: Path):
    target = tmp_path / "records.json"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_open(target) as out:
        out.write("half of the new")
        raise RuntimeError("killed mid-write")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.json"]


def test_unencodable_text_leaves_the_old_file(tmp_path: Path):
    target = tmp_path / "records.json"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "lone \udcff surrogate")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.json"]


def test_missing_folder_is_an_os_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "absent" / "x.json", "{}")


def test_temp_file_is_in_the_destination_folder_with_the_given_prefix(tmp_path: Path):
    target = tmp_path / "handoff.md"
    with atomic_open(target, temp_prefix=".handoff-") as out:
        (temp,) = [p.name for p in tmp_path.iterdir()]
        out.write("x")
    assert temp.startswith(".handoff-") and temp.endswith(".tmp")


def test_file_then_folder_are_fsynced_after_the_data(tmp_path: Path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_atomic(tmp_path / "records.json", "{}")
    assert synced == ["file", "dir"]


def test_no_other_module_writes_temp_files_and_renames_itself():
    """One helper: a second hand-written temp+rename (which tends to forget the folder
    fsync) fails here. Log rotation (``os.replace`` of a whole file) is not a write."""
    offenders = []
    for path in sorted((REPO_ROOT / "clio_acp").rglob("*.py")):
        if path.name == "atomic.py" and path.parent.name == "clio_acp":
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"\bmkstemp\(|NamedTemporaryFile\(|\bfsync\(", text):
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert offenders == []
