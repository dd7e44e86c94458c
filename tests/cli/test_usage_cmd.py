"""``clio-acp usage report``: folds steps.jsonl (+ .1) and out-of-turn.jsonl (MEMORY_SPEC §5, §12)."""

from __future__ import annotations

import json

from clio_acp.memory.usage_report import build_usage_report
from clio_acp.paths import resolve_paths


def step(
    decision: str, reason: str, *, tier: str = "llm", tokens=(0, 0), ms=0, route=None, at=None
):
    row = {
        "version": 2,
        "at": at or "2026-11-29T10:00:00.000Z",
        "triggerReasons": ["interval"],
        "tier": tier,
        "bankDelta": {
            k: {"added": 0, "updated": 0, "deleted": 0}
            for k in ("status", "knowledge", "procedural")
        },
        "decision": decision,
        "reason": reason,
        "bankOperations": 0,
        "droppedOperations": 0,
        "citedEntries": 1 if decision == "injected" else 0,
        "tokenCost": {"input": tokens[0], "output": tokens[1], "total": tokens[0] + tokens[1]},
        "latencyMs": ms,
    }
    if route:
        row["targetId"], row["modelId"] = route
    return json.dumps(row)


def usage_row(session: str, inp: int, out: int, ms: float, cost=None) -> str:
    usage = {"input": inp, "output": out, "totalTokens": inp + out, "cacheRead": 5}
    if cost is not None:
        usage["costUsd"] = cost
    return json.dumps(
        {
            "label": "background-memory",
            "sessionId": session,
            "timestamp": "2026-11-29T10:00:00.000Z",
            "usage": usage,
            "timing": {"durationMs": ms},
        }
    )


def write_ledgers() -> None:
    paths = resolve_paths()
    paths.steps_file.parent.mkdir(parents=True)
    local = ("local", "qwen3-4b")
    paths.steps_file.with_name("steps.jsonl.1").write_text(
        step(
            "injected",
            "intervened",
            tokens=(1000, 200),
            ms=4000,
            route=local,
            at="2026-11-29T09:00:00.000Z",
        )
        + "\n"
    )
    paths.steps_file.write_text(
        "\n".join(
            [
                step("silent", "model_silent", tokens=(900, 100), ms=3000, route=local),
                step("timeout", "timed_out", tokens=(0, 0), ms=60000, route=local),
                step("dropped", "endpoint_busy", route=local),
                step("injected", "intervened", tokens=(500, 50), ms=1500, route=("gw", "big")),
                step("injected", "intervened", tier="rules"),
                step("silent", "no_repeated_failure", tier="rules"),
                json.dumps({"version": 1, "at": "2026-11-29T10:00:00.000Z"}),  # v1: rejected
                '{"version":2,"at":"2026-11-29T1',  # torn tail
            ]
        )
        + "\n"
    )
    paths.usage_file.parent.mkdir(parents=True)
    paths.usage_file.write_text(
        "\n".join(
            [
                usage_row("s1", 1000, 200, 4000, cost=0.002),
                usage_row("s1", 900, 100, 3000),
                usage_row("s2", 500, 50, 1500),
                "not json",
            ]
        )
        + "\n"
    )


def test_report_folds_both_ledgers_per_route() -> None:
    write_ledgers()
    report = build_usage_report(resolve_paths())
    assert report.step_rows == 7 and report.skipped_step_lines == 2
    total = report.total
    # The dropped endpoint_busy row does not count as a step that reached the model (§12).
    assert (total.llm_steps, total.injections, total.timeouts) == (4, 2, 1)
    assert total.total_tokens == 2750 and total.endpoint_busy_skips == 1
    assert total.model_ms == 68500 and total.slowest_step_ms == 60000
    routes = {r.route: r for r in report.routes}
    assert list(routes) == ["gw/big", "local/qwen3-4b", "rules tier"]
    assert routes["local/qwen3-4b"].spend.llm_steps == 3
    assert routes["local/qwen3-4b"].spend.endpoint_busy_skips == 1
    assert routes["rules tier"].rows == 2 and routes["rules tier"].injected == 1
    assert report.usage.rows == 3 and len(report.usage.sessions) == 2
    assert report.usage.total_tokens == 2750 and report.usage.cache_read == 15
    assert report.usage.cost_rows == 1 and report.skipped_usage_lines == 1


def test_cli_table_and_json(invoke_cli) -> None:
    write_ledgers()
    result = invoke_cli("usage", "report")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "route",
        "steps",
        "injected",
        "hit",
        "tokens",
        "model",
        "time",
        "slowest",
        "busy",
        "skips",
    ]
    local = next(line for line in lines if line.startswith("local/qwen3-4b"))
    assert local.split() == ["local/qwen3-4b", "3", "1", "33%", "2.2k", "1.1m", "1.0m", "1"]
    total = next(line for line in lines if line.startswith("llm total"))
    assert total.split()[2:] == ["4", "2", "50%", "2.8k", "1.1m", "1.0m", "1"]
    assert "2 unreadable line(s) skipped" in result.stdout
    assert "out-of-turn usage: 3 row(s), 2 session(s), 2.8k tok" in result.stdout
    data = json.loads(invoke_cli("usage", "report", "--json").stdout)
    assert data["total"]["llmSteps"] == 4 and data["total"]["hitRate"] == 0.5
    assert data["usage"]["sessions"] == 2 and data["skippedStepLines"] == 2


def test_report_on_a_fresh_install(invoke_cli, isolated_dirs) -> None:
    result = invoke_cli("usage", "report")
    assert result.returncode == 0
    assert result.stdout.startswith("no memory usage recorded yet")
    assert not any(isolated_dirs["state"].iterdir())  # read-only
    assert invoke_cli("usage", "--help").returncode == 0
    assert invoke_cli("usage", "report", "--help").returncode == 0
    assert invoke_cli("usage").returncode == 2
