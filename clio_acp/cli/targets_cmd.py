"""``clio-acp targets [--probe]`` and ``clio-acp models --target ID``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from clio_acp.cli.settings_cmd import load_for_cli
from clio_acp.models.local import local_manager
from clio_acp.models.probe import ProbeResult, probe_target
from clio_acp.models.routing import Router


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp targets [--probe] [--json]`` and ``clio-acp models --target ID`` to
    ``subparsers``."""
    targets = subparsers.add_parser(
        "targets",
        help="list model targets and the routes using them (--probe: check each)",
        description="List the targets of settings.yaml (plus the embedded model when "
        "installed), which role uses each, and their capacity. --probe contacts each "
        "target: reachability, models, declared and discovered capacity.",
    )
    targets.add_argument("--probe", action="store_true", help="contact every target")
    targets.add_argument("--json", action="store_true", help="print JSON")
    targets.set_defaults(func=run_targets)
    models = subparsers.add_parser(
        "models",
        help="list the models a target serves",
        description="GET /v1/models on one target.",
    )
    models.add_argument("--target", required=True, metavar="ID", help="target id")
    models.add_argument("--json", action="store_true", help="print a JSON list")
    models.set_defaults(func=run_models)


def _roles(router: Router, target_id: str) -> list[str]:
    roles = []
    if router.chat_route and router.chat_route.target.id == target_id:
        roles.append(f"chat({router.chat_route.model or 'default'})")
    if router.memory_route and router.memory_route.target.id == target_id:
        roles.append(f"memory({router.memory_route.model or 'default'})")
    return roles


async def _targets(args: argparse.Namespace) -> int:
    paths, store = load_for_cli()
    router = Router(store(), paths=paths)
    rows: list[dict[str, object]] = []
    failed = False
    try:
        for target in router.table.targets.values():
            row: dict[str, object] = {
                "id": target.id,
                "runtime": target.runtime,
                "url": target.base_url,
                "roles": _roles(router, target.id),
                "declaredCapacity": target.declared_capacity,
            }
            if args.probe:
                result: ProbeResult = await probe_target(router, target)
                row.update(result.as_dict())
                failed |= not result.reachable
            rows.append(row)
    finally:
        await router.aclose()
        await local_manager(paths).stop()
    if args.json:
        print(json.dumps({"targets": rows, "notes": list(router.table.notes)}, indent=2))
        return 1 if failed else 0
    if not rows:
        print(
            "no targets: add one to settings.yaml or run `clio-acp local install` (docs/configuration.md)"
        )
    for row in rows:
        roles = ", ".join(row["roles"]) or "-"  # type: ignore[arg-type]
        print(
            f"{row['id']}  runtime={row['runtime']}  url={row['url'] or '(started on use)'}  roles={roles}"
        )
        if args.probe:
            if row["reachable"]:
                models = ", ".join(row["models"][:5]) or "-"  # type: ignore[index]
                print(
                    f"    healthy  models={models}  capacity={row['capacity'] or 'unbounded'}"
                    f" ({row['capacitySource']}; declared={row['declaredCapacity']},"
                    f" discovered={row['discoveredSlots']})  {row['latencyMs']} ms"
                )
            else:
                print(f"    UNREACHABLE: {row['error']}")
        else:
            print(f"    declared capacity={row['declaredCapacity'] or '-'}")
    for note in router.table.notes:
        print(f"note: {note}")
    return 1 if failed else 0


def run_targets(args: argparse.Namespace) -> int:
    """List the configured targets with the roles that use them; ``--probe`` asks each for
    health, models and capacity. Exit 0, or 1 when a probed target is unreachable."""
    return asyncio.run(_targets(args))


async def _models(args: argparse.Namespace) -> int:
    paths, store = load_for_cli()
    router = Router(store(), paths=paths)
    try:
        target = router.table.targets.get(args.target)
        if target is None:
            known = ", ".join(router.table.targets) or "none"
            print(f"clio-acp: no target {args.target!r} (known: {known})", file=sys.stderr)
            return 2
        result = await probe_target(router, target)
    finally:
        await router.aclose()
        await local_manager(paths).stop()
    if not result.reachable:
        print(f"clio-acp: {result.error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.models))
    else:
        for model in result.models:
            print(model)
    return 0


def run_models(args: argparse.Namespace) -> int:
    """List the models target ``--target`` serves (``/v1/models``). Exit 0, 1 when it is
    unreachable, 2 for an unknown target."""
    return asyncio.run(_models(args))
