"""``clio-acp replay --jobs N`` (issue 18 part 3): the files fanned out over worker
processes give the same report, in the same order, as one process; usage errors and
the text report.

The ``--jobs`` runs are real subprocesses (the option is about processes); the serial
reports they are compared with, usage errors and the report's layout run in process
(``invoke_cli``: the same command without a Python start). The recordings are read
from ``../shared/trajectories`` (never copied)."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED
from tests.support.recordings import openhands_instances_file

TRAJ = SHARED / "trajectories"
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _files(bogus) -> list[str]:
    mini = TRAJ / "mini-swe-agent-gemini3-swebv"
    return [
        str(mini / "django__django-16263.traj.json"),
        str(bogus),
        str(TRAJ / "openhands-swebl-gpt5" / "output.jsonl"),
        str(mini / "astropy__astropy-12907.traj.json"),
        str(TRAJ / "pma-tb2" / "regex-log" / "baseline-sonnet" / "trajectory_agent.steps.jsonl"),
        str(mini / "sphinx-doc__sphinx-9711.traj.json"),
    ]


def _without_clock(value):
    """The report minus wall-clock timestamps (createdAt, lastTouchedAt)."""
    if isinstance(value, dict):
        return {
            k: _without_clock(v)
            for k, v in value.items()
            if not (isinstance(v, str) and _TIMESTAMP.match(v))
        }
    if isinstance(value, list):
        return [_without_clock(v) for v in value]
    return value


def test_jobs_give_the_serial_report_in_the_same_order(run_cli, invoke_cli, tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello\n")
    serial = invoke_cli("replay", "--json", *_files(bogus))
    fanned = run_cli("replay", "--json", "--jobs", "2", *_files(bogus), timeout=300)
    assert serial.returncode == fanned.returncode == 1  # the bogus file, reported by both
    for result in (serial, fanned):
        assert result.stderr.count("unknown trajectory format") == 1
    reports = [[json.loads(line) for line in r.stdout.splitlines()] for r in (serial, fanned)]
    assert [r["instance"] for r in reports[1]] == [r["instance"] for r in reports[0]]
    assert len(reports[0]) >= 5
    assert sum(r["summary"]["reminders"] for r in reports[0]) > 0
    assert _without_clock(reports[1]) == _without_clock(reports[0])


def test_jobs_must_be_a_positive_number(invoke_cli):
    result = invoke_cli("replay", "--jobs", "0", "x.json")
    assert result.returncode == 2
    assert "--jobs" in result.stderr


def test_compact_every_must_be_a_positive_number(invoke_cli):
    # -3 used to simulate a compaction at every third call (n % -3 == 0) and 0 to turn
    # the option off silently; both are usage errors now, like --jobs 0.
    for value in ("-3", "0"):
        result = invoke_cli("replay", "--compact-every", value, "x.json")
        assert result.returncode == 2, value
        assert "--compact-every" in result.stderr and "at least 1" in result.stderr


def test_a_restore_stays_inside_its_recording_in_the_text_report(invoke_cli):
    # The post-compaction restore lists one bank entry a line; those lines used to start
    # at column 0 ("- [tm-s-2] status: …"), reading like new report entries.
    traj = TRAJ / "mini-swe-agent-gemini3-swebv" / "django__django-16560.traj.json"
    result = invoke_cli("replay", "--compact-every", "40", str(traj))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("django__django-16560 (mini-swe-agent):")
    assert lines[-1].startswith("TOTAL: 1 files")
    assert any("post_compaction" in line for line in lines)
    body = lines[1:-1]
    assert any(line.startswith("        - [tm-s-") for line in body)
    assert all(line.startswith("  ") for line in body)


def test_jobs_report_is_byte_identical_to_serial_with_compactions(run_cli, invoke_cli):
    # Replay reads a replay clock (agent/replay.py): the two pma runs with many bank
    # writes per millisecond used to list and restore entries in varying order.
    files = [
        str(TRAJ / "pma-tb2" / name / "memory-v3-opus" / "trajectory_agent.steps.jsonl")
        for name in ("git-multibranch", "sqlite-with-gcov")
    ]
    args = ("replay", "--json", "--compact-every", "5", *files, *files)
    serial = invoke_cli(*args)
    fanned = run_cli(*args[:1], "--jobs", "2", *args[1:], timeout=300)
    assert serial.returncode == fanned.returncode == 0, serial.stderr + fanned.stderr
    assert fanned.stdout == serial.stdout
    lines = serial.stdout.splitlines()
    assert len(lines) == 4 and lines[0] == lines[2] and lines[1] == lines[3]


def test_jobs_share_one_file_of_many_instances_and_keep_its_order(run_cli, invoke_cli, tmp_path):
    path = openhands_instances_file(tmp_path)
    serial = invoke_cli("replay", "--json", str(path))
    assert serial.returncode == 0, serial.stderr
    instances = [json.loads(line)["instance"] for line in serial.stdout.splitlines()]
    assert instances == [f"instance-{n}" for n in range(5)]
    for jobs in ("2", "3"):
        fanned = run_cli("replay", "--json", "--jobs", jobs, str(path), timeout=300)
        assert fanned.returncode == 0, fanned.stderr
        assert fanned.stdout == serial.stdout


def test_a_bad_line_in_a_shared_file_is_reported_as_one_process_reports_it(
    run_cli, invoke_cli, tmp_path
):
    path = openhands_instances_file(tmp_path, bad_line=4)
    serial = invoke_cli("replay", "--json", str(path))
    fanned = run_cli("replay", "--json", "--jobs", "2", str(path), timeout=300)
    assert serial.returncode == fanned.returncode == 1
    assert fanned.stdout == serial.stdout == ""
    assert ":4: not a JSON line" in serial.stderr
    assert fanned.stderr.splitlines()[-1] == serial.stderr.splitlines()[-1]


def test_a_many_instance_file_is_split_into_interleaved_shares(tmp_path):
    from clio_acp.agent.recordings import load_recordings
    from clio_acp.cli.replay_cmd import _interleaved, _many_instances

    path = openhands_instances_file(tmp_path, count=5)
    assert _many_instances(path, "auto") and _many_instances(path, "openhands")
    assert not _many_instances(path, "pma")
    mini = TRAJ / "mini-swe-agent-gemini3-swebv" / "astropy__astropy-12907.traj.json"
    assert not _many_instances(mini, "auto")
    shares = [[r.name for r in load_recordings(path, part=(i, 3))] for i in range(3)]
    assert shares == [["instance-0", "instance-3"], ["instance-1", "instance-4"], ["instance-2"]]
    assert _interleaved(shares) == [f"instance-{n}" for n in range(5)]
    # A one-recording file lives in share 0 only.
    assert [len(load_recordings(mini, part=(i, 2))) for i in range(2)] == [1, 0]


def _many_instances_by_lines(data: bytes) -> bool:
    """``_many_instances``' definition, line by line: the first non-blank line holds
    ``"history"`` and another non-blank line follows."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    return len(lines) >= 2 and b'"history"' in lines[0]


_PEEK_PIECES = [b"", b" ", b"\t", b"\r", b"\x0b", b"\n", b"{", b"x", b"\xff", b'"history"']


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_PEEK_PIECES), max_size=14))
def test_the_many_instance_peek_is_its_line_by_line_definition(tmp_path, pieces):
    """The parent maps each file and searches bytes; the verdict is the one reading
    its lines gives (empty files, blank-only lines, "history" on a later line)."""
    from clio_acp.cli.replay_cmd import _many_instances

    data = b"".join(pieces)
    path = tmp_path / "output.jsonl"
    path.write_bytes(data)
    assert _many_instances(path, "auto") == _many_instances_by_lines(data), data


def test_a_one_instance_openhands_file_goes_to_one_worker(tmp_path):
    from clio_acp.cli.replay_cmd import _many_instances

    one = openhands_instances_file(tmp_path, count=1)
    assert not _many_instances(one, "auto")
    one.write_text(one.read_text() + "\n \n")  # blank lines after it are no instance
    assert not _many_instances(one, "auto")
    assert _many_instances(openhands_instances_file(tmp_path, count=2), "openhands")


def test_jobs_workers_on_linux_are_forked_from_the_process_that_imported_replay():
    """Forked workers start with the replay modules imported (forkserver, the default
    from Python 3.14, or spawn would import them again in every worker)."""
    import sys

    from clio_acp.cli.replay_cmd import _worker_context

    context = _worker_context()
    if sys.platform == "linux":
        assert context.get_start_method() == "fork"
    else:
        assert context is None


def test_jobs_over_more_files_than_are_kept_in_flight_keep_the_serial_order(run_cli, invoke_cli):
    """``--jobs 2`` keeps 2 × FILES_AHEAD (8) files submitted at a time; with 11 files
    the window slides, and the report is still the serial one, byte for byte."""
    from clio_acp.cli.replay_cmd import FILES_AHEAD

    small = TRAJ / "pma-tb2" / "regex-log" / "baseline-sonnet" / "trajectory_agent.steps.jsonl"
    other = TRAJ / "pma-tb2" / "regex-log" / "memory-v3-opus" / "trajectory_agent.steps.jsonl"
    files = [str(small if n % 3 else other) for n in range(2 * FILES_AHEAD + 3)]
    serial = invoke_cli("replay", "--json", *files)
    fanned = run_cli("replay", "--json", "--jobs", "2", *files, timeout=300)
    assert serial.returncode == fanned.returncode == 0, serial.stderr + fanned.stderr
    assert fanned.stdout == serial.stdout
    assert len(serial.stdout.splitlines()) == len(files)


def test_html_timeline_of_an_instance_id_that_occurs_twice_is_each_ones_own(invoke_cli, tmp_path):
    """An output.jsonl can hold the same instance twice (a rerun appended). The page
    paired recordings with reports by name, so both got the last run's timeline: here
    the first run's 19 calls were missing from the page."""
    source = (TRAJ / "openhands-swebl-gpt5" / "output.jsonl").read_text(encoding="utf-8")
    record = json.loads(next(line for line in source.splitlines() if line.strip()))
    rerun = {**record, "history": [e for e in record["history"] if e.get("source") != "agent"]}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(rerun) + "\n", encoding="utf-8")
    out = tmp_path / "report.html"
    result = invoke_cli("replay", "--json", "--html", str(out), str(path))
    assert result.returncode == 0, result.stderr
    calls = [json.loads(line)["summary"]["toolCalls"] for line in result.stdout.splitlines()]
    assert calls == [19, 0]
    assert out.read_text(encoding="utf-8").count("<details><summary>output (") == 19


def test_a_fifo_among_the_files_is_one_error_line_serial_and_with_jobs(invoke_cli, tmp_path):
    """``--jobs`` peeked at a FIFO's first line to decide on sharing it out: with no
    writer, the open blocked for ever."""
    import os

    from clio_acp.cli.replay_cmd import _many_instances
    from tests.agent.test_recordings import _unblock_later

    fifo = tmp_path / "output.jsonl"
    os.mkfifo(fifo)
    unblock = _unblock_later(fifo)  # a regression fails instead of hanging
    assert not _many_instances(fifo, "auto")  # returns: nothing opened
    mini = TRAJ / "mini-swe-agent-gemini3-swebv" / "astropy__astropy-12907.traj.json"
    result = invoke_cli("replay", str(fifo), str(mini))
    assert result.returncode == 1
    assert f"{fifo}: not a regular file" in result.stderr
    assert "TOTAL: 1 files, 19 tool calls" in result.stdout
    unblock.set()


def test_jobs_over_gzipped_files_give_the_serial_report(run_cli, invoke_cli, tmp_path):
    import gzip

    plain = openhands_instances_file(tmp_path, count=3)
    packed = tmp_path / "output.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    mini = TRAJ / "mini-swe-agent-gemini3-swebv" / "astropy__astropy-12907.traj.json"
    mini_gz = tmp_path / mini.name
    mini_gz = mini_gz.with_name(mini.name + ".gz")
    mini_gz.write_bytes(gzip.compress(mini.read_bytes()))
    expected = invoke_cli("replay", "--json", str(plain), str(mini))
    serial = invoke_cli("replay", "--json", str(packed), str(mini_gz))
    fanned = run_cli("replay", "--json", "--jobs", "2", str(packed), str(mini_gz), timeout=300)
    assert expected.returncode == serial.returncode == fanned.returncode == 0, serial.stderr
    assert fanned.stdout == serial.stdout
    files = {str(plain): str(packed), str(mini): str(mini_gz)}
    reports = [json.loads(line) for line in expected.stdout.splitlines()]
    assert [{**r, "file": files[r["file"]]} for r in reports] == [
        json.loads(line) for line in serial.stdout.splitlines()
    ]
    assert len(reports) == 4


def test_a_file_whose_name_is_not_utf8_is_reported_as_text_json_and_html(invoke_cli, tmp_path):
    """A Latin-1 file name reaches Python as surrogate escapes (os.fsdecode): a strict
    UTF-8 stdout (the usual locale; tests capture it so) refused the report and the
    page write failed, both with a UnicodeEncodeError traceback. The name's bytes read
    as U+FFFD."""
    import os

    mini = TRAJ / "mini-swe-agent-gemini3-swebv" / "astropy__astropy-12907.traj.json"
    record = json.loads(mini.read_text(encoding="utf-8"))
    del record["instance_id"]  # named by its file
    path = tmp_path / os.fsdecode(b"caf\xe9.traj.json")
    path.write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "report.html"
    text = invoke_cli("replay", "--html", str(out), str(path))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("caf\ufffd (mini-swe-agent): 19 tool calls")
    assert "caf\ufffd" in out.read_text(encoding="utf-8")
    (report,) = [
        json.loads(line) for line in invoke_cli("replay", "--json", str(path)).stdout.splitlines()
    ]
    assert report["instance"] == "caf\ufffd" and report["file"].endswith("caf\ufffd.traj.json")
