"""``clio-acp local install|serve|status``: the embedded local model (docs/configuration.md)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time

from clio_acp.models.errors import RouteError
from clio_acp.models.local import (
    EmbeddedServer,
    install_model,
    install_server,
    local_status,
)
from clio_acp.paths import resolve_paths


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``clio-acp local install|serve|status`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "local",
        help="install or serve the embedded local model (SmolLM2-135M via llama.cpp)",
        description="The embedded model runs the whole stack offline with no keys. "
        "`install` downloads the model (93 MB) and, if missing, the prebuilt llama.cpp "
        "server wheel (xllamacpp) from PyPI: seconds, nothing is compiled.",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    install = verbs.add_parser("install", help="download the model and the prebuilt server")
    part = install.add_mutually_exclusive_group()
    part.add_argument("--model-only", action="store_true", help="only the GGUF model")
    part.add_argument("--server-only", action="store_true", help="only the server wheel")
    install.set_defaults(func=run_install)
    serve = verbs.add_parser("serve", help="run the embedded server in the foreground")
    serve.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    serve.set_defaults(func=run_serve)
    status = verbs.add_parser("status", help="what is installed")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=run_status)


def _sayer(started: float):
    """Progress lines on stderr, each with the seconds since ``started``."""

    def say(message: str) -> None:
        elapsed = time.monotonic() - started
        print(f"clio-acp local [{elapsed:5.1f} s] {message}", file=sys.stderr, flush=True)

    return say


def run_install(args: argparse.Namespace) -> int:
    """Install the embedded model (93 MB) and the prebuilt llama.cpp server; progress on
    stderr. Exit 0 when installed (or already there), 1 when a download or install step
    failed."""
    paths = resolve_paths()
    say = _sayer(time.monotonic())
    try:
        if not args.server_only:
            install_model(paths, say=say)
        if not args.model_only:
            install_server(say=say)
    except RouteError as exc:
        print(f"clio-acp: {exc}", file=sys.stderr)
        return 1
    say("done; check with: clio-acp targets --probe")
    return 0


async def _serve(port: int | None) -> int:
    server = EmbeddedServer(resolve_paths(), port=port)
    try:
        url = await server.start()
    except RouteError as exc:
        print(f"clio-acp: {exc}", file=sys.stderr)
        return 1
    print(url, flush=True)
    _sayer(time.monotonic())(
        f"serving {url} (slots={server.slots} x {server.slot_context} tokens, "
        f"API key {server.api_key}); Ctrl-C stops it"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.create_task(server.wait())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    exited = waiter.done()
    await server.stop()
    if exited:
        print(f"clio-acp: the embedded server exited; see {server.log_file}", file=sys.stderr)
        return 1
    return 0


def run_serve(args: argparse.Namespace) -> int:
    """Start the embedded server, print its OpenAI base URL on stdout, serve until
    SIGINT/SIGTERM. Exit 0 after a signal, 1 when it cannot start or exits on its own."""
    return asyncio.run(_serve(args.port))


def run_status(args: argparse.Namespace) -> int:
    """Print what is installed (model path and size, server package; ``--json`` for one
    object). Exit 0 when both are installed, else 1."""
    status = local_status(resolve_paths())
    if args.json:
        print(json.dumps(status.as_dict(), indent=2))
    else:
        print(
            f"model   {'installed' if status.model_installed else 'missing'}  {status.model_path}"
        )
        print(
            f"server  {'installed' if status.server else 'missing'}  "
            f"{'xllamacpp ' + status.server if status.server else ''}"
        )
        if not status.installed:
            print("install with: clio-acp local install")
    return 0 if status.installed else 1
