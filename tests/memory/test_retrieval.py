"""Canonical repository identity, eligibility, lexical-v1 relevance and the prompt section (§6)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from clio_acp.memory.identity import canonical_repository_identity, is_canonical_repository_key
from clio_acp.memory.records import MemoryRecord
from clio_acp.memory.retrieval import (
    ActiveIdentity,
    RelevanceInput,
    build_prompt_section,
    eligible_records,
    is_eligible,
    rank_by_relevance,
    render_prompt_section,
)


def rec(n: int, **overrides) -> MemoryRecord:
    data = {
        "id": f"mem-{n:016x}",
        "scope": "global",
        "key": f"key-{n}",
        "lesson": f"Lesson {n}.",
        "evidenceRefs": [f"session:s{n}"],
        "appliesWhen": [],
        "avoidWhen": [],
        "confidence": 0.6,
        "createdAt": f"2026-11-{n % 28 + 1:02d}T00:00:00.000Z",
        "approved": True,
    }
    data.update(overrides)
    return MemoryRecord.model_validate(data)


def repo_rec(n: int, key: str, **overrides) -> MemoryRecord:
    return rec(n, scope="repo", repository={"kind": "canonical-path", "key": key}, **overrides)


# -- identity -------------------------------------------------------------------------


def test_identity_resolves_symlinks_and_missing_tails(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert canonical_repository_identity(link) == str(real.resolve())
    assert canonical_repository_identity(str(link / "sub")) == str((real / "sub").resolve())
    missing = link / "not" / "yet"
    assert canonical_repository_identity(missing) == str(real.resolve() / "not" / "yet")
    assert canonical_repository_identity(str(real) + "/./sub/../sub") == str(
        (real / "sub").resolve()
    )


@pytest.mark.parametrize(
    "bad", ["", "relative/path", "/tmp/a\x00b", "/tmp/a\nb", "/tmp/a\rb", None]
)
def test_identity_refuses_unusable_paths(bad) -> None:
    assert canonical_repository_identity(bad) is None


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )


def test_linked_git_worktree_maps_to_main_checkout(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    _git("init", "-q", cwd=main)
    (main / "f.txt").write_text("x")
    (main / "pkg").mkdir()
    (main / "pkg" / "g.txt").write_text("y")
    _git("add", "-A", cwd=main)
    _git("commit", "-qm", "init", cwd=main)
    lane = tmp_path / "lane"
    _git("worktree", "add", "-q", str(lane), "-b", "lane", cwd=main)
    main_key = str(main.resolve())
    assert canonical_repository_identity(main) == main_key
    assert canonical_repository_identity(lane) == main_key
    assert canonical_repository_identity(lane / "pkg") == str(main.resolve() / "pkg")
    assert not is_canonical_repository_key(str(lane.resolve()))


def test_submodule_style_gitfile_without_commondir_is_not_mapped(tmp_path: Path) -> None:
    module = tmp_path / "mod"
    module.mkdir()
    gitdir = tmp_path / "super" / ".git" / "modules" / "mod"
    gitdir.mkdir(parents=True)
    (module / ".git").write_text(f"gitdir: {gitdir}\n")
    assert canonical_repository_identity(module) == str(module.resolve())


# -- eligibility ------------------------------------------------------------------------


def test_repo_record_is_invisible_from_another_repository_and_a_symlink_elsewhere(
    tmp_path: Path,
) -> None:
    repo_a = (tmp_path / "a").resolve()
    repo_b = (tmp_path / "b").resolve()
    repo_a.mkdir()
    repo_b.mkdir()
    link_to_b = tmp_path / "looks-like-a"
    link_to_b.symlink_to(repo_b)
    record = repo_rec(1, str(repo_a))
    active_a = ActiveIdentity(repository=canonical_repository_identity(repo_a))
    assert is_eligible(record, active_a)
    assert not is_eligible(record, ActiveIdentity(repository=canonical_repository_identity(repo_b)))
    assert not is_eligible(
        record, ActiveIdentity(repository=canonical_repository_identity(link_to_b))
    )
    # A parent or child folder is not the repository either: the match is exact.
    assert not is_eligible(record, ActiveIdentity(repository=str(tmp_path.resolve())))
    assert not is_eligible(record, ActiveIdentity(repository=str(repo_a / "sub")))
    # A non-canonical active key (an unresolved symlink path) matches nothing.
    link_to_a = tmp_path / "alias-a"
    link_to_a.symlink_to(repo_a)
    assert not is_eligible(record, ActiveIdentity(repository=str(link_to_a)))
    assert not is_eligible(record, ActiveIdentity())


def test_applies_when_tokens_never_grant_repo_eligibility(tmp_path: Path) -> None:
    other = tmp_path.resolve()
    record = repo_rec(1, "/nonexistent-repo-x", appliesWhen=[f"repository:canonical-path:{other}"])
    assert not is_eligible(record, ActiveIdentity(repository=str(other)))


def test_eligibility_gates() -> None:
    active = ActiveIdentity(runtime="node-22", agent="claude")
    assert is_eligible(rec(1), active)
    assert not is_eligible(rec(2, approved=False), active)
    assert not is_eligible(rec(3, approved=False, rejectedAt="2026-11-01T00:00:00.000Z"), active)
    assert not is_eligible(rec(4, regressions=["broke"]), active)
    assert is_eligible(rec(5, regressions=[]), active)
    runtime = rec(6, scope="runtime", runtime={"kind": "runtime", "key": "node-22"})
    agent = rec(7, scope="agent", agent={"kind": "agent", "key": "claude"})
    assert not is_eligible(runtime, active)  # not in the default allowed scopes
    assert is_eligible(runtime, active, scopes=["runtime"])
    assert not is_eligible(runtime, ActiveIdentity(runtime="node-20"), scopes=["runtime"])
    assert is_eligible(agent, active, scopes=["agent"])
    assert not is_eligible(rec(8, scope="language"), active)
    assert not is_eligible(rec(9), active, scopes=["repo"])


def test_priority_is_verification_time_desc_then_id() -> None:
    records = [
        rec(1, createdAt="2026-01-01T00:00:00.000Z"),
        rec(2, createdAt="2026-01-01T00:00:00.000Z", lastVerifiedAt="2026-06-01T00:00:00.000Z"),
        rec(3, createdAt="2026-03-01T00:00:00.000Z"),
        rec(0, createdAt="2026-01-01T00:00:00.000Z"),
    ]
    assert [r.id[-1] for r in eligible_records(records, ActiveIdentity())] == ["2", "3", "0", "1"]


# -- relevance ----------------------------------------------------------------------------


def test_lexical_v1_scores_terms_paths_and_symbols() -> None:
    records = [
        rec(1, lesson="Unrelated lesson about cooking."),
        rec(2, lesson="Run parseEnvelope tests before touching src/memory/parser.py."),
        rec(3, lesson="The parser needs strict JSON."),
    ]
    ranked = rank_by_relevance(
        records,
        ActiveIdentity(),
        RelevanceInput(
            task_text="Fix the envelope parser",
            active_paths=["./src/memory/parser.py"],
            active_symbols=["parseEnvelope"],
        ),
    )
    by_id = {r.record.id[-1]: r for r in ranked}
    # rec 2: terms parser+envelope (camelCase split) = 2, path 8, symbol 4.
    assert by_id["2"].score == 2 + 8 + 4
    assert by_id["2"].paths == ("src/memory/parser.py",)
    assert by_id["3"].score == 1
    assert by_id["1"].score == 0
    assert [r.record.id[-1] for r in ranked] == ["2", "1", "3"]
    assert ranked[1].fallback and not ranked[0].fallback


def test_relevance_ignores_evidence_and_avoid_when_and_stop_words() -> None:
    record = rec(1, lesson="Nothing here.", evidenceRefs=["parser"], avoidWhen=["parser"])
    ranked = rank_by_relevance([record], ActiveIdentity(), RelevanceInput("the parser with this"))
    assert ranked[0].score == 0 and not ranked[0].fallback


def test_relevance_never_changes_eligibility() -> None:
    records = [rec(1, approved=False, lesson="parser parser"), rec(2, lesson="other")]
    ranked = rank_by_relevance(records, ActiveIdentity(), RelevanceInput("parser"))
    assert [r.record.id[-1] for r in ranked] == ["2"]


# -- prompt section ------------------------------------------------------------------------


def test_prompt_section_layout(tmp_path: Path) -> None:
    key = str(tmp_path.resolve())
    record = repo_rec(
        1,
        key,
        lesson="Use  the\nlocal runner.",
        evidenceRefs=["session:a", "session:b"],
        appliesWhen=[f"repository:canonical-path:{key}"],
        avoidWhen=["offline   mode"],
    )
    text = render_prompt_section([record, rec(2)])
    lines = text.split("\n")
    assert lines[0] == "# Memory" and lines[1] == "" and lines[3] == ""
    assert "approval" in lines[2] and "do not extrapolate" in lines[2]
    assert lines[4] == (
        f'- [{record.id}] (scope=repo, repository="canonical-path:{key}") Use the local runner. '
        "Evidence: session:a, session:b."
    )
    assert lines[5] == f"  Applies when: repository:canonical-path:{key}."
    assert lines[6] == "  Avoid when: offline mode."
    assert lines[7] == f"- [{rec(2).id}] (scope=global) Lesson 2. Evidence: session:s2."
    assert render_prompt_section([]) == ""


def test_prompt_section_item_limit_and_token_budget_diagnostics() -> None:
    records = [rec(n, createdAt=f"2026-11-{28 - n:02d}T00:00:00.000Z") for n in range(1, 8)]
    section = build_prompt_section(records, ActiveIdentity())
    assert section.selected_ids == [r.id for r in records[:5]]
    assert [d.reason for d in section.decisions] == ["selected"] * 5 + ["item-limit"] * 2
    assert section.tokens <= 400

    big = rec(20, lesson="x" * 2000, createdAt="2026-11-28T00:00:00.000Z")
    small = rec(21, createdAt="2026-11-27T00:00:00.000Z")
    section = build_prompt_section([big, small], ActiveIdentity())
    assert [(d.id, d.reason) for d in section.decisions] == [
        (big.id, "token-budget"),
        (small.id, "selected"),
    ]
    assert section.text.count("- [") == 1


def test_prompt_section_budget_counts_the_whole_rendered_section() -> None:
    # Each record alone fits; the header and both together would not fit 60 tokens.
    records = [rec(1, lesson="a" * 60), rec(2, lesson="b" * 60)]
    section = build_prompt_section(records, ActiveIdentity(), budget_tokens=90)
    assert len(section.selected_ids) == 1
    assert section.tokens <= 90
    assert build_prompt_section(records, ActiveIdentity(), budget_tokens=0).decisions == []


def test_prompt_section_excludes_proposed_records() -> None:
    section = build_prompt_section([rec(1, approved=False)], ActiveIdentity())
    assert section.text == "" and section.decisions == []
