"""Failure locations in tool output (issue 16 item 1): tracebacks, ``path:line:``,
``path:line:col:``, ``path(line,col):`` and pytest node ids become workspace files
with 0-based lines; files outside the workspace or that do not exist are dropped."""

from __future__ import annotations

from pathlib import Path

from clio_acp.memory.locations import FailureLocation, failure_locations


def _workspace(tmp_path: Path, *files: str) -> Path:
    for name in files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n", encoding="utf-8")
    return tmp_path


def test_traceback_innermost_workspace_frame_first_and_system_frames_dropped(tmp_path: Path):
    root = _workspace(tmp_path, "src/bäd_😀.py", "src/app.py")
    output = (
        "Traceback (most recent call last):\n"
        f'  File "{root}/src/app.py", line 12, in <module>\n'
        "    main()\n"
        '  File "src/bäd_😀.py", line 3, in main\n'
        "    value = undefined_name\n"
        '  File "/usr/lib/python3.11/importlib/__init__.py", line 126, in import_module\n'
        "NameError: name 'undefined_name' is not defined\n"
    )
    assert failure_locations(output, root) == (
        FailureLocation(str(root / "src/bäd_😀.py"), 2),
        FailureLocation(str(root / "src/app.py"), 11),
    )


def test_compiler_linter_and_test_runner_forms(tmp_path: Path):
    root = _workspace(tmp_path, "src/a.c", "lib/b.ts", "tests/test_c.py", "pkg/d.py")
    output = (
        "src/a.c:10:5: error: expected ';'\n"
        "lib/b.ts(3,7): error TS2322: Type 'string' is not assignable\n"
        "FAILED tests/test_c.py::test_sum[1-2] - assert 3 == 4\n"
        "tests/test_c.py:21: AssertionError\n"
        "pkg/d.py:4: error: Incompatible types  [assignment]\n"
    )
    assert failure_locations(output, root) == (
        FailureLocation(str(root / "src/a.c"), 9, 4),
        FailureLocation(str(root / "lib/b.ts"), 2, 6),
        FailureLocation(str(root / "tests/test_c.py"), 20),  # the line beats the node id
        FailureLocation(str(root / "pkg/d.py"), 3),
    )


def test_node_id_alone_names_the_file_without_a_line(tmp_path: Path):
    root = _workspace(tmp_path, "tests/test_c.py")
    located = failure_locations("ERROR tests/test_c.py::test_x - ImportError", root)
    assert located == (FailureLocation(str(root / "tests/test_c.py"), None),)


def test_outside_missing_and_lookalike_paths_name_nothing(tmp_path: Path):
    root = _workspace(tmp_path / "ws", "a.py")
    (tmp_path / "secret.py").write_text("x\n", encoding="utf-8")
    output = (
        "../secret.py:1: error\n"
        "missing.py:3: error\n"
        "at 12:30:45 the server said http://example.com:8080/x\n"
        f"{tmp_path}/secret.py:2: error\n"
    )
    assert failure_locations(output, root) == ()
    assert failure_locations("a.py:1:", None) == ()
    assert failure_locations("", root) == ()


def test_relative_paths_resolve_against_the_command_folder(tmp_path: Path):
    root = _workspace(tmp_path, "sub/m.py")
    located = failure_locations("m.py:7: error: x", root, cwd=root / "sub")
    assert located == (FailureLocation(str(root / "sub/m.py"), 6),)
