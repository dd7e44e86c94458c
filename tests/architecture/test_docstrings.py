"""Public functions document their shapes, units, errors and source (RULES.md), here
checked for presence in every layer: a new public function without a docstring fails.
Private names (``_x``, members of ``_X`` classes) and ``@overload`` stubs are exempt."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "clio_acp"
COVERED = [
    "acp",
    "agent",
    "cli",
    "context",
    "eval",
    "lsp",
    "memory",
    "models",
    "session",
    "advisory.py",
    "atomic.py",
    "events.py",
    "paths.py",
    "settings.py",
    "timestamps.py",
]


def _undocumented(path: Path) -> list[str]:
    out: list[str] = []

    def visit(node: ast.AST, prefix: str, private: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                overload = any(getattr(d, "id", None) == "overload" for d in child.decorator_list)
                public = not child.name.startswith("_") and not private and not overload
                if public and not ast.get_docstring(child):
                    out.append(f"{path.relative_to(REPO_ROOT)}:{child.lineno} {prefix}{child.name}")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", private or child.name.startswith("_"))

    visit(ast.parse(path.read_text(encoding="utf-8")), "", False)
    return out


@pytest.mark.parametrize("part", COVERED)
def test_public_functions_have_docstrings(part):
    target = PACKAGE / part
    files = [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    assert files
    missing = [m for path in files for m in _undocumented(path)]
    assert missing == []
