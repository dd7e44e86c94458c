"""``clio-acp settings show|path``: the effective settings and where they come from."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from clio_acp.paths import Paths, resolve_paths
from clio_acp.settings import SettingsStore, settings_path


def load_for_cli(*, quiet: bool = False) -> tuple[Paths, SettingsStore]:
    """Paths and the settings store every command uses; a settings problem is
    reported on stderr and the defaults (or previous layers) stay in force."""
    paths = resolve_paths()
    store = SettingsStore(settings_path(paths.config))
    if store.error is not None and not quiet:
        print(f"clio-acp: settings not applied: {store.error}", file=sys.stderr)
    return paths, store


def register(subparsers: argparse._SubParsersAction) -> None:
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
    _paths, store = load_for_cli(quiet=True)
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
    print(settings_path(resolve_paths().config))
    return 0
