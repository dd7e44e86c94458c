"""``clio-acp doctor``: what a user pastes into a bug report (versions, paths,
settings, routes, targets, embedded model). Offline unless ``--probe``."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import platform
import sys

from clio_acp import __version__
from clio_acp.cli.settings_cmd import load_for_cli
from clio_acp.models.local import local_manager, local_status
from clio_acp.models.probe import probe_target
from clio_acp.models.routing import Router

_PACKAGES = (
    "httpx",
    "httpx-sse",
    "pydantic",
    "pygls",
    "lsprotocol",
    "agent-client-protocol",
    "watchfiles",
    "platformdirs",
    "PyYAML",
    "filelock",
    "xllamacpp",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp doctor [--probe] [--json]`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "doctor",
        help="versions, paths, settings, routes, targets and the embedded model",
        description="Print a report to paste into a bug report. Contacts no server unless --probe.",
    )
    parser.add_argument("--probe", action="store_true", help="also contact every target")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


async def _report(probe: bool) -> dict[str, object]:
    paths, store = load_for_cli(quiet=True)
    router = Router(store(), paths=paths)
    routes = {}
    for name, route in (("chat", router.chat_route), ("memory", router.memory_route)):
        routes[name] = None if route is None else {"target": route.target.id, "model": route.model}
    targets = []
    try:
        for target in router.table.targets.values():
            entry: dict[str, object] = {
                "id": target.id,
                "runtime": target.runtime,
                "url": target.base_url,
                "declaredCapacity": target.declared_capacity,
                "apiKeyEnv": target.api_key_env,
            }
            if probe:
                entry["probe"] = (await probe_target(router, target)).as_dict()
            targets.append(entry)
    finally:
        await router.aclose()
        await local_manager(paths).stop()
    err = store.error
    return {
        "clioAcp": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in _PACKAGES},
        "paths": paths.as_dict(),
        "settings": {
            "file": str(store.path),
            "exists": store.path.exists(),
            "error": None if err is None else str(err),
            "memoryEnabled": store().context.memory.enabled,
        },
        "routes": routes,
        "memoryTier": _memory_tier(store().context.memory.enabled, router),
        "routeNotes": list(router.table.notes),
        "targets": targets,
        "embedded": local_status(paths).as_dict(),
    }


def _memory_tier(enabled: bool, router: Router) -> str:
    """``off`` (kill switch), ``rules`` (no memory route: the default) or ``llm``.
    The LLM tier is opt-in (MEMORY_SPEC §14.1): only ``context.memory.target`` sets it."""
    if not enabled:
        return "off"
    return "rules" if router.memory_route is None else "llm"


_TIER_LINES = {
    "off": "memory: disabled (context.memory.enabled: false)",
    "rules": "memory: rules tier only; LLM tier off (opt-in: set context.memory.target)",
    "llm": "memory: rules tier + LLM tier on the memory route",
}


def run(args: argparse.Namespace) -> int:
    """Print the bug-report summary (versions, packages, paths, settings state, memory tier,
    routes, targets, embedded model; with ``--probe`` each target is asked for health and
    models). ``--json`` prints one object. Always exits 0: problems are reported, not fatal."""
    report = asyncio.run(_report(args.probe))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"clio-acp {report['clioAcp']}  python {report['python']}  {report['platform']}")
    packages = report["packages"]
    assert isinstance(packages, dict)
    print("packages: " + ", ".join(f"{k} {v or '-'}" for k, v in packages.items()))
    print("paths:")
    for key, value in report["paths"].items():  # type: ignore[union-attr]
        print(f"  {key:7} {value}")
    settings = report["settings"]
    assert isinstance(settings, dict)
    state = "missing (defaults)" if not settings["exists"] else "ok"
    if settings["error"]:
        state = f"NOT APPLIED: {settings['error']}"
    print(f"settings: {settings['file']}  {state}")
    print(_TIER_LINES[str(report["memoryTier"])])
    for role, route in report["routes"].items():  # type: ignore[union-attr]
        where = "unset" if route is None else f"{route['target']} / {route['model'] or 'default'}"
        if role == "memory" and route is None:
            where += " (opt-in: nothing picks a memory model for you)"
        print(f"route {role}: {where}")
    for note in report["routeNotes"]:  # type: ignore[union-attr]
        print(f"  note: {note}")
    for target in report["targets"]:  # type: ignore[union-attr]
        line = f"target {target['id']}: {target['runtime']} {target['url'] or '(started on use)'}"
        probe = target.get("probe")
        if probe:
            line += "  healthy" if probe["reachable"] else f"  UNREACHABLE: {probe['error']}"
        print(line)
    embedded = report["embedded"]
    assert isinstance(embedded, dict)
    print(
        f"embedded model: {'installed' if embedded['installed'] else 'not installed'}"
        f" (model {embedded['model']}{'' if embedded['modelInstalled'] else ' missing'};"
        f" server {embedded['server'] or 'missing'})"
    )
    return 0
