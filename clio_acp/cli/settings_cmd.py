"""``clio-acp settings show|path``: the effective settings and where they come from.

Also owns :func:`load_for_cli`, the one settings loader of the one-shot commands
(``run``, ``targets``, ``models``, ``replay``, ``eval``, ``doctor``): an unusable
settings file stops them with exit code 2 before they do anything. The long-running
servers (``acp``, ``lsp``) do not use it; they keep the previous good settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from clio_acp.paths import Paths, resolve_paths
from clio_acp.settings import (
    SETTINGS_FILE_ENV,
    SettingsError,
    SettingsStore,
    load_settings,
    open_settings,
    settings_path,
)

SETTINGS_USAGE_EXIT = 2
"""Exit code of a one-shot command whose settings cannot be used (like a usage error)."""


def load_for_cli(*, quiet: bool = False, strict: bool = True) -> tuple[Paths, SettingsStore]:
    """Paths and the settings store of a one-shot command.

    With ``strict`` (the default) a settings file that cannot be used -- invalid YAML
    or values, unreadable, or a ``$CLIO_ACP_SETTINGS`` naming a missing file -- prints
    the ``SettingsError`` (file, line, key) on stderr and raises ``SystemExit(2)``:
    a one-shot command must not run on defaults the user did not ask for. Without
    ``strict`` the problem is reported (unless ``quiet``) and the defaults stay.
    """
    paths = resolve_paths()
    path = settings_path(paths.config)
    if strict:
        problem = settings_problem(path)
        if problem is not None:
            print(f"clio-acp: invalid settings: {problem}", file=sys.stderr)
            raise SystemExit(SETTINGS_USAGE_EXIT)
    store = open_settings(paths.config)
    if store.error is not None and not quiet:
        print(f"clio-acp: settings not applied: {store.error}", file=sys.stderr)
    return paths, store


def settings_problem(path: Path, env: Mapping[str, str] | None = None) -> SettingsError | None:
    """Why the settings at ``path`` (plus the environment ``env``, default
    ``os.environ``) cannot be used, or None when they load."""
    env = os.environ if env is None else env
    if env.get(SETTINGS_FILE_ENV) and not path.exists():
        return SettingsError(str(path), f"file named by ${SETTINGS_FILE_ENV} does not exist")
    try:
        load_settings(path, env=env)
    except SettingsError as exc:
        return exc
    except OSError as exc:
        return SettingsError(str(path), f"cannot read: {exc}")
    return None


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp settings show|path`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "settings",
        help="show the effective settings or the settings file path",
        description="Settings load from <config>/settings.yaml (or $CLIO_ACP_SETTINGS), "
        "then environment overrides (CLIO_ACP_CHAT_TARGET, CLIO_ACP_MEMORY_ENABLED, "
        "CLIO_ACP_SETTINGS_JSON, ...). See docs/configuration.md.",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the effective settings (YAML, camelCase)")
    show.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    show.set_defaults(func=run_show)
    path = verbs.add_parser("path", help="print the settings file path")
    path.set_defaults(func=run_path)


def run_show(args: argparse.Namespace) -> int:
    """Print the effective settings as YAML (or ``--json`` with the file and any error). Exit
    0, or 1 when the settings file is not applied (the reason on stderr; defaults or the
    last good values are shown)."""
    _paths, store = load_for_cli(quiet=True, strict=False)
    data = store().model_dump(by_alias=True, mode="json")
    if args.json:
        print(
            json.dumps(
                {"file": str(store.path), "error": _error(store), "settings": data}, indent=2
            )
        )
    else:
        print(f"# file: {store.path}{'' if store.path.exists() else ' (missing: defaults)'}")
        if store.error is not None:
            print(f"# NOT APPLIED: {store.error}")
        print(yaml.safe_dump(data, sort_keys=False), end="")
    if store.error is not None:
        print(f"clio-acp: settings not applied: {store.error}", file=sys.stderr)
        return 1
    return 0


def _error(store: SettingsStore) -> dict[str, object] | None:
    err = store.error
    if err is None:
        return None
    return {"source": err.source, "key": err.key, "line": err.line, "problem": err.problem}


def run_path(args: argparse.Namespace) -> int:
    """Print the settings file path (``$CLIO_ACP_SETTINGS`` or ``<config>/settings.yaml``).
    Exit 0."""
    print(settings_path(resolve_paths().config))
    return 0
