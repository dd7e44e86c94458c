"""One real turn against the embedded local model (issue 6 item 9). Slow; CI runs it
after ``.ci/run`` installs the model. Asserts shape, never wording."""

from __future__ import annotations

import json
from pathlib import Path

import platformdirs
import pytest

from clio_acp.models.local import MODEL_FILE, local_status
from clio_acp.paths import APP_NAME, resolve_paths
from clio_acp.session.manager import SessionManager
from clio_acp.settings import Settings
from tests.conftest import EMBEDDED_KEY_ENV

DEMO_PROMPT = "List the files in this folder."
"""README's demo turn."""


@pytest.mark.slow
async def test_real_turn_against_the_embedded_model(monkeypatch, workspace):
    # The model is installed in the user's data folder; tests run with isolated
    # folders, so point the embedded target at the installed file.
    installed = Path(platformdirs.user_data_dir(APP_NAME)) / "local-model" / MODEL_FILE
    if installed.is_file():
        monkeypatch.setenv("CLIO_ACP_LOCAL_MODEL", str(installed))
    paths = resolve_paths()
    if not local_status(paths).installed:
        pytest.skip("embedded model not installed (clio-acp local install)")
    settings = Settings()  # no targets: chat defaults to the embedded model
    manager = SessionManager(paths=paths, settings=lambda: settings, max_turn_requests=2)
    try:
        session = await manager.new_session(workspace, mode="plan")
        session.loop.limits.max_output_tokens = 16  # the shape of the turn, not its length
        events = []
        session.subscribe(events.append)
        # A prompt that names a tool's action: the constrained call phase offers the
        # shortlist of matching tools (~400 prompt tokens) instead of all of them (~800,
        # ~10 ms of CPU each here); the every-tool fallback is tested in
        # tests/models/test_tool_calling.py.
        stop = await session.prompt(DEMO_PROMPT)
        assert stop in ("end_turn", "max_tokens", "max_turn_requests")
        assert not [e for e in events if e.type == "notice" and e.level == "error"]
        answers = [r for r in session.rows() if r.type == "assistant"]
        assert answers and answers[0].data["usage"]["output_tokens"] > 0
        assert any(e.type == "usage_update" for e in events)
    finally:
        await manager.aclose()


@pytest.mark.slow
def test_readme_demo_calls_a_tool_and_ends_by_itself_in_4_of_5_seeds(tmp_path, run_cli, request):
    # README's demo command, seed by seed, each a real `clio-acp run` process. The seeds
    # share one embedded server (``embedded_url``: the command and model `clio-acp run`
    # would start), so each run pays its turn, not a server start and the cold prompt;
    # the route is the embedded runtime's (constrained tool calls). Output is capped at
    # 64 tokens instead of the default 384 (chat.maxOutputTokens,
    # tests/models/test_chat_route.py): the call phase's JSON call takes ~27, and the
    # answer phase after the listing has no tools, so the cap cannot turn a loop into
    # an ending. What is asserted — a completed tool call, then the turn ending by
    # itself (end_turn, or the cap) rather than looping — is the same; at 128 most
    # answers ran to the cap too, ~19 ms of CPU per token here. The implicit start of
    # the server is tested by the turn above and in tests/models.
    installed = Path(platformdirs.user_data_dir(APP_NAME)) / "local-model" / MODEL_FILE
    if not installed.is_file():
        pytest.skip("embedded model not installed (clio-acp local install)")
    url = request.getfixturevalue("embedded_url")
    target = {"id": "embedded", "runtime": "embedded", "url": url, "apiKeyEnv": EMBEDDED_KEY_ENV}
    env = {"CLIO_ACP_LOCAL_MODEL": str(installed)}
    workspace = tmp_path / "project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "README.md").write_text("# project\n")
    (workspace / "src" / "main.py").write_text("print('hi')\n")
    good, bad, listings = [], [], []
    for seed in range(1, 6):
        if len(good) >= 4 or len(bad) >= 2:  # the verdict over five seeds is known
            break
        chat = {"target": "embedded", "seed": seed, "maxOutputTokens": 64}
        settings = {"targets": [target], "chat": chat}
        env["CLIO_ACP_SETTINGS_JSON"] = json.dumps(settings)
        result = run_cli(
            "run", "--mode", "plan", "--json", "--workspace", str(workspace), DEMO_PROMPT,
            env=env, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        events = [json.loads(line) for line in result.stdout.splitlines()]
        finished = [e for e in events if e["type"] == "tool_call_finished"]
        ended = [e for e in events if e["type"] == "turn_ended"]
        if (
            any(e["status"] == "completed" for e in finished)
            and ended
            and ended[-1]["stop_reason"] in ("end_turn", "max_tokens")
        ):
            good.append(seed)
            listings.append("\n".join(e["output"] for e in finished))
        else:
            bad.append(seed)
    assert len(good) >= 4, f"seeds that called a tool and ended: {good}; others: {bad}"
    assert any("README.md" in listing and "src/" in listing for listing in listings)
