"""``clio-acp workspace SESSION [KEY]`` as a real subprocess over a journal a session core
wrote (issue 19 item 1): key pages with a cursor, a value by offset, JSON, errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clio_acp.paths import resolve_paths
from clio_acp.session.journal import Journal, SessionRecord, utc_now

SID = "sess_cli_workspace_0001"


def _journal_with(values: dict[str, str], tmp_path: Path) -> None:
    async def fill() -> None:
        journal = await Journal.open(resolve_paths().journal_file)
        try:
            now = utc_now()
            await journal.create_session(
                SessionRecord(id=SID, cwd=str(tmp_path), created_at=now, updated_at=now)
            )
            for key, value in values.items():
                await journal.workspace_put(SID, key, value, max_entries=1000)
        finally:
            await journal.aclose()

    asyncio.run(fill())


def test_keys_page_with_a_cursor_and_a_value_reads_by_offset(invoke_cli, tmp_path):
    values = {f"k{i:03d}": f"value {i}" for i in range(120)}
    values["long"] = "x" * 40_000
    _journal_with(values, tmp_path)
    first = invoke_cli("workspace", SID[:12])
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("\n") == 100 and first.stdout.startswith("- k000 (7 chars")
    cursor = first.stderr.split("more: --cursor ", 1)[1].strip()
    rest = invoke_cli("workspace", SID, "--cursor", cursor, "--json")
    page = json.loads(rest.stdout)
    assert [v["key"] for v in page["values"]][-1] == "long" and page["nextCursor"] is None
    assert len(page["values"]) == 21
    head = invoke_cli("workspace", SID, "long")
    assert head.stdout == "x" * 32_768 + "\n" and "more: --offset 32768" in head.stderr
    tail = json.loads(invoke_cli("workspace", SID, "long", "--offset", "32768", "--json").stdout)
    assert tail["text"] == "x" * (40_000 - 32_768) and tail["nextOffset"] is None


def test_errors_exit_1_with_the_reason(invoke_cli, tmp_path):
    _journal_with({"a": "b"}, tmp_path)
    for args, reason in (
        (("nope",), "unknown workspace key 'nope'"),
        (("a", "--offset", "5"), "outside"),
        (("--cursor", "bogus"), "invalid cursor"),
    ):
        out = invoke_cli("workspace", SID, *args)
        assert out.returncode == 1 and reason in out.stderr, (args, out.stderr)
    missing = invoke_cli("workspace", "sess_missing")
    assert missing.returncode == 1 and "session not found" in missing.stderr
