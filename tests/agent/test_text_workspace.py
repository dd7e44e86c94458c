"""The named text workspace tools over a real journal (issue 19 item 1): limits in the
descriptions, a write replaces, reads by offset of at most 32,768 characters, list
pages of at most 100 keys with a cursor, errors for unknown keys, bad offsets and bad
cursors, redaction before storage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clio_acp.agent.tools import (
    BUILTIN_TOOLS,
    LocalToolHost,
    ToolContext,
    ToolInputError,
    ToolRegistry,
    Workspace,
)
from clio_acp.agent.tools import text_workspace as tw
from clio_acp.agent.tools.text_workspace import WORKSPACE_TOOLS
from clio_acp.session.journal import Journal

SID = "sess_text_workspace"


@pytest.fixture
async def run(tmp_path: Path):
    journal = await Journal.open(tmp_path / "sessions.sqlite")
    registry = ToolRegistry((*BUILTIN_TOOLS, *WORKSPACE_TOOLS))
    ctx = ToolContext(
        workspace=Workspace.create(tmp_path),
        host=LocalToolHost(),
        session_id=SID,
        spill_store=journal,
        values=journal,
    )

    async def call(name: str, **arguments):
        args = registry.parse_args(name, json.dumps(arguments))
        return await registry.execute(name, args, ctx)

    call.journal = journal  # type: ignore[attr-defined]
    yield call
    await journal.aclose()


def test_descriptions_state_the_limits_and_the_registry_offers_all_four():
    schemas = {
        s["function"]["name"]: s["function"] for s in ToolRegistry(WORKSPACE_TOOLS).schemas()
    }
    assert set(schemas) == {
        "workspace_write",
        "workspace_read",
        "workspace_list",
        "workspace_delete",
    }
    assert "32768" in schemas["workspace_read"]["description"]
    assert "100" in schemas["workspace_list"]["description"]
    props = schemas["workspace_read"]["parameters"]["properties"]
    assert props["max_chars"]["maximum"] == 32_768 and props["offset"]["minimum"] == 0
    assert schemas["workspace_list"]["parameters"]["properties"]["max_entries"]["maximum"] == 100


async def test_a_write_replaces_and_a_read_returns_the_value(run):
    first = await run("workspace_write", key="plan", value="step 1")
    assert first.disposition.ok and "Stored 'plan' (6 chars)" in first.output
    again = await run("workspace_write", key="plan", value="step 1, step 2")
    assert "replaced 6 chars" in again.output
    read = await run("workspace_read", key="plan")
    assert read.disposition.ok and read.output == "step 1, step 2"


async def test_a_long_value_is_read_in_slices_of_at_most_32768_chars(run):
    value = "".join(chr(0x41 + i % 26) for i in range(70_000))
    await run("workspace_write", key="big", value=value)
    first = await run("workspace_read", key="big")
    body, note = first.output.rsplit("\n", 1)
    assert body == value[:32_768]
    assert note == "[chars 0-32768 of 70000; read on with offset=32768]"
    last = await run("workspace_read", key="big", offset=65_536)
    assert last.output == value[65_536:]
    small = await run("workspace_read", key="big", offset=10, max_chars=5)
    assert small.output.startswith(value[10:15] + "\n[chars 10-15 of 70000")


@pytest.mark.parametrize("offset", [6, 7, 1_000])
async def test_an_offset_at_or_past_the_end_is_an_error(run, offset):
    await run("workspace_write", key="short", value="abcdef")
    result = await run("workspace_read", key="short", offset=offset)
    assert not result.disposition.ok and "past the end of 'short' (6 chars" in result.output


@pytest.mark.parametrize("arguments", [{"offset": -1}, {"max_chars": 32_769}, {"max_chars": 0}])
async def test_a_negative_offset_or_oversized_read_is_refused_by_the_schema(run, arguments):
    with pytest.raises(ToolInputError, match="invalid arguments for workspace_read"):
        await run("workspace_read", key="x", **arguments)


async def test_unknown_keys_are_errors_for_read_and_delete(run):
    read = await run("workspace_read", key="nope")
    delete = await run("workspace_delete", key="nope")
    for result in (read, delete):
        assert not result.disposition.ok and "unknown workspace key 'nope'" in result.output


async def test_list_pages_hold_at_most_100_keys_and_the_cursor_continues(run):
    for i in range(230):
        await run("workspace_write", key=f"k{i:03d}", value=str(i))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        args = {"cursor": cursor} if cursor else {}
        page = await run("workspace_list", **args)
        lines = page.output.splitlines()
        more = lines[-1] if lines[-1].startswith("[more keys") else None
        keys = [line.split(" ", 1)[0] for line in (lines[:-1] if more else lines)]
        assert len(keys) <= 100
        seen += keys
        pages += 1
        if more is None:
            break
        cursor = more.split('cursor="', 1)[1].rstrip('")]')
    assert pages == 3 and seen == [f"k{i:03d}" for i in range(230)]
    first = (await run("workspace_list", max_entries=1)).output.splitlines()
    assert first[0].startswith("k000 (1 chars, updated 20") and len(first) == 2


async def test_a_bad_cursor_is_an_error(run):
    result = await run("workspace_list", cursor="not-a-cursor")
    assert not result.disposition.ok and "invalid cursor" in result.output


async def test_an_empty_workspace_lists_nothing(run):
    assert (await run("workspace_list")).output == "(no workspace values)"


async def test_delete_removes_the_key(run):
    await run("workspace_write", key="tmp", value="x" * 12)
    result = await run("workspace_delete", key="tmp")
    assert result.disposition.ok and "Deleted 'tmp' (12 chars)" in result.output
    assert not (await run("workspace_read", key="tmp")).disposition.ok


async def test_secrets_are_redacted_before_the_value_is_stored(run):
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    result = await run("workspace_write", key="creds", value=f"use token {token} for the API")
    assert "redacted" in result.output
    stored = await run.journal.workspace_get(SID, "creds")
    assert token not in stored and "[redacted:" in stored


@pytest.mark.parametrize("key", ["", "   ", "a" * 201, "bad\nkey"])
async def test_unusable_keys_are_errors(run, key):
    result = await run("workspace_write", key=key, value="v")
    assert not result.disposition.ok


async def test_keys_are_trimmed_so_a_stray_space_finds_the_same_value(run):
    await run("workspace_write", key=" notes ", value="kept")
    assert (await run("workspace_read", key="notes")).output == "kept"


async def test_the_session_cap_refuses_a_new_key_but_allows_replacing(run, monkeypatch):
    monkeypatch.setattr(tw, "SESSION_MAX_ENTRIES", 3)
    for key in ("a", "b", "c"):
        await run("workspace_write", key=key, value=key)
    refused = await run("workspace_write", key="d", value="d")
    assert not refused.disposition.ok and "holds 3 values" in refused.output
    assert (await run("workspace_write", key="a", value="again")).disposition.ok


async def test_an_oversized_value_is_refused(run, monkeypatch):
    monkeypatch.setattr(tw, "VALUE_MAX_CHARS", 10)
    result = await run("workspace_write", key="k", value="x" * 11)
    assert not result.disposition.ok and "at most 10" in result.output


async def test_values_belong_to_their_session_and_fork_copies_them(run):
    await run("workspace_write", key="mine", value="v")
    journal = run.journal
    assert await journal.workspace_get("sess_other", "mine") is None
    copied = await journal.copy_history(SID, "sess_fork")
    assert copied == 0 and await journal.workspace_get("sess_fork", "mine") == "v"
    await journal.delete_session(SID)
    assert await journal.workspace_get(SID, "mine") is None
