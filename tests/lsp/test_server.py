"""What the server reads of the client's capabilities (``clio_acp/lsp/server.py``
``client_supports``), checked against the two capability sets the end-to-end suites
run on. Modules whose behaviour cannot depend on the capability set run on one
(``tests/lsp/conftest.py`` ``NEUTRAL_CLIENT``); this test is what makes that safe: a new
capability the server reads, on which VS Code and Neovim differ, fails here."""

from __future__ import annotations

import ast

from pygls.capabilities import get_capability
from pytest_lsp import client_capabilities

from tests.conftest import REPO_ROOT
from tests.lsp.conftest import CLIENTS

LSP_PACKAGE = REPO_ROOT / "clio_acp" / "lsp"


def _capability_reads() -> tuple[set[str], list[str]]:
    """(every literal ``client_supports("…")`` argument, places that read the client's
    capabilities any other way) over ``clio_acp/lsp``."""
    literals: set[str] = set()
    other: list[str] = []
    for path in sorted(LSP_PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO_ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "client_supports":
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    literals.add(arg.value)
                else:
                    other.append(where)
            elif isinstance(node, ast.Attribute) and node.attr in (
                "client_capabilities",
                "position_codec",
            ):
                other.append(f"{where} .{node.attr}")
    return literals, other


def test_the_server_reads_capabilities_through_client_supports_and_positions_only():
    literals, other = _capability_reads()
    assert literals, "no client_supports(...) call found: the scan is broken"
    # The one definition (server.py client_supports) and the position codec the
    # reminder ranges use; a new direct read must be added here knowingly.
    assert sorted(o.split(":")[0] + o.split(" ", 1)[-1] for o in other) == [
        "clio_acp/lsp/features/reminders.py.position_codec",
        "clio_acp/lsp/server.py.client_capabilities",
    ], other


def test_both_capability_sets_agree_on_every_capability_the_server_reads():
    literals, _ = _capability_reads()
    for dotted in sorted(literals):
        values = {
            name: bool(get_capability(client_capabilities(name), dotted, False)) for name in CLIENTS
        }
        assert len(set(values.values())) == 1, (dotted, values)


def test_settings_edits_within_one_timestamp_tick_are_both_read(tmp_path, monkeypatch):
    """``settings_reader`` re-reads the file when it changes. A second write in the same
    timestamp tick as the first (a coarse file-system clock, or a script writing twice)
    must not be taken for the file already read."""
    import os

    from clio_acp.lsp.server import ClioLanguageServer

    path = tmp_path / "settings.yaml"
    path.write_text("context:\n  memory:\n    enabled: true\n")
    monkeypatch.setenv("CLIO_ACP_SETTINGS", str(path))
    server = ClioLanguageServer()
    assert server.settings_reader().context.memory.enabled is True
    read = os.stat(path)
    path.write_text("context:\n  memory:\n    enabled: false\n")
    os.utime(path, ns=(read.st_atime_ns, read.st_mtime_ns))  # the same tick as before
    assert server.settings_reader().context.memory.enabled is False
