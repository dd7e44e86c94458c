"""One real turn against the embedded local model (issue 6 item 9). Slow; CI runs it
after ``.ci/run`` installs the model. Asserts shape, never wording."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from clio_acp.models.local import MODEL_FILE, local_status
from clio_acp.paths import APP_NAME, resolve_paths
from clio_acp.session.manager import SessionManager
from clio_acp.settings import Settings


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
        session.loop.limits.max_output_tokens = 48
        events = []
        session.subscribe(events.append)
        stop = await session.prompt("Say hello in one short sentence.")
        assert stop in ("end_turn", "max_tokens", "max_turn_requests")
        assert not [e for e in events if e.type == "notice" and e.level == "error"]
        answers = [r for r in session.rows() if r.type == "assistant"]
        assert answers and answers[0].data["usage"]["output_tokens"] > 0
        assert any(e.type == "usage_update" for e in events)
    finally:
        await manager.aclose()
