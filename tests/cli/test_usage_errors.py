"""Ordinary command-line mistakes are usage errors (exit 2) with a clear message."""

from __future__ import annotations

import asyncio
import json

import pytest


def test_run_with_unknown_target_is_usage_error_before_any_session(invoke_cli) -> None:
    proc = invoke_cli("run", "--target", "nope", "hi")
    assert proc.returncode == 2, proc.stderr
    assert "no target 'nope' (known: " in proc.stderr
    assert "Traceback" not in proc.stderr
    listed = invoke_cli("sessions", "--json")
    assert json.loads(listed.stdout)["sessions"] == []


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_sessions_limit_below_one_is_usage_error(invoke_cli, limit: str) -> None:
    proc = invoke_cli("sessions", "--limit", limit)
    assert proc.returncode == 2
    assert "--limit" in proc.stderr and "at least 1" in proc.stderr


def test_events_unknown_type_is_usage_error_listing_valid_types(invoke_cli) -> None:
    proc = invoke_cli("events", "sess_x", "--type", "bogus")
    assert proc.returncode == 2
    assert "bogus" in proc.stderr
    assert "tool_result" in proc.stderr and "memory_step" in proc.stderr


def test_unknown_log_level_is_usage_error(invoke_cli) -> None:
    proc = invoke_cli("--log-level", "bogus", "sessions")
    assert proc.returncode == 2
    assert "--log-level" in proc.stderr and "WARNING" in proc.stderr
    assert invoke_cli("--log-level", "debug", "sessions").returncode == 0


def test_events_with_ambiguous_prefix_names_the_matches(invoke_cli) -> None:
    from clio_acp.paths import resolve_paths
    from clio_acp.session.journal import Journal, SessionRecord

    ids = ["sess_abc111", "sess_abc222"]

    async def seed() -> None:
        paths = resolve_paths()
        paths.journal_file.parent.mkdir(parents=True, exist_ok=True)
        journal = await Journal.open(paths.journal_file)
        try:
            for sid in ids:
                stamp = "2026-01-01T00:00:00.000Z"
                await journal.create_session(
                    SessionRecord(id=sid, cwd="/tmp", created_at=stamp, updated_at=stamp)
                )
        finally:
            await journal.aclose()

    asyncio.run(seed())
    proc = invoke_cli("events", "sess_abc")
    assert proc.returncode == 2, proc.stderr
    assert "ambiguous" in proc.stderr
    assert all(sid in proc.stderr for sid in ids)
    assert invoke_cli("events", "sess_abc1").returncode == 0
