"""Hostile input generators and wire harnesses shared by the property tests (hypothesis
drives the ``random.Random`` through ``st.randoms()``) and ``bench/hostile_inputs.py``
(10,000 inputs per framer and parser from a stated seed).

Generators take a ``random.Random`` and return bytes or text; the wire harnesses run
``python -m clio_acp acp`` / ``lsp`` as a real subprocess, write inputs, and track which
request ids were answered, so "the process survives and every request gets a reply"
is checked on the real framing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]

# -- generic pieces ---------------------------------------------------------------

_TOKENS = [
    "{", "}", "[", "]", '"', ":", ",", "\\", "\\u0000", "\\ud800", "null", "true", "1e999",
    "-0", "NaN", "\n", "\r", "\t", "\x00", "\u2028", "\ufeff", "é", "😀", "\ud800", "<", ">",
    "</operations>", "<operations>", "```", "Memory:", "<system-reminder>", "jsonrpc",
    "Content-Length: ", "\r\n", "9" * 30, "tm-k-1", "A" * 300,
]  # fmt: skip


def random_text(rng: random.Random, max_len: int = 200) -> str:
    """Text from printable, control, surrogate, astral and structural pieces."""
    parts: list[str] = []
    while sum(map(len, parts)) < rng.randint(0, max_len):
        kind = rng.random()
        if kind < 0.4:
            parts.append(rng.choice(_TOKENS))
        elif kind < 0.8:
            parts.append("".join(chr(rng.randint(32, 126)) for _ in range(rng.randint(1, 12))))
        else:
            parts.append("".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(1, 4))))
    return "".join(parts)


def random_bytes(rng: random.Random, max_len: int = 200) -> bytes:
    return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, max_len)))


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """A JSON-compatible value, sometimes deep, sometimes wide, odd numbers included."""
    roll = rng.random()
    if depth > 4 or roll < 0.35:
        return rng.choice(
            [None, True, False, 0, -1, 2**63, 2**70, 1.5, -0.0, "", "x", random_text(rng, 20)]
        )
    if roll < 0.6:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["id", "method", "params", "sessionId", "cwd", "text", "version", random_text(rng, 8)]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def deep_json_text(rng: random.Random) -> str:
    depth = rng.choice([100, 1000, 5000, 20000])
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    return opener * depth + "1" + closer * depth


def mutate(rng: random.Random, seed: str, rounds: int | None = None) -> str:
    """``seed`` with a few random edits (insert, delete, duplicate, replace)."""
    text = seed
    for _ in range(rounds if rounds is not None else rng.randint(1, 6)):
        at = rng.randint(0, len(text))
        op = rng.random()
        if op < 0.35:
            text = text[:at] + rng.choice([*_TOKENS, random_text(rng, 10)]) + text[at:]
        elif op < 0.6 and text:
            end = min(len(text), at + rng.randint(1, 20))
            text = text[:at] + text[end:]
        elif op < 0.8 and text:
            end = min(len(text), at + rng.randint(1, 40))
            text = text[:at] + text[at:end] * rng.randint(2, 5) + text[end:]
        else:
            text = text[:at] + chr(rng.randint(0, 0x10FFFF)) + text[at + 1 :]
    return text


def encode_any(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


# -- ACP: newline-delimited JSON-RPC ----------------------------------------------

ACP_METHODS = [
    "initialize", "session/new", "session/load", "session/prompt", "session/set_mode",
    "session/set_config_option", "session/list", "authenticate", "session/cancel",
    "_clio/session/board", "_clio/memory/propose", "fs/read_text_file", "", "x" * 300,
]  # fmt: skip


def acp_line(rng: random.Random, next_id: itertools.count) -> tuple[bytes, Any | None]:
    """One hostile line (no newline inside) and the id a reply must carry, if any."""
    roll = rng.random()
    if roll < 0.12:
        return random_bytes(rng).replace(b"\n", b" "), None
    if roll < 0.24:
        return encode_any(random_text(rng)).replace(b"\n", b" "), None
    if roll < 0.34:
        return json.dumps(random_json(rng)).encode(), None
    if roll < 0.37:
        return deep_json_text(rng).encode(), None
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": rng.choice(ACP_METHODS)}
    if rng.random() < 0.8:
        message["params"] = random_json(rng) if rng.random() < 0.5 else _acp_params(rng)
    if roll < 0.5:  # notification or a stray response: no reply owed
        if rng.random() < 0.5:
            message = {"jsonrpc": "2.0", "id": rng.randint(0, 9), "result": random_json(rng)}
        return json.dumps(message).encode(), None
    if roll < 0.58:  # unusable ids: an error may come back, none is owed by id
        message["id"] = rng.choice([None, True, 1.5, {"a": 1}, [1]])
        return json.dumps(message).encode(), None
    request_id: Any = next(next_id)
    if rng.random() < 0.5:
        request_id = f"r-{request_id}"
    message["id"] = request_id
    if not isinstance(message["method"], str) or message.get("jsonrpc") != "2.0":
        return json.dumps(message).encode(), None
    return json.dumps(message).encode(), request_id


def _acp_params(rng: random.Random) -> dict[str, Any]:
    return {
        "protocolVersion": rng.choice([1, 0, -1, "1", None, 2**40]),
        "clientCapabilities": random_json(rng),
        "cwd": rng.choice(["/tmp", "relative", "", "/nonexistent/\x00", random_text(rng, 20)]),
        "mcpServers": rng.choice([[], None, [random_json(rng)]]),
        "sessionId": rng.choice(["", "sess_x", random_text(rng, 12)]),
        "prompt": rng.choice([[], [{"type": "text", "text": random_text(rng)}], random_json(rng)]),
    }


# -- LSP: Content-Length framed JSON-RPC --------------------------------------------

LSP_METHODS = [
    "textDocument/didOpen", "textDocument/didChange", "textDocument/codeAction",
    "workspace/executeCommand", "workspace/didChangeConfiguration", "clio/prompt",
    "clio/sessions", "clio/memory", "$/cancelRequest", "initialized", "", "x" * 300,
]  # fmt: skip


def lsp_frame(rng: random.Random, next_id: itertools.count) -> tuple[bytes, Any | None]:
    """Junk header lines, then one exactly framed hostile body; the id owed a reply."""
    junk = b""
    for _ in range(rng.randint(0, 3)):
        line = rng.choice(
            [b"garbage", b"Content-Type: x", b"Content-Length: abc", b"Content-Length: -4",
             b"content-length: 9", b"Content-Length:12", b"\xff\xfe", random_bytes(rng, 30)]
        )  # fmt: skip
        junk += line.replace(b"\n", b" ").replace(b"\r", b" ") + rng.choice([b"\r\n", b"\n"])
    expected = None
    roll = rng.random()
    if roll < 0.15:
        body = random_bytes(rng, 300)
    elif roll < 0.3:
        body = encode_any(random_text(rng, 300))
    elif roll < 0.4:
        body = json.dumps(random_json(rng)).encode()
    elif roll < 0.43:
        body = deep_json_text(rng).encode()
    else:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": rng.choice(LSP_METHODS)}
        if rng.random() < 0.8:
            message["params"] = random_json(rng)
        if roll > 0.6:
            expected = next(next_id)
            message["id"] = expected
        body = json.dumps(message).encode()
    if not body:
        body = b" "
    return junk + b"Content-Length: %d\r\n\r\n" % len(body) + body, expected


def lsp_message(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


# -- the wire harness --------------------------------------------------------------


class WirePeer:
    """A ``clio-acp acp|lsp`` subprocess; remembers every reply id it sees.

    stderr goes to a file (a full pipe would stall the server, not the protocol)."""

    def __init__(self, face: str, env: dict[str, str], log_path: Path) -> None:
        self.face = face
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clio_acp", face],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=str(REPO_ROOT),
        )
        self.answered: set[Any] = set()
        self.messages: list[Any] = []
        """Every message read from stdout, in order."""
        self.garbage_on_stdout = 0
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        stream = self.proc.stdout
        while True:
            body = stream.readline() if self.face == "acp" else _read_frame(stream)
            if not body:
                break
            try:
                message = json.loads(body)
            except ValueError:
                self.garbage_on_stdout += 1
                continue
            with self._cond:
                self.messages.append(message)
                if isinstance(message, dict) and "id" in message and "method" not in message:
                    self.answered.add(_hashable(message["id"]))
                self._cond.notify_all()

    def send(self, data: bytes) -> bool:
        """Write raw bytes; False when the process no longer reads (it died)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def wait_for(self, ids: set[Any], timeout: float) -> set[Any]:
        """Wait until every id in ``ids`` was answered; returns those still missing."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                missing = {i for i in ids if _hashable(i) not in self.answered}
                left = deadline - time.monotonic()
                if not missing or left <= 0 or self.proc.poll() is not None:
                    return missing
                self._cond.wait(min(left, 0.5))

    def wait_for_request(self, method: str, timeout: float) -> dict[str, Any] | None:
        """Wait until the server sent a request for ``method``; returns it, or None."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.messages:
                    if isinstance(message, dict) and message.get("method") == method:
                        if "id" in message:
                            return message
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return None
                self._cond.wait(min(left, 0.5))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> int | None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        return self.proc.returncode


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True)


def _read_frame(stream: Any) -> bytes:
    length = None
    while True:
        line = stream.readline()
        if not line:
            return b""
        if line in (b"\r\n", b"\n"):
            if length is not None:
                return stream.read(length)
            continue
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())


def wire_env(home: Path) -> dict[str, str]:
    """An isolated environment for a child server: its own dirs, this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for name in ("data", "state", "config", "cache"):
        folder = home / name
        folder.mkdir(parents=True, exist_ok=True)
        env[f"CLIO_ACP_{name.upper()}_DIR"] = str(folder)
    return env


def start_peer(face: str, home: Path) -> WirePeer:
    """A started server with its handshake done (``initialize`` answered)."""
    peer = WirePeer(face, wire_env(home), home / f"{face}-stderr.log")
    if face == "acp":
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}}  # fmt: skip
        peer.send(json.dumps(init).encode() + b"\n")
    else:
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}}}  # fmt: skip
        peer.send(lsp_message(init))
        peer.send(lsp_message({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    if peer.wait_for({"init"}, 60):
        raise RuntimeError(f"{face} server did not answer initialize")
    return peer


def probe(peer: WirePeer, name: str, timeout: float = 60) -> bool:
    """Send a request for an unknown method; True when its (error) reply arrives."""
    message = {"jsonrpc": "2.0", "id": name, "method": "clio/noSuchMethod", "params": {}}
    data = json.dumps(message).encode() + b"\n" if peer.face == "acp" else lsp_message(message)
    if peer.face == "acp":
        data = b"\n" + data  # end any unterminated hostile line first
    return peer.send(data) and not peer.wait_for({name}, timeout)


def hostile_input(face: str, rng: random.Random, next_id: itertools.count) -> tuple[bytes, Any]:
    """One framed hostile input for ``face`` and the id owed a reply (or None)."""
    if face == "acp":
        line, expected = acp_line(rng, next_id)
        return line + b"\n", expected
    return lsp_frame(rng, next_id)


def assert_answers_after_hostile_batch(
    peer: WirePeer, rng: random.Random, count: int, next_id: itertools.count, probe_name: str
) -> None:
    """Send ``count`` hostile inputs to ``peer``, then require: the peer kept reading, every
    request among them and a final probe got a reply (30 s / 60 s), the process is alive
    and nothing but protocol messages reached its stdout. Raises AssertionError."""
    owed = set()
    for _ in range(count):
        data, expected = hostile_input(peer.face, rng, next_id)
        assert peer.send(data), f"the {peer.face} peer stopped reading"
        if expected is not None:
            owed.add(expected)
    assert probe(peer, probe_name), "no reply to a request after hostile input"
    assert peer.wait_for(owed, 30) == set()
    assert peer.alive() and peer.garbage_on_stdout == 0
