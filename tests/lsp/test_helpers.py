"""The LSP face's pure helpers: options parsing, the diagnostics store, path scrubbing,
reminder placement and the memory document layout. No server, no subprocess."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from clio_acp.events import MemoryProposal, MemoryReminder, MessageChunk
from clio_acp.lsp.diagnostics import DiagnosticsStore
from clio_acp.lsp.memory_doc import render_memory_document, write_atomically
from clio_acp.lsp.options import InitializationOptions, parse_options
from clio_acp.lsp.protocol import sanitize_error, scrub_paths
from clio_acp.lsp.translate import (
    MEMORY_SOURCE,
    line_range,
    reminder_diagnostic,
    reminder_files,
    same_diagnostic,
    session_update,
)


def _diag(message: str, line: int = 0) -> types.Diagnostic:
    pos = types.Position(line=line, character=0)
    return types.Diagnostic(range=types.Range(start=pos, end=pos), message=message)


def test_options_default_when_absent_and_unwrap_the_clio_section():
    assert parse_options(None) == (InitializationOptions(), None)
    options, problem = parse_options({"clio": {"memoryDocument": False}})
    assert problem is None and options.memory_document is False


def test_invalid_options_keep_the_previous_values_and_name_every_bad_key():
    base = InitializationOptions(progress=False)
    options, problem = parse_options({"progress": 3, "diagnostics": {"severity": "x"}}, base=base)
    assert options is base
    assert "progress" in problem and "diagnostics.severity" in problem
    assert "previous settings" in problem


def test_store_publishes_the_merged_set_per_uri_and_empty_sets_on_clear():
    published: list[tuple[str, list[str]]] = []
    store = DiagnosticsStore(lambda uri, ds: published.append((uri, [d.message for d in ds])))
    store.add("a", "file:///x", _diag("one"))
    store.add("b", "file:///x", _diag("two"))
    store.add("a", "file:///y", _diag("three"))
    assert published[-2] == ("file:///x", ["one", "two"])
    published.clear()
    store.clear("a")
    assert sorted(published) == [("file:///x", ["two"]), ("file:///y", [])]


def test_store_keeps_only_the_last_n_per_source_and_uri():
    store = DiagnosticsStore(lambda uri, ds: None)
    for i in range(5):
        store.add("a", "file:///x", _diag(str(i)), keep_last=3)
    assert [d.message for d in store.get("file:///x")] == ["2", "3", "4"]


def test_scrub_paths_removes_local_paths_and_file_uris_but_keeps_method_names():
    text = (
        "memory store /home/me/.local/share/clio-acp/memory/records.json is bad (file:///tmp/a/b)"
    )
    scrubbed = scrub_paths(text)
    assert "/home/me" not in scrubbed and "file://" not in scrubbed
    assert scrub_paths("textDocument/codeAction and $/cancelRequest") == (
        "textDocument/codeAction and $/cancelRequest"
    )
    assert "C:\\Users" not in scrub_paths(r"cannot open C:\Users\me\x.txt")


def test_sanitize_error_drops_the_traceback_and_extra_lines():
    error = types.ResponseError(
        code=-32603,
        message="ValueError: bad /srv/app/x.py\nmore",
        data={"traceback": ['File "/srv/app/x.py", line 1']},
    )
    clean = sanitize_error(error)
    assert clean.message == "ValueError: bad <path>"
    assert clean.data is None


def test_reminder_files_are_the_workspace_files_it_names_with_their_lines(
    tmp_path: Path,
):
    named = MemoryReminder(
        session_id="s",
        text="Memory: x",
        paths=[str(tmp_path / "a.py"), "rel.py", "/elsewhere/b.py", str(tmp_path / "c.py")],
        lines=[7, None, 2],
    )
    # Relative and outside-the-workspace paths are not shown; a missing line is 0.
    assert reminder_files(named, tmp_path) == [(tmp_path / "a.py", 7), (tmp_path / "c.py", 0)]
    legacy = MemoryReminder(
        session_id="s", text="Memory: x", paths=[str(tmp_path / "a.py")], line=4
    )
    assert reminder_files(legacy, tmp_path) == [(tmp_path / "a.py", 4)]
    assert reminder_files(MemoryReminder(session_id="s", text="Memory: y"), tmp_path) == []


def test_line_range_counts_in_the_negotiated_units():
    text = "    x = 'bäd_😀'  "

    def utf16(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2

    def utf8(s: str) -> int:
        return len(s.encode("utf-8"))

    wide = line_range(text, 2, utf16)
    assert (wide.start.line, wide.start.character, wide.end.character) == (2, 4, 16)
    narrow = line_range(text, 2, utf8)
    assert (narrow.start.character, narrow.end.character) == (4, 19)
    blank = line_range(None, 5, utf16)
    assert blank.start == blank.end and blank.start.character == 0


def test_reminder_diagnostic_carries_trigger_cited_entries_and_proposal():
    reminder = MemoryReminder(
        session_id="s", text="Memory: z", cited_entries=["k1"], trigger="repeated_failure"
    )
    d = reminder_diagnostic(reminder, 2, severity="hint", proposal_id="mem-1")
    assert d.source == MEMORY_SOURCE and d.code == "repeated_failure"
    assert d.severity == types.DiagnosticSeverity.Hint
    assert d.data["citedEntries"] == ["k1"] and d.data["proposalId"] == "mem-1"
    moved = reminder_diagnostic(reminder, 9, severity="hint", proposal_id=None)
    assert same_diagnostic(d, moved)  # ranges never take part in matching


def test_session_update_is_the_event_in_camel_case():
    params = session_update(MessageChunk(session_id="s", message_id="m", text="hi"), replay=True)
    assert params == {
        "sessionId": "s",
        "type": "message_chunk",
        "messageId": "m",
        "text": "hi",
        "replay": True,
    }


def test_memory_document_lists_bank_proposals_and_reminders_never_status(tmp_path: Path):
    rendered = render_memory_document(
        session_id="s1",
        board={
            "tier": "rules",
            "status": {"content": "SECRET STATUS"},
            "bank": {
                "status": {"content": "SECRET STATUS"},
                "knowledge": [{"id": "k1", "content": "use  uv", "injectionCount": 2}],
                "procedural": [],
            },
        },
        reminders=[MemoryReminder(session_id="s1", text="Memory: rerun", trigger="interval")],
        proposals=[MemoryProposal(session_id="s1", record_id="mem-1", scope="repo", content="c")],
    )
    lines = rendered.text.splitlines()
    assert "SECRET STATUS" not in rendered.text
    assert "- [k1] use uv (cited 2×)" in lines
    assert lines[rendered.proposal_lines["mem-1"]].startswith("- [mem-1] (repo) c")
    assert lines[rendered.reminder_lines[0]].startswith("- Memory: rerun")
    path = tmp_path / "d" / "memory.md"
    assert write_atomically(path, rendered.text) is True
    assert write_atomically(path, rendered.text) is False
    assert path.read_text(encoding="utf-8") == rendered.text
