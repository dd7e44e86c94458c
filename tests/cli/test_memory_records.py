"""``clio-acp memory list|approve|reject|prune|promote`` (MEMORY_SPEC §6), run in process
(``invoke_cli``: the same ``main`` the console script calls)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from clio_acp.memory.bank import TaskMemoryBank
from clio_acp.memory.handoff import write_handoff_artifact
from clio_acp.memory.promotion import propose_injected_entries
from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.store import MemoryStore
from clio_acp.paths import resolve_paths
from clio_acp.timestamps import format_timestamp

SECRETS = {
    "assignment": "hunter2hunter2",
    "aws": "AKIAABCDEFGHIJKLMNOP",
    "github": "ghp_" + "Q" * 36,
    "sk": "sk-proj-" + "Z" * 24,
    "slack": "xoxb-1234567890-abcdef",
    "google": "AIza" + "G" * 35,
    "jwt": "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.abcdEFGH",
    "pem": "MIIEowIBAAKCAQEA7secretbody",
}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(resolve_paths().records_file)


@pytest.fixture
def handoff(tmp_path: Path) -> Path:
    bank = TaskMemoryBank()
    bank.save("knowledge", "The operator requires visible reminders.")
    bank.save("procedural", "Connect with password=" + SECRETS["assignment"] + " to the db.")
    bank.save("knowledge", "Keys seen: " + SECRETS["aws"] + " and " + SECRETS["github"])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return write_handoff_artifact(
        workspace,
        task="Fix login",
        latest_instruction="go",
        bank=bank,
        session_id="sess-9",
        git_branch="main",
        now=datetime(2026, 11, 29, tzinfo=UTC),
    )


def test_every_verb_has_help(invoke_cli) -> None:
    for verb in ("list", "approve", "reject", "prune", "promote"):
        result = invoke_cli("memory", verb, "--help")
        assert result.returncode == 0, verb
        assert "usage: clio-acp memory " + verb in result.stdout


def test_list_on_a_fresh_install(invoke_cli, isolated_dirs) -> None:
    result = invoke_cli("memory", "list")
    assert result.returncode == 0
    assert result.stdout == "0 memory record(s)\n"
    assert not any(isolated_dirs["data"].iterdir())  # listing writes nothing


def test_promote_approve_reject_list_round_trip(invoke_cli, handoff: Path, tmp_path: Path) -> None:
    repo = str(tmp_path.resolve())
    result = invoke_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "repo", "--repository", repo
    )
    assert result.returncode == 0, result.stderr
    ids = re.findall(r"^proposed (mem-[0-9a-f]{16})", result.stdout, re.M)
    assert len(ids) == 3
    assert "3 new proposal(s), 0 already present" in result.stdout
    again = invoke_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "repo", "--repository", repo
    )
    assert "0 new proposal(s), 3 already present" in again.stdout

    listed = invoke_cli("memory", "list")
    assert listed.stdout.startswith("3 memory record(s)\n")
    assert listed.stdout.count("proposed  repo  confidence=0.6  evidence=session:sess-9") == 3
    assert "key: promotion:handoff-snapshot:sess-9:tm-k-1" in listed.stdout
    assert "lesson: The operator requires visible reminders." in listed.stdout
    assert listed.stdout.count(f"  repository: {repo}") == 3

    assert invoke_cli("memory", "approve", ids[0]).stdout == f"approved {ids[0]}\n"
    assert invoke_cli("memory", "reject", ids[1]).stdout == f"rejected {ids[1]}\n"
    approved_only = invoke_cli("memory", "list", "--status", "approved")
    assert (
        approved_only.stdout.startswith("1 memory record(s)\n") and ids[0] in approved_only.stdout
    )
    data = {r["id"]: r for r in json.loads(invoke_cli("memory", "list", "--json").stdout)}
    assert data[ids[0]]["approved"] is True and "lastVerifiedAt" in data[ids[0]]
    assert "rejectedAt" in data[ids[1]] and data[ids[1]]["approved"] is False
    assert data[ids[2]]["provenance"]["sourceKind"] == "handoff-snapshot"


def test_promote_selected_entries_and_unknown_entry(invoke_cli, handoff: Path, store) -> None:
    ok = invoke_cli(
        "memory",
        "promote",
        "--from-handoff",
        str(handoff),
        "--entry",
        "tm-p-2",
        "--scope",
        "global",
        "--acknowledge-global",
    )
    assert ok.returncode == 0, ok.stderr
    (record,) = store.load()
    assert record.scope == "global" and record.provenance.source_entry_id == "tm-p-2"
    assert record.lesson == "Connect with password=[redacted:assignment] to the db."
    bad = invoke_cli(
        "memory",
        "promote",
        "--from-handoff",
        str(handoff),
        "--entry",
        "tm-k-99",
        "--scope",
        "global",
        "--acknowledge-global",
    )
    assert bad.returncode == 1 and "tm-k-99" in bad.stderr
    assert len(store.load()) == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--scope", "global"], "--acknowledge-global"),
        (["--scope", "repo", "--repository", "/x", "--agent", "a"], "does not belong"),
        (["--scope", "global", "--acknowledge-global", "--repository", "/x"], "does not belong"),
        (["--scope", "runtime", "--acknowledge-global", "--runtime", "r"], "does not belong"),
        (["--scope", "planet"], "invalid choice"),
        ([], "required"),
    ],
)
def test_promote_usage_errors_exit_2(invoke_cli, handoff: Path, flags, message, store) -> None:
    result = invoke_cli("memory", "promote", "--from-handoff", str(handoff), *flags)
    assert result.returncode == 2
    assert message in result.stderr and result.stdout == ""
    assert not store.path.exists()


def test_promote_repo_scope_defaults_to_the_current_repository(
    invoke_cli, handoff: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "project"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    result = invoke_cli(
        "memory", "promote", "--from-handoff", str(handoff), "--scope", "repo", cwd=repo / "src"
    )
    assert result.returncode == 0, result.stderr
    assert f"the current repository, {repo.resolve()}" in result.stderr
    listed = invoke_cli("memory", "list").stdout
    assert listed.count(f"  repository: {repo.resolve()}") == 3


def test_promote_runtime_errors_exit_1(invoke_cli, handoff: Path, tmp_path: Path, store) -> None:
    link = tmp_path / "alias"
    link.symlink_to(tmp_path)
    cases = [
        (["--scope", "repo", "--repository", str(link)], "canonical"),
        (["--scope", "runtime", "--runtime", "node-22"], "does not match"),
    ]
    for flags, message in cases:
        result = invoke_cli("memory", "promote", "--from-handoff", str(handoff), *flags)
        assert result.returncode == 1 and message in result.stderr, result.stderr
    v1 = tmp_path / "handoff-v1.md"
    v1.write_text(
        "```clio-task-memory\n"
        '{"version":1,"knowledge":[{"id":"a","content":"K","injectionCount":0}],"procedural":[]}\n'
        "```\n"
    )
    big = tmp_path / "handoff-big.md"
    big.write_text(handoff.read_text() + "x" * 1_000_001)
    for path, message in ((v1, "v1"), (big, "larger"), (tmp_path / "none.md", "cannot read")):
        result = invoke_cli(
            "memory",
            "promote",
            "--from-handoff",
            str(path),
            "--scope",
            "global",
            "--acknowledge-global",
        )
        assert result.returncode == 1 and message in result.stderr, result.stderr
    assert not store.path.exists()


def test_prune_stale_removes_old_records(invoke_cli, store: MemoryStore) -> None:
    old = format_timestamp(datetime.now(UTC) - timedelta(days=45))
    fresh = format_timestamp(datetime.now(UTC))

    def rec(n: int, created: str) -> MemoryRecord:
        return MemoryRecord.model_validate(
            {
                "id": f"mem-{n:016x}",
                "scope": "global",
                "key": f"k{n}",
                "lesson": "L",
                "evidenceRefs": ["e"],
                "appliesWhen": [],
                "avoidWhen": [],
                "confidence": 0.5,
                "createdAt": created,
                "approved": False,
            }
        )

    store.mutate(lambda _: ([rec(1, old), rec(2, fresh)], None))
    result = invoke_cli("memory", "prune", "--stale")
    assert result.returncode == 0
    assert result.stdout.startswith("pruned 1 stale memory record(s)\n")
    assert [r.id for r in store.load()] == ["mem-0000000000000002"]
    assert invoke_cli("memory", "prune").returncode == 2


def test_corrupt_store_is_reported_by_every_verb_and_preserved(
    invoke_cli, store: MemoryStore, handoff
) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"version": 1, "records": [{"id": 3}]}')
    before = store.path.read_bytes()
    for args in (
        ["memory", "list"],
        ["memory", "approve", "mem-0000000000000001"],
        ["memory", "prune", "--stale"],
        [
            "memory",
            "promote",
            "--from-handoff",
            str(handoff),
            "--scope",
            "global",
            "--acknowledge-global",
        ],
    ):
        result = invoke_cli(*args)
        assert result.returncode == 1, args
        assert "invalid and was left untouched" in result.stderr
        assert str(store.path) in result.stderr
    assert store.path.read_bytes() == before


def test_no_secret_reaches_any_file(invoke_cli, isolated_dirs, tmp_path: Path) -> None:
    bank = TaskMemoryBank()
    bank.save("knowledge", f"Deploy key api_key={SECRETS['assignment']} for staging.")
    bank.save("knowledge", f"AWS {SECRETS['aws']}, GH {SECRETS['github']}, OpenAI {SECRETS['sk']}")
    bank.save(
        "procedural", f"Slack {SECRETS['slack']} google {SECRETS['google']} jwt {SECRETS['jwt']}"
    )
    bank.save(
        "procedural",
        "-----BEGIN RSA PRIVATE KEY-----\n" + SECRETS["pem"] + "\n-----END RSA PRIVATE KEY-----",
    )
    bank.update_status(f"status with token={SECRETS['assignment']}")
    workspace = tmp_path / "repo"
    workspace.mkdir()
    handoff = write_handoff_artifact(
        workspace,
        task=f"Use {SECRETS['sk']} to call the API",
        latest_instruction=f"export GITHUB_TOKEN={SECRETS['github']}",
        bank=bank,
        session_id="sess-secret",
        git_branch="main",
        files_touched=[".env"],
        commands=[(f"curl -H 'Authorization: Bearer {SECRETS['jwt']}'", 0)],
        unresolved_failures=[f"login failed for password={SECRETS['assignment']}"],
    )
    outcome = propose_injected_entries(
        MemoryStore(resolve_paths().records_file),
        tier="llm",
        session_id="sess-secret",
        cwd=str(workspace),
        entries=bank.knowledge + bank.procedural,
    )
    assert outcome.created == 4 and not outcome.errors
    result = invoke_cli(
        "memory",
        "promote",
        "--from-handoff",
        str(handoff),
        "--scope",
        "repo",
        "--repository",
        str(workspace.resolve()),
    )
    assert result.returncode == 0, result.stderr
    assert "4 new proposal(s)" in result.stdout
    listed = invoke_cli("memory", "list", "--json").stdout
    files = [
        p
        for root in (isolated_dirs["data"], isolated_dirs["state"], workspace)
        for p in root.rglob("*")
        if p.is_file()
    ]
    assert handoff in files and resolve_paths().records_file in files
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for name, secret in SECRETS.items():
            assert secret not in text, f"{name} secret leaked into {path}"
    for secret in SECRETS.values():
        assert secret not in listed and secret not in result.stdout
    assert "[redacted:pem]" in handoff.read_text()
