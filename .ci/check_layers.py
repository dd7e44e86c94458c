#!/usr/bin/env python3
"""Check the package's floors and unit sizes (docs/ARCHITECTURE.md "Floors").

Rules, read from the source with ``ast`` (nothing is imported or run):

1. Imports point down the floors. Every ``clio_acp`` import — at module level, inside
   a function or under ``TYPE_CHECKING`` alike — must name a unit on a lower floor,
   or the importer's own unit. Two units on one floor may not import each other
   unless ``SAME_FLOOR`` says so.
2. Faces speak to the core through the session only. ``acp/``, ``lsp/`` and ``cli/``
   import from the core nothing but ``clio_acp.session`` (the package, i.e. what its
   ``__init__`` exports) and the floor-1 modules in ``FACE_MAY_USE``. ``cli/`` may
   also start the two servers (``acp/``, ``lsp/``) and the tool harness (``eval/``).
3. No function over ``MAX_FUNCTION_LINES`` lines, no class over ``MAX_CLASS_LINES``
   (decorators, docstring and body counted).

Known departures are listed below, each with its reason; an entry that no longer
matches anything is itself reported, so the lists only shrink.

Usage: ``python .ci/check_layers.py [--root DIR]`` (DIR holds ``clio_acp/``; default:
the repository). Prints one line per violation; exit status 1 when there is any.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "clio_acp"
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 400

# Unit (first name below clio_acp; "" is the package root) -> floor. An unlisted unit
# is a violation: a new top-level module must be given its floor here and in
# docs/ARCHITECTURE.md.
FLOORS: dict[str, int] = {
    "__main__": 7,  # `python -m clio_acp`: runs the CLI
    "cli": 6,
    "eval": 6,
    "acp": 5,
    "lsp": 5,
    "session": 4,
    "agent": 3,
    "memory": 2,
    "models": 2,
    "context": 1,
    "advisory": 1,
    "atomic": 1,
    "events": 1,
    "paths": 1,
    "settings": 1,
    "timestamps": 1,
    "": 0,  # clio_acp/__init__.py: the version only
}

# Imports between two units of one floor that are allowed: (importer, imported).
SAME_FLOOR: dict[tuple[str, str], str] = {
    ("context", "settings"): "compaction and spill defaults are stated once, in settings",
    ("cli", "eval"): "`clio-acp eval` / `replay` run the evaluation harness",
}

FACES = ("acp", "lsp", "cli")
FACE_MAY_USE = frozenset(
    {
        PACKAGE,  # __version__
        f"{PACKAGE}.session",
        f"{PACKAGE}.session.commands",  # the verbs both faces call; exported by session
        f"{PACKAGE}.settings",
        f"{PACKAGE}.paths",
        f"{PACKAGE}.events",
        f"{PACKAGE}.atomic",
        f"{PACKAGE}.timestamps",
    }
)
CLI_MAY_ALSO_USE = ("acp", "lsp", "eval")

# Face imports of the core below session that are still there: importer module ->
# imported units or modules (a unit name covers all its modules), with the reason.
# Shrink as the command layer (session/commands.py) takes their logic over.
_PENDING = "issue 13 part 2 (faces): to go behind session/__init__ and session/commands.py"
_OFFLINE = "offline tool command: works on local files or endpoints with no session"
FACE_EXCEPTIONS: dict[str, tuple[frozenset[str], str]] = {
    "clio_acp.cli.session_cmd": (
        frozenset({"agent", "models", "clio_acp.session.journal"}),
        _PENDING,
    ),
    "clio_acp.cli.workspace_cmd": (frozenset({"clio_acp.session.workspace_values"}), _PENDING),
    "clio_acp.cli.memory_propose": (frozenset({"memory", "clio_acp.session.evidence"}), _PENDING),
    "clio_acp.cli.doctor_cmd": (frozenset({"models"}), _OFFLINE),
    "clio_acp.cli.targets_cmd": (frozenset({"models"}), _OFFLINE),
    "clio_acp.cli.local_cmd": (frozenset({"models"}), _OFFLINE),
    "clio_acp.cli.eval_cmd": (frozenset({"agent", "models"}), _OFFLINE),
    "clio_acp.cli.replay_cmd": (frozenset({"agent", "models"}), _OFFLINE),
    "clio_acp.cli.memory_parse": (frozenset({"memory"}), _OFFLINE),
    "clio_acp.cli.memory_records": (frozenset({"memory"}), _OFFLINE),
    "clio_acp.cli.usage_cmd": (frozenset({"memory"}), _OFFLINE),
}

# Units over the size limits: qualified name "module:Class.func" -> reason.
SIZE_EXCEPTIONS: dict[str, str] = {}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def module_name(root: Path, path: Path) -> str:
    """``clio_acp/agent/loop.py`` -> ``clio_acp.agent.loop`` (a package's
    ``__init__.py`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """The unit of a ``clio_acp`` module: its first name below the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imported_modules(tree: ast.AST, module: str, is_package: bool, root: Path) -> Iterator:
    """``(line, target module)`` for every ``clio_acp`` import in ``tree``, relative
    imports resolved; ``from pkg import name`` names ``pkg.name`` when that is a
    module of the tree, else ``pkg``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield node.lineno, sub if _is_module(root, sub) else target


def _is_module(root: Path, module: str) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def check_imports(root: Path, path: Path, tree: ast.AST, used: set) -> list[Violation]:
    """Rules 1 and 2 for one file."""
    module = module_name(root, path)
    source = unit_of(module)
    rel = str(path.relative_to(root))
    if source not in FLOORS:
        return [Violation(rel, 1, f"unit {source!r} has no floor in FLOORS (check_layers.py)")]
    out: list[Violation] = []
    seen: set[tuple[int, str]] = set()
    for line, target in imported_modules(tree, module, path.name == "__init__.py", root):
        if (target != PACKAGE and not target.startswith(PACKAGE + ".")) or (line, target) in seen:
            continue
        seen.add((line, target))
        problem = _import_problem(module, source, target, used)
        if problem:
            out.append(Violation(rel, line, problem))
    return out


def _import_problem(module: str, source: str, target: str, used: set) -> str | None:
    dest = unit_of(target)
    if dest == source:
        return None
    if dest not in FLOORS:
        return f"imports {target}: unit {dest!r} has no floor in FLOORS"
    if FLOORS[dest] > FLOORS[source]:
        return f"imports {target} (floor {FLOORS[dest]}) from floor {FLOORS[source]}: a floor up"
    if FLOORS[dest] == FLOORS[source] and dest:
        if (source, dest) not in SAME_FLOOR:
            return f"imports {target}: {source}/ and {dest} share floor {FLOORS[source]}"
        used.add(("same", source, dest))
    if source in FACES and not _face_may_import(source, target):
        exception = FACE_EXCEPTIONS.get(module)
        if exception and (dest in exception[0] or target in exception[0]):
            used.add(("face", module, dest if dest in exception[0] else target))
            return None
        return f"face imports {target}: faces use clio_acp.session (and settings/paths/events)"
    return None


def _face_may_import(source: str, target: str) -> bool:
    if target in FACE_MAY_USE:
        return True
    return source == "cli" and unit_of(target) in CLI_MAY_ALSO_USE


def check_sizes(root: Path, path: Path, tree: ast.AST, used: set) -> list[Violation]:
    """Rule 3 for one file."""
    module = module_name(root, path)
    rel = str(path.relative_to(root))
    out: list[Violation] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, prefix)
                continue
            first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
            lines = (child.end_lineno or child.lineno) - first + 1
            is_class = isinstance(child, ast.ClassDef)
            limit = MAX_CLASS_LINES if is_class else MAX_FUNCTION_LINES
            name = f"{module}:{prefix}{child.name}"
            if lines > limit:
                if name in SIZE_EXCEPTIONS:
                    used.add(("size", name))
                else:
                    kind = "class" if is_class else "function"
                    out.append(Violation(rel, child.lineno, f"{kind} {name} is {lines} lines"))
            visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def stale_exceptions(used: set) -> list[Violation]:
    """Exception entries that matched nothing (the code moved on: delete them)."""
    out = []
    here = ".ci/check_layers.py"
    for (source, dest), _reason in SAME_FLOOR.items():
        if ("same", source, dest) not in used:
            out.append(Violation(here, 1, f"stale SAME_FLOOR entry {(source, dest)}"))
    for module, (targets, _reason) in FACE_EXCEPTIONS.items():
        for target in sorted(targets):
            if ("face", module, target) not in used:
                out.append(Violation(here, 1, f"stale FACE_EXCEPTIONS entry {module} -> {target}"))
    for name in SIZE_EXCEPTIONS:
        if ("size", name) not in used:
            out.append(Violation(here, 1, f"stale SIZE_EXCEPTIONS entry {name}"))
    return out


def check(root: Path, *, report_stale: bool = True) -> list[Violation]:
    """All violations under ``root/clio_acp`` (sorted by file and line)."""
    used: set = set()
    out: list[Violation] = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        out += check_imports(root, path, tree, used)
        out += check_sizes(root, path, tree, used)
    if report_stale:
        out += stale_exceptions(used)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    violations = check(args.root)
    for violation in violations:
        print(violation)
    if violations:
        print(f"{len(violations)} layering/size violation(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
