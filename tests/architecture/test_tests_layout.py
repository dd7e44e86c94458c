"""The test suite's own rules (RULES.md): tests mirror the package
(``tests/<layer>/test_<module>.py``), no ``importorskip`` of our own modules (a rename
must fail, not skip), and no fixed sleeps outside ``tests/support`` (wait on events)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

TESTS = REPO_ROOT / "tests"

# tests/<folder> -> what it covers. A new folder must say here what it mirrors.
FOLDERS = {
    "acp": "clio_acp/acp (tests/ is a package: `tests.acp` cannot shadow the `acp` SDK)",
    "agent": "clio_acp/agent",
    "architecture": "the floors, sizes and these rules",
    "cli": "clio_acp/cli",
    "context": "clio_acp/context",
    "data": "labelled data the tests read (no tests)",
    "distribution": "what ships: README's first commands, .ci/run, the sdist",
    "editors": "the editor clients in editor-clients/",
    "eval": "clio_acp/eval",
    "foundation": "the top-level floor-1 modules (settings, paths, events, atomic, ...)",
    "lsp": "clio_acp/lsp",
    "memory": "clio_acp/memory",
    "models": "clio_acp/models",
    "session": "clio_acp/session",
    "support": "shared fixtures: scripted model server, ACP client, waiting helpers",
}

HANG_STAND_IN_S = 30
"""A sleep this long stands for "never finishes" (a fake slow endpoint the test
cancels); no test waits that long, so it is not a wait."""

# Fixed sleeps still in the suite: file -> reason. Shrink it; never grow it.
SLEEP_EXCEPTIONS: dict[str, str] = {}


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_module_is_loose_at_the_root():
    assert [p.name for p in TESTS.glob("test_*.py")] == []


def test_every_test_folder_says_what_it_mirrors():
    folders = {p.relative_to(TESTS).parts[0] for p in _test_files()}
    assert folders <= set(FOLDERS), sorted(folders - set(FOLDERS))


def test_no_importorskip_of_our_own_modules():
    offenders = []
    for path in _test_files() + sorted(TESTS.rglob("conftest.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "importorskip"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("clio_acp")
            ):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert offenders == []


def _fixed_sleeps(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "sleep"):
            continue
        owner = getattr(node.func, "value", None)
        if not (isinstance(owner, ast.Name) and owner.id in ("time", "asyncio")):
            continue
        if node.args and isinstance(node.args[0], ast.Constant):
            seconds = node.args[0].value
            if isinstance(seconds, (int, float)) and 0 < seconds < HANG_STAND_IN_S:
                lines.append(node.lineno)
    return lines


def test_no_fixed_sleeps_outside_support():
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = str(path.relative_to(REPO_ROOT))
        if rel.startswith("tests/support/") or rel == "tests/architecture/test_tests_layout.py":
            continue
        lines = _fixed_sleeps(path)
        if lines:
            found[rel] = lines
    unexplained = {f: lines for f, lines in found.items() if f not in SLEEP_EXCEPTIONS}
    assert unexplained == {}, "wait on an event or tests/support/waiting.py instead"
    assert set(SLEEP_EXCEPTIONS) <= set(found), "stale SLEEP_EXCEPTIONS entry: delete it"
