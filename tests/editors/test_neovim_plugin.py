"""Headless checks of the Neovim plugin that need no server, on Neovim 0.7.2 and 0.11:
``setup{}`` defines every ``:Clio*`` command, events render as the turn buffer shows
them, streamed chunks continue a line, and empty argument tables go out as JSON
objects (``editor-clients/neovim/tests/unit.lua``)."""

from __future__ import annotations

from pathlib import Path

from tests.editors.nvim import PLUGIN, run_lua


def test_plugin_defines_every_command_and_renders_the_turn_buffer(
    nvim: str, tmp_path: Path
) -> None:
    text = run_lua(nvim, PLUGIN / "tests" / "unit.lua", {}, tmp_path / "unit.log", tmp_path)
    assert "PASS" in text
