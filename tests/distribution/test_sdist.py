"""The source distribution (issue 20 item 6): it carries the package, README, LICENSE
and an SPDX license expression, and no tests (they need ../shared/ beside a checkout,
which an sdist cannot carry). Builds with ``python -m build`` in an isolated
environment (setuptools from PyPI), from a copy of the checkout's files: setuptools
writes ``clio_acp.egg-info`` into the folder it builds from, and the checkout is on
``sys.path`` of the tests running beside this one (``-n 2``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def _copy_of_the_checkout(target: Path) -> Path:
    """The checkout's tracked and untracked-but-not-ignored files, copied to ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():  # a deleted file is still listed until the next commit
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.mark.slow
def test_the_sdist_carries_license_and_no_tests(tmp_path):
    source = _copy_of_the_checkout(tmp_path / "checkout")
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (sdist,) = out.glob("clio_acp-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [name.split("/", 1)[1] for name in tar.getnames() if "/" in name]
        pkg_info = tar.extractfile(
            next(m for m in tar.getmembers() if m.name.endswith("/PKG-INFO"))
        )
        metadata = pkg_info.read().decode()
    assert "LICENSE" in names and "README.md" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "editor-clients/"))]
    assert any(n.startswith("clio_acp/models/templates/") for n in names)
    assert "License-Expression: Apache-2.0" in metadata


def test_the_license_file_is_apache_2():
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
