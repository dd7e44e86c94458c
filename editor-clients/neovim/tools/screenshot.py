"""Capture docs/images/neovim-memory-quickfix.png: a clio-memory diagnostic and its
quick fixes in a real Neovim, run in tmux against ``python -m clio_acp lsp``.

A documentation tool, not a test: it starts the scripted model server (the same
scenario as ``tests/editors/test_neovim_e2e.py``), runs Neovim in a detached tmux
session, prompts, waits for the memory diagnostic, opens the code-action menu, then
captures the pane with its colours (``tmux capture-pane -e``) and draws it into a
small PNG with Pillow (``pip install pillow``; not a project dependency).

Usage, from the repository root::

    python editor-clients/neovim/tools/screenshot.py [--nvim PATH] [--out PNG]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.editors.test_neovim_e2e import _script, install_settings  # noqa: E402
from tests.support.model_server import ScriptedModelServer  # noqa: E402

COLS, ROWS = 104, 26
SESSION = "clio-shot"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
FONT_PX = 13

INIT = """
vim.opt.runtimepath:prepend({plugin!r})
vim.o.termguicolors = false
vim.o.laststatus = 2
vim.o.shortmess = vim.o.shortmess .. "I"
vim.diagnostic.config({{ virtual_text = true, underline = false, signs = true }})
require("clio").setup({{
  cmd = vim.fn.json_decode({cmd!r}),
  open_turn_buffer = true,
  init_options = {{ permissionMode = "bypass" }},
}})
local shown = false
vim.api.nvim_create_autocmd("DiagnosticChanged", {{
  callback = function()
    if shown then return end
    for _, item in ipairs(require("clio")._proposal_diagnostics()) do
      shown = true
      vim.schedule(function()
        vim.cmd("only")
        local buf = vim.uri_to_bufnr(item.uri)
        if vim.api.nvim_get_current_buf() ~= buf then
          vim.fn.bufload(buf)
          vim.api.nvim_set_current_buf(buf)
        end
        vim.api.nvim_win_set_cursor(0, {{ item.diagnostic.range.start.line + 1, 0 }})
        vim.cmd("botright split clio://turn | resize 8 | wincmd k")
        vim.defer_fn(function()
          vim.lsp.buf.code_action({{ context = {{ only = {{ "quickfix" }} }} }})
        end, 300)
      end)
      return
    end
  end,
}})
"""

# xterm 16-colour palette, then the 6x6x6 cube and the grey ramp.
BASE16 = [
    (0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16),
    (36, 114, 200), (188, 63, 188), (17, 168, 205), (229, 229, 229),
    (102, 102, 102), (241, 76, 76), (35, 209, 139), (245, 245, 67),
    (59, 142, 234), (214, 112, 214), (41, 184, 219), (255, 255, 255),
]  # fmt: skip
FG, BG = (220, 220, 220), (30, 30, 30)


def xterm(n: int) -> tuple[int, int, int]:
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return steps[n // 36], steps[(n // 6) % 6], steps[n % 6]
    v = 8 + (n - 232) * 10
    return v, v, v


def parse(lines: list[str]) -> list[list[tuple[str, tuple, tuple]]]:
    """ANSI SGR text → rows of (char, fg, bg) cells."""
    rows = []
    fg, bg, reverse = FG, BG, False
    for line in lines:
        cells = []
        for token in re.split(r"(\x1b\[[0-9;]*m)", line):
            if token.startswith("\x1b["):
                codes = [int(c) if c else 0 for c in token[2:-1].split(";")]
                i = 0
                while i < len(codes):
                    c = codes[i]
                    if c == 0:
                        fg, bg, reverse = FG, BG, False
                    elif c == 7:
                        reverse = True
                    elif c == 27:
                        reverse = False
                    elif 30 <= c <= 37:
                        fg = BASE16[c - 30]
                    elif 90 <= c <= 97:
                        fg = BASE16[c - 90 + 8]
                    elif 40 <= c <= 47:
                        bg = BASE16[c - 40]
                    elif 100 <= c <= 107:
                        bg = BASE16[c - 100 + 8]
                    elif c == 39:
                        fg = FG
                    elif c == 49:
                        bg = BG
                    elif c in (38, 48) and i + 2 < len(codes) and codes[i + 1] == 5:
                        color = xterm(codes[i + 2])
                        fg, bg = (color, bg) if c == 38 else (fg, color)
                        i += 2
                    elif c in (38, 48) and i + 4 < len(codes) and codes[i + 1] == 2:
                        color = tuple(codes[i + 2 : i + 5])
                        fg, bg = (color, bg) if c == 38 else (fg, color)
                        i += 4
                    i += 1
                continue
            for ch in token:
                cells.append((ch, bg if reverse else fg, fg if reverse else bg))
        rows.append(cells)
    return rows


def render(rows: list[list[tuple[str, tuple, tuple]]], out: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, FONT_PX)
    cw = round(font.getlength("M"))
    ch = FONT_PX + 4
    image = Image.new("RGB", (COLS * cw + 8, ROWS * ch + 8), BG)
    draw = ImageDraw.Draw(image)
    for y, cells in enumerate(rows[:ROWS]):
        for x, (char, fg, bg) in enumerate(cells[:COLS]):
            left, top = 4 + x * cw, 4 + y * ch
            if bg != BG:
                draw.rectangle([left, top, left + cw - 1, top + ch - 1], fill=bg)
            if char.strip():
                draw.text((left, top + 1), char, font=font, fill=fg)
    image = image.quantize(colors=64)
    image.save(out, optimize=True)


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nvim", default=os.environ.get("CLIO_NVIM_011", "nvim"))
    parser.add_argument("--out", type=Path, default=REPO / "docs/images/neovim-memory-quickfix.png")
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--cmd", help="server command as a JSON list (default: this python -m clio_acp lsp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer() as server:
        home = Path(tmp)
        env = dict(os.environ)
        for name in ("data", "state", "config", "cache"):
            (home / name).mkdir()
            env[f"CLIO_ACP_{name.upper()}_DIR"] = str(home / name)
        env["PYTHONPATH"] = str(REPO)
        _script(server)
        install_settings(server, home / "config")
        workspace = home / "workspace"
        workspace.mkdir()
        (workspace / "main.py").write_text("print('hello')\n", encoding="utf-8")
        init = home / "init.lua"
        cmd = args.cmd or json.dumps([sys.executable, "-m", "clio_acp", "lsp"])
        init.write_text(INIT.format(plugin=str(REPO / "editor-clients/neovim"), cmd=cmd))
        command = f"{args.nvim} -u {init} -i NONE -n main.py"
        tmux_env = [f"-e{k}={v}" for k, v in env.items() if k.startswith("CLIO_") or k == "PYTHONPATH"]
        subprocess.run(
            ["tmux", "-2", "new-session", "-d", "-s", SESSION, "-x", str(COLS), "-y", str(ROWS),
             "-c", str(workspace), *tmux_env, command],
            check=True,
        )  # fmt: skip
        try:
            time.sleep(1.5)
            tmux("send-keys", "-t", SESSION, ":ClioPrompt Take two looks at the workspace.", "Enter")
            deadline = time.monotonic() + args.timeout
            while "Approve memory" not in tmux("capture-pane", "-p", "-t", SESSION):
                if time.monotonic() > deadline:
                    print(tmux("capture-pane", "-p", "-t", SESSION), file=sys.stderr)
                    raise SystemExit("timed out waiting for the quick-fix menu")
                time.sleep(0.3)
            time.sleep(0.5)
            screen = tmux("capture-pane", "-e", "-p", "-t", SESSION).split("\n")
        finally:
            subprocess.run(["tmux", "kill-session", "-t", SESSION], check=False)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    render(parse(screen), args.out)
    print(f"{args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
