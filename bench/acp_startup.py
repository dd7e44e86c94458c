"""Benchmark of the ACP face: initialize round-trip and per-update overhead.

Run from the repository root:

    python bench/acp_startup.py              # median of 5 runs
    python bench/acp_startup.py --runs 9 --json

Figures (each the median over ``--runs`` runs):

- ``cold_initialize_ms``: spawn ``python -m clio_acp acp`` → ``initialize`` answered
  (what an editor waits for when it opens the agent). Baseline in the same run:
  ``python -c pass`` spawn → exit (interpreter start alone); the ratio shows what
  our imports and setup add.
- ``warm_initialize_us``: one ``initialize`` round trip on an open connection.
- ``first_session_new_ms``: the first ``session/new`` of a process (imports the
  session core, opens the journal).
- ``update_pipeline_us``: per core event, in process, the whole face path (event →
  ``session/update`` payload with the SDK's pydantic models → per-session queue →
  SDK ``Connection.send_notification`` → our ``LineTransport`` → a pipe), versus the
  baseline ``framing_us`` (the same payload, pre-built, written by the transport
  alone). ``update_overhead_ratio`` = pipeline / framing.
- ``e2e_update_us``: per ``agent_message_chunk`` at a real client, a subprocess agent
  streaming a scripted 1000-chunk answer from the loopback model server (includes the
  model client and the agent loop).

No timing is asserted anywhere; CI does not run this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acp.connection import Connection  # noqa: E402
from isolated_env import isolated_env  # noqa: E402  (bench/ is sys.path[0])

from clio_acp import events as ev  # noqa: E402
from clio_acp.acp.hosting import Hosted  # noqa: E402
from clio_acp.acp.server import ClioAcpAgent  # noqa: E402
from clio_acp.acp.transport import LineTransport  # noqa: E402

EVENTS_PER_RUN = 2000
CHUNKS_E2E = 1000


def _read_reply(proc: subprocess.Popen, want_id: int | str) -> dict:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise EOFError("agent exited")
        msg = json.loads(line)
        if msg.get("id") == want_id:
            return msg


def cold_and_warm(home: Path, warm_rounds: int = 50) -> tuple[float, float, float]:
    """(cold ms, warm µs, first session/new ms) for one agent process."""
    init = {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clio_acp", "acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=isolated_env(home),
    )
    assert proc.stdin is not None
    proc.stdin.write((json.dumps({**init, "id": 0}) + "\n").encode())
    proc.stdin.flush()
    _read_reply(proc, 0)
    cold_ms = (time.perf_counter() - start) * 1000
    samples = []
    for i in range(1, warm_rounds + 1):
        t0 = time.perf_counter()
        proc.stdin.write((json.dumps({**init, "id": i}) + "\n").encode())
        proc.stdin.flush()
        _read_reply(proc, i)
        samples.append((time.perf_counter() - t0) * 1e6)
    ws = home / "ws"
    ws.mkdir(exist_ok=True)
    new = {"jsonrpc": "2.0", "id": "new", "method": "session/new"}
    new["params"] = {"cwd": str(ws), "mcpServers": []}
    t0 = time.perf_counter()
    proc.stdin.write((json.dumps(new) + "\n").encode())
    proc.stdin.flush()
    _read_reply(proc, "new")
    new_ms = (time.perf_counter() - t0) * 1000
    proc.stdin.close()
    proc.wait(timeout=30)
    return cold_ms, statistics.median(samples), new_ms


def python_baseline_ms() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - start) * 1000


class _Session:
    """The smallest object the face hosts for this in-process measurement."""

    id = "sess_bench"
    mode = "ask"

    def subscribe(self, callback):
        return lambda: None


def _drain(fd: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            if not os.read(fd, 1 << 16):
                return
        except OSError:
            return


async def pipeline_and_framing() -> tuple[float, float]:
    """(µs per event through the whole face path, µs per pre-built frame)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stop = threading.Event()
    drain = threading.Thread(target=_drain, args=(out_r, stop), daemon=True)
    drain.start()
    transport = LineTransport(in_r, out_w)
    await transport.start()
    agent = ClioAcpAgent(lambda **_: None)

    async def handler(method, params, is_notification):
        return None

    conn = Connection(handler, transport)
    agent.attach(conn, transport)
    hosted = Hosted(session=_Session())  # type: ignore[arg-type]
    hosted.pump = asyncio.get_running_loop().create_task(agent.hosting._pump("sess_bench", hosted))
    events = [
        ev.MessageChunk(session_id="sess_bench", message_id="m1", text=f"word{i} ")
        for i in range(EVENTS_PER_RUN)
    ]
    t0 = time.perf_counter()
    for event in events:
        agent.hosting.enqueue_event(hosted, event)
    await hosted.flush()
    pipeline = (time.perf_counter() - t0) * 1e6 / EVENTS_PER_RUN

    frame = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "sess_bench",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "word "},
                "messageId": "m1",
            },
        },
    }
    t0 = time.perf_counter()
    for _ in range(EVENTS_PER_RUN):
        await transport.send(frame)
    framing = (time.perf_counter() - t0) * 1e6 / EVENTS_PER_RUN
    hosted.pump.cancel()
    await conn.close()
    stop.set()
    for fd in (in_w, out_w, in_r):
        os.close(fd)
    drain.join(timeout=2)
    os.close(out_r)
    return pipeline, framing


async def e2e_update_us(home: Path) -> float:
    from acp import spawn_agent_process, text_block
    from acp.connection import StreamDirection

    from tests.support.model_server import Reply, running_server

    env = isolated_env(home)
    with running_server() as server:
        server.install_settings(config_dir=home / "config", memory=False)
        server.push(Reply(text=[f"w{i} " for i in range(CHUNKS_E2E)]))
        arrivals: list[float] = []

        class Client:
            async def session_update(self, session_id, update, **kwargs):
                return None

        def observe(event):
            msg = event.message
            if (
                event.direction is StreamDirection.INCOMING
                and msg.get("method") == "session/update"
                and msg["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
            ):
                arrivals.append(time.perf_counter())

        async with spawn_agent_process(
            Client(), sys.executable, "-m", "clio_acp", "acp", env=env
        ) as (conn, _proc):
            conn._conn.add_observer(observe)
            await conn.initialize(protocol_version=1)
            ws = home / "ws"
            ws.mkdir(exist_ok=True)
            new = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(session_id=new.session_id, prompt=[text_block("stream")])
    if len(arrivals) < 2:
        return float("nan")
    return (arrivals[-1] - arrivals[0]) * 1e6 / (len(arrivals) - 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true")
    args = parser.parse_args(argv)

    cold, warm, first_new, base, pipe, frame, e2e = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            home = Path(tmp) / f"run{i}"
            c, w, n = cold_and_warm(home)
            cold.append(c)
            warm.append(w)
            first_new.append(n)
            base.append(python_baseline_ms())
            p, f = asyncio.run(pipeline_and_framing())
            pipe.append(p)
            frame.append(f)
            if not args.skip_e2e:
                e2e.append(asyncio.run(e2e_update_us(home)))
    med = statistics.median
    result = {
        "runs": args.runs,
        "cold_initialize_ms": round(med(cold), 1),
        "python_start_baseline_ms": round(med(base), 1),
        "cold_vs_python_start_ratio": round(med(cold) / med(base), 2),
        "warm_initialize_us": round(med(warm), 1),
        "first_session_new_ms": round(med(first_new), 1),
        "update_pipeline_us": round(med(pipe), 1),
        "framing_us": round(med(frame), 1),
        "update_overhead_ratio": round(med(pipe) / med(frame), 2),
    }
    if e2e:
        result["e2e_update_us"] = round(med(e2e), 1)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
