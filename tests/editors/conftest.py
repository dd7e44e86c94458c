"""Fixtures of the editor-client tests: ``nvim`` is parametrised over Neovim 0.7.2 and
0.11 (see ``tests/editors/nvim.py`` for where the binaries come from)."""

from __future__ import annotations

import pytest

from tests.editors.nvim import VERSIONS, find_nvim


@pytest.fixture(params=sorted(VERSIONS), ids=lambda v: f"nvim-{v}")
def nvim(request: pytest.FixtureRequest) -> str:
    return find_nvim(request.param)
