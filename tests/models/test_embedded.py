"""Against the real embedded model (llama.cpp's llama-server + SmolLM2-135M), as
installed by ``clio-acp local install`` (``.ci/run`` does it). Skipped only when it
is not installed. Asserts shape, never wording (issue 5 item 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import httpx
import pytest

from clio_acp.memory.envelope import parse_envelope
from clio_acp.models.client import ChatRequest, Done, ModelClient, TextDelta
from clio_acp.models.errors import ModelTimeoutError
from clio_acp.models.local import (
    MODEL_ALIAS,
    EmbeddedServer,
    LocalModelManager,
    free_port,
    local_status,
    model_path,
    server_binary,
)
from clio_acp.models.routing import Router
from clio_acp.models.targets import Target
from clio_acp.paths import resolve_paths
from clio_acp.settings import Settings
from tests.conftest import subprocess_env

# Resolved at import (collection), before the per-test isolated dirs: the model
# lives in the real data folder where `clio-acp local install` put it.
REAL_PATHS = resolve_paths()
STATUS = local_status(REAL_PATHS)
# .ci/run installs the model and sets this: in CI a missing install fails, never skips.
REQUIRED = os.environ.get("CLIO_ACP_REQUIRE_EMBEDDED") == "1"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not STATUS.installed and not REQUIRED,
        reason="embedded model not installed (run: clio-acp local install)",
    ),
]


@pytest.fixture(autouse=True)
def _installed():
    assert STATUS.installed, f"embedded model not installed: {STATUS.as_dict()}"


SYSTEM = (
    "You keep memory for a coding agent. Answer with exactly two lines: "
    "<operations>[...]</operations> then <no_intervention/>."
)
USER = (
    "Task:\nAdd a --verbose flag to src/cli.py without new dependencies.\n\n"
    "Recent completed tool trajectory:\n"
    '[{"step":1,"toolName":"run","callDescription":"pytest -q","outcome":"error",'
    '"resultDigest":"ModuleNotFoundError: No module named click"}]'
)


@pytest.fixture(scope="module")
def embedded_url(tmp_path_factory):
    """One llama-server for the module (started with plain subprocess so any test's
    event loop can use it)."""
    log_dir = tmp_path_factory.mktemp("llama-log")
    port = free_port()
    command = EmbeddedServer(replace(REAL_PATHS, state=log_dir)).command(port)
    log = (log_dir / "server.log").open("wb")
    proc = subprocess.Popen(command, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (log_dir / "server.log").read_text()[-2000:]
            time.sleep(0.1)
        yield f"{base}/v1"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def _settings(url: str, **memory) -> Settings:
    return Settings.model_validate(
        {
            "targets": [{"id": "local", "runtime": "embedded", "url": url}],
            "chat": {"target": "local"},
            "context": {"memory": {"target": "local", **memory}},
        }
    )


async def test_streaming_chat_yields_text_deltas_usage_and_timings(embedded_url):
    router = Router(_settings(embedded_url), paths=REAL_PATHS)
    events = []
    try:
        async for event in router.stream_chat(
            ChatRequest(
                [{"role": "user", "content": "Say hello."}],
                max_tokens=24,
                seed=1,
                extra={"cache_prompt": False},
            )
        ):
            events.append(event)
    finally:
        await router.aclose()
    assert any(isinstance(e, TextDelta) for e in events)
    done = events[-1]
    assert isinstance(done, Done)
    comp = done.completion
    assert comp.text and comp.finish_reason in {"stop", "length"}
    assert comp.usage is not None and comp.usage.output_tokens > 0
    assert comp.timings is not None and comp.timings.prompt_tokens is not None


async def test_slots_are_discovered_from_props(embedded_url):
    client = ModelClient(Target(id="local", runtime="embedded", base_url=embedded_url))
    try:
        assert await client.discover_slots() == 2
        assert MODEL_ALIAS in await client.list_models()
    finally:
        await client.aclose()


@pytest.mark.parametrize("seed", [11, 12, 13])
async def test_grammar_constrained_memory_step_parses(embedded_url, seed):
    router = Router(_settings(embedded_url), paths=REAL_PATHS)
    try:
        answer = await router.memory_complete(
            SYSTEM, USER, 300, timeout_ms=120_000, extra={"seed": seed, "cache_prompt": False}
        )
    finally:
        await router.aclose()
    assert answer.constrained is True
    parsed = parse_envelope(answer.text, reference_text=USER)
    assert parsed.failure != "unparseable", answer.text
    assert answer.text.startswith("<operations>[")


async def test_memory_deadline_is_honoured_and_the_server_stays_usable(embedded_url):
    router = Router(_settings(embedded_url, constrainedDecoding=False), paths=REAL_PATHS)
    try:
        with pytest.raises(ModelTimeoutError):
            await router.memory_complete(
                SYSTEM, "Count from 1 to 5000.", 4000, timeout_ms=300,
                extra={"ignore_eos": True, "cache_prompt": False},
            )  # fmt: skip
        answer = await router.memory_complete(SYSTEM, USER, 8, timeout_ms=120_000)
        assert answer.usage is not None and answer.usage.output_tokens <= 8
    finally:
        await router.aclose()


async def test_embedded_server_lifecycle_start_ready_stop(tmp_path):
    paths = replace(REAL_PATHS, state=tmp_path / "state")
    server = EmbeddedServer(paths)
    url = await server.start()
    try:
        async with httpx.AsyncClient() as http:
            assert (await http.get(url.removesuffix("/v1") + "/health")).status_code == 200
        assert server.running
    finally:
        await server.stop()
    assert not server.running
    assert (tmp_path / "state" / "local-model" / "server.log").exists()


async def test_router_starts_the_embedded_target_on_first_use(tmp_path):
    paths = replace(REAL_PATHS, state=tmp_path / "state")
    manager = LocalModelManager(paths)
    router = Router(Settings(), paths=paths, local=manager)
    assert router.chat_route.target.runtime == "embedded"  # no targets: embedded default
    try:
        answer = await router.memory_complete(SYSTEM, USER, 200, timeout_ms=120_000)
        assert parse_envelope(answer.text).failure != "unparseable"
        assert answer.target_id == "embedded"
    finally:
        await router.aclose()
        await manager.stop()


def test_targets_probe_shows_the_embedded_target_healthy(isolated_dirs):
    env = subprocess_env(
        {
            "CLIO_ACP_LOCAL_MODEL": str(model_path(REAL_PATHS)),
            "CLIO_ACP_LLAMA_SERVER": str(server_binary()),
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "clio_acp", "targets", "--probe", "--json"],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["targets"]
    assert row["id"] == "embedded" and row["reachable"] is True
    assert row["capacity"] == 2 and MODEL_ALIAS in row["models"]
