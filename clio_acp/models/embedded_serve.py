"""The embedded model's server process: llama.cpp's HTTP server from the ``xllamacpp`` wheel.

Run as ``python -m clio_acp.models.embedded_serve --model GGUF --port N ...`` by
``clio_acp.models.local.EmbeddedServer`` (never imported by the parent). It hosts
llama.cpp's OpenAI-compatible server (``xllamacpp.Server``: ``/health``, ``/props``,
``/v1/models``, ``/v1/chat/completions`` with ``grammar`` / ``json_schema``) on
127.0.0.1 only, requires the API key named by ``$CLIO_ACP_EMBEDDED_API_KEY`` (the
key never appears on the command line), renders tools with the chat template it is
given, and writes everything the native code prints (its stdout and stderr, fds 1
and 2) to a size-rotated log. It runs until SIGTERM/SIGINT or its parent dies.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import logging.handlers
import os
import signal
import sys
import threading
from pathlib import Path

API_KEY_ENV = "CLIO_ACP_EMBEDDED_API_KEY"
LOG_MAX_BYTES = 5 * 1024 * 1024
"""The log rotates at this size (bytes); ``LOG_BACKUPS`` older files are kept."""
LOG_BACKUPS = 2


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m clio_acp.models.embedded_serve")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", required=True, help="model id the server reports")
    parser.add_argument("--parallel", type=int, default=2, help="request slots")
    parser.add_argument("--ctx-size", type=int, default=8192, help="tokens, split over slots")
    parser.add_argument("--threads", type=int, default=0, help="0: llama.cpp's default")
    parser.add_argument(
        "--threads-batch", type=int, default=0, help="prompt threads; 0: as --threads"
    )
    parser.add_argument(
        "--cache-reuse",
        type=int,
        default=0,
        help="min tokens of a cached chunk reused by KV shifting after a deletion; 0: off",
    )
    parser.add_argument("--temp", type=float, default=0.2, help="default sampling temperature")
    parser.add_argument(
        "--repeat-penalty", type=float, default=1.0, help="default repetition penalty"
    )
    parser.add_argument("--chat-template-file", default=None, help="Jinja chat template")
    parser.add_argument("--log-file", required=True, help="rotated log of the server")
    return parser.parse_args(argv)


def _rotated_output(log_file: Path) -> logging.Logger:
    """Send fds 1 and 2 (native prints included) through a pipe to a rotating log."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        log_file, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("clio_acp.embedded_serve")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump() -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            for raw in pipe:
                logger.info(raw.decode("utf-8", "replace").rstrip("\n"))

    threading.Thread(target=pump, name="log-pump", daemon=True).start()
    return logger


def _params(args: argparse.Namespace, api_key: str):  # -> xllamacpp.CommonParams
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.api_keys = [api_key]
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size
    params.use_jinja = True
    params.n_cache_reuse = args.cache_reuse
    params.sampling.temp = args.temp
    params.sampling.penalty_repeat = args.repeat_penalty
    if args.chat_template_file:
        params.chat_template = Path(args.chat_template_file).read_text(encoding="utf-8")
    if args.threads > 0:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    if args.threads_batch > 0:
        params.cpuparams_batch.n_threads = args.threads_batch
    return params


def main(argv: list[str] | None = None) -> int:
    """Run the embedded llama.cpp server (``xllamacpp``) in this process until SIGTERM or
    SIGINT. The API key comes from the environment; output goes to the rotated log file.
    Returns the exit code: 0 after a signal, 1 when the server cannot start, 2 when the key
    is missing."""
    args = _parse(argv)
    # Blocked before any thread starts, so every thread inherits it and sigwait gets it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    api_key = os.environ.pop(API_KEY_ENV, "")
    if not api_key:
        sys.stderr.write(f"embedded_serve: ${API_KEY_ENV} is not set\n")
        return 2
    logger = _rotated_output(Path(args.log_file))
    try:
        import xllamacpp

        server = xllamacpp.Server(_params(args, api_key))
    except Exception as exc:  # a missing wheel or a model llama.cpp cannot load
        logger.error("embedded_serve: cannot start: %r", exc)
        return 1
    logger.info("embedded_serve: listening on %s", server.listening_address)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    logger.info("embedded_serve: stopping")
    with contextlib.suppress(Exception):
        for handler in logger.handlers:
            handler.flush()
    # The native server's threads do not join on interpreter shutdown.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
