"""The floors and size limits of docs/ARCHITECTURE.md, checked by .ci/check_layers.py
(the same script CI runs), and the checker itself on small made-up trees."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / ".ci" / "check_layers.py"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


def test_the_package_keeps_its_floors_and_sizes():
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"clio_acp/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != tmp_path / "clio_acp":
            (path.parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def _messages(root: Path) -> list[str]:
    return [v.message for v in checker.check(root, report_stale=False)]


def test_an_import_a_floor_up_is_reported_wherever_it_stands(tmp_path):
    root = _tree(
        tmp_path,
        {
            "clio_acp/session/manager.py": "",
            "clio_acp/memory/bank.py": """
                def later():
                    from clio_acp.session import manager
                    return manager
            """,
        },
    )
    (problem,) = _messages(root)
    assert "imports clio_acp.session.manager (floor 4) from floor 2: a floor up" in problem


def test_relative_imports_are_resolved(tmp_path):
    root = _tree(
        tmp_path,
        {
            "clio_acp/session/manager.py": "",
            "clio_acp/agent/loop.py": "from ..session import manager\n",
        },
    )
    (problem,) = _messages(root)
    assert "clio_acp.session.manager" in problem and "a floor up" in problem


def test_two_units_of_one_floor_may_not_import_each_other(tmp_path):
    root = _tree(
        tmp_path,
        {
            "clio_acp/models/errors.py": "",
            "clio_acp/memory/policy.py": "import clio_acp.models.errors\n",
        },
    )
    (problem,) = _messages(root)
    assert "memory/ and models share floor 2" in problem


def test_a_face_may_use_the_session_package_but_nothing_below_it(tmp_path):
    root = _tree(
        tmp_path,
        {
            "clio_acp/session/__init__.py": "",
            "clio_acp/session/journal.py": "",
            "clio_acp/agent/loop.py": "",
            "clio_acp/events.py": "",
            "clio_acp/lsp/translate.py": """
                from clio_acp.session import SessionManager
                from clio_acp.events import MessageChunk
                from clio_acp.session.journal import Journal
                from clio_acp.agent import loop
            """,
        },
    )
    problems = _messages(root)
    assert len(problems) == 2
    assert all(p.startswith("face imports") for p in problems)
    assert {p.split()[2].rstrip(":") for p in problems} == {
        "clio_acp.session.journal",
        "clio_acp.agent.loop",
    }


def test_a_unit_without_a_floor_is_reported(tmp_path):
    root = _tree(tmp_path, {"clio_acp/brand_new.py": ""})
    (problem,) = _messages(root)
    assert "'brand_new' has no floor" in problem


def test_long_functions_and_classes_are_reported_with_their_qualified_name(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(80))
    methods = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(140))
    root = _tree(
        tmp_path,
        {
            "clio_acp/context/tokens.py": f"class Small:\n    def big(self):\n{body}\n",
            "clio_acp/context/spill.py": f"class Big:\n{methods}",
        },
    )
    problems = _messages(root)
    assert "function clio_acp.context.tokens:Small.big is 81 lines" in problems
    assert any(p.startswith("class clio_acp.context.spill:Big is") for p in problems)
    assert len(problems) == 2


def test_exceptions_that_match_nothing_are_reported_as_stale(tmp_path):
    root = _tree(tmp_path, {"clio_acp/events.py": ""})
    stale = [v.message for v in checker.check(root) if "stale" in v.message]
    assert any("SIZE_EXCEPTIONS" in m for m in stale) or not checker.SIZE_EXCEPTIONS
    assert any("SAME_FLOOR" in m for m in stale)


@pytest.mark.parametrize("unit", sorted(checker.FLOORS))
def test_every_floor_named_in_the_checker_exists_in_the_package(unit):
    if not unit:
        return
    assert (REPO_ROOT / "clio_acp" / unit).is_dir() or (
        REPO_ROOT / "clio_acp" / f"{unit}.py"
    ).is_file()
