"""Where clio_acp keeps its files (ARCHITECTURE.md "Where files live").

Four roots resolved with platformdirs, each overridable by an environment variable:
``data`` (``CLIO_ACP_DATA_DIR``), ``state`` (``CLIO_ACP_STATE_DIR``), ``config``
(``CLIO_ACP_CONFIG_DIR``) and ``cache`` (``CLIO_ACP_CACHE_DIR``). Every command and
server resolves paths through this module; nothing else hard-codes a location.
Directories are not created here; writers create what they write into.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "clio-acp"

_ENV = {
    "data": "CLIO_ACP_DATA_DIR",
    "state": "CLIO_ACP_STATE_DIR",
    "config": "CLIO_ACP_CONFIG_DIR",
    "cache": "CLIO_ACP_CACHE_DIR",
}


@dataclass(frozen=True)
class Paths:
    """The four resolved roots (absolute paths) and the well-known files inside them."""

    data: Path
    state: Path
    config: Path
    cache: Path

    @property
    def records_file(self) -> Path:
        """``<data>/memory/records.json``: durable memory records (MEMORY_SPEC §6)."""
        return self.data / "memory" / "records.json"

    @property
    def steps_file(self) -> Path:
        """``<state>/memory/steps.jsonl``: content-free memory step telemetry (§5)."""
        return self.state / "memory" / "steps.jsonl"

    @property
    def usage_file(self) -> Path:
        """``<state>/usage/out-of-turn.jsonl``: background (memory) usage rows (§5)."""
        return self.state / "usage" / "out-of-turn.jsonl"

    @property
    def journal_file(self) -> Path:
        """``<state>/sessions.sqlite``: the session journal (SQLite, WAL mode)."""
        return self.state / "sessions.sqlite"

    @property
    def settings_file(self) -> Path:
        """``<config>/settings.yaml``: user settings."""
        return self.config / "settings.yaml"

    def as_dict(self) -> dict[str, str]:
        """The four roots as strings, the shape ``clio-acp paths --json`` prints."""
        return {k: str(getattr(self, k)) for k in ("data", "state", "config", "cache")}


def resolve_paths(env: os._Environ[str] | dict[str, str] | None = None) -> Paths:
    """Resolve the four roots from ``env`` (default ``os.environ``) and platformdirs.

    An environment override that is set but empty is ignored. Relative overrides are
    made absolute against the current directory.
    """
    env = os.environ if env is None else env
    defaults = {
        "data": platformdirs.user_data_dir(APP_NAME),
        "state": platformdirs.user_state_dir(APP_NAME),
        "config": platformdirs.user_config_dir(APP_NAME),
        "cache": platformdirs.user_cache_dir(APP_NAME),
    }
    roots = {}
    for key, var in _ENV.items():
        value = env.get(var) or defaults[key]
        roots[key] = Path(value).expanduser().absolute()
    return Paths(**roots)


def handoffs_dir(workspace: Path) -> Path:
    """``<workspace>/.clio-coder/handoffs``: the folder name is kept from the reference
    implementation so handoff files move between the two (MEMORY_SPEC §12)."""
    return workspace / ".clio-coder" / "handoffs"


WORKSPACE_FOLDER = ".clio-coder"
"""The folder clio writes into a workspace (memory document, handoffs)."""
WORKSPACE_GITIGNORE = "*\n"
"""``.clio-coder/.gitignore``: nothing in the folder is the user's to commit."""


def ensure_workspace_folder(workspace: Path) -> Path:
    """Create ``<workspace>/.clio-coder`` with its own ``.gitignore`` (``*``) if absent;
    returns the folder. Raises ``OSError`` when it cannot be written. Blocking."""
    folder = workspace / WORKSPACE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text(WORKSPACE_GITIGNORE, encoding="utf-8")
    return folder
