"""Worktree identity is verified both ways: a forged ``.git`` file inherits nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from clio_acp.memory.identity import canonical_repository_identity


def _git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _repo_with_lane(tmp_path: Path) -> tuple[Path, Path]:
    main = tmp_path / "main"
    main.mkdir()
    _git("init", "-q", cwd=main)
    (main / "f.txt").write_text("x")
    _git("add", "-A", cwd=main)
    _git("commit", "-qm", "init", cwd=main)
    lane = tmp_path / "lane"
    _git("worktree", "add", "-q", str(lane), "-b", "lane", cwd=main)
    return main, lane


def test_gitfile_claiming_another_repositorys_worktree_is_not_mapped(tmp_path: Path) -> None:
    main, lane = _repo_with_lane(tmp_path)
    assert canonical_repository_identity(lane) == str(main.resolve())
    intruder = tmp_path / "intruder"
    intruder.mkdir()
    (intruder / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'lane'}\n")
    assert canonical_repository_identity(intruder) == str(intruder.resolve())


def test_admin_folder_outside_worktrees_is_not_mapped(tmp_path: Path) -> None:
    main, _lane = _repo_with_lane(tmp_path)
    fake_admin = tmp_path / "admin"
    fake_admin.mkdir()
    intruder = tmp_path / "intruder"
    intruder.mkdir()
    (fake_admin / "commondir").write_text(str(main / ".git") + "\n")
    (fake_admin / "gitdir").write_text(str(intruder / ".git") + "\n")
    (intruder / ".git").write_text(f"gitdir: {fake_admin}\n")
    assert canonical_repository_identity(intruder) == str(intruder.resolve())


def test_moved_worktree_whose_admin_file_points_elsewhere_is_not_mapped(tmp_path: Path) -> None:
    _main, lane = _repo_with_lane(tmp_path)
    moved = tmp_path / "moved"
    lane.rename(moved)  # git's admin gitdir still names the old place
    assert canonical_repository_identity(moved) == str(moved.resolve())
