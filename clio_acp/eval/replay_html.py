"""The replay report as one self-contained HTML page (``clio-acp replay … --html FILE``,
issue 10 item 2).

Owns :func:`render_html`: for each replayed recording, a timeline of its tool calls
(failures and informative exits marked, output in a collapsed block), each memory
effect at the step it fired with its channel, trigger, cited entries and text, the
paper's memory-agent injections when the recording carries them (pma), and the
final bank. Inline CSS only: no script, no external resource, so the file can be
mailed or attached. It replays nothing (``clio_acp.agent.replay`` does) and writes no
file (the CLI does).
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from clio_acp.agent.recordings import RecordedCall, Recording
from clio_acp.agent.replay import ReplayReport

__all__ = ["render_html"]

OUTPUT_CHARS = 4000  # per tool call shown in the page; the rest is elided
ARG_CHARS = 300

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em 2em;color:#222}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%;margin:.5em 0}
td,th{border:1px solid #ddd;padding:4px 6px;vertical-align:top;text-align:left}
th{background:#f4f4f4}.num{text-align:right;white-space:nowrap}
tr.fail td.out{background:#fdecea}tr.info td.out{background:#fff8e1}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:.85em;color:#fff}
.b-fail{background:#c62828}.b-ok{background:#2e7d32}.b-info{background:#f9a825}
.b-annotation{background:#1565c0}.b-reminder{background:#6a1b9a}.b-restore{background:#00838f}
.b-stop{background:#000}.b-paper{background:#795548}
tr.mem td{background:#eef4ff}tr.turn td{background:#f7f7f7;font-style:italic}
code,pre{font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;word-break:break-word}
details summary{cursor:pointer;color:#555}.summary span{margin-right:1.5em}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


def _args_text(call: RecordedCall) -> str:
    args = call.args or {}
    for key in ("command", "keystrokes", "cmd", "path"):
        if key in args:
            return str(args[key])
    return ", ".join(f"{k}={v}" for k, v in args.items())


def _badge(kind: str, text: str | None = None) -> str:
    return f'<span class="badge b-{_e(kind)}">{_e(text or kind)}</span>'


def _memory_row(r: Any) -> str:
    cited = ", ".join(r.cited) or "—"
    return (
        f'<tr class="mem"><td class="num">{r.step}</td><td colspan="2">{_badge(r.channel)} '
        f"<code>{_e(r.trigger)}</code> cited: <code>{_e(cited)}</code></td>"
        f"<td><pre>{_e(r.text)}</pre></td></tr>"
    )


def _bank(bank: dict[str, Any]) -> str:
    rows = []
    status = bank.get("status")
    if status:
        rows.append((status.get("id", ""), "status", status.get("content", ""), ""))
    for kind in ("knowledge", "procedural"):
        for entry in bank.get(kind) or []:
            rows.append(
                (
                    entry.get("id", ""),
                    kind,
                    entry.get("content", ""),
                    entry.get("injectionCount", 0),
                )
            )
    if not rows:
        return "<p>The bank is empty.</p>"
    body = "".join(
        f'<tr><td><code>{_e(i)}</code></td><td>{_e(k)}</td><td>{_e(c)}</td><td class="num">{_e(n)}</td></tr>'
        for i, k, c, n in rows
    )
    return (
        "<table><tr><th>id</th><th>class</th><th>content</th><th>injections</th></tr>"
        f"{body}</table>"
    )


_SUMMARY_FIELDS = (
    ("tool calls", "toolCalls"),
    ("failures", "failures"),
    ("informative exits", "informative"),
    ("annotations", "annotations"),
    ("reminders", "turnEndReminders"),
    ("restores", "restores"),
    ("loop stops", "loopStops"),
    ("environment faults", "environmental"),
    ("requirements", "requirements"),
    ("bank entries", "bankSize"),
)


def _summary_line(summary: dict[str, Any]) -> str:
    """The run's counts as one ``<p class="summary">`` line."""
    spans = "".join(
        f"<span>{_e(label)}: <b>{_e(summary[key])}</b></span>" for label, key in _SUMMARY_FIELDS
    )
    return f'<p class="summary">{spans}</p>'


def _section(report: ReplayReport, recording: Recording | None, anchor: str) -> str:
    """One recording; ``anchor`` is its id (``rec-N``), its steps are ``rec-N-step-I``
    so anchors stay unique across recordings."""
    s = report.summary
    parts = [
        f'<h2 id="{anchor}">{_e(report.instance)} <small>({_e(report.format)})</small>'
        ' <a class="top" href="#contents">contents</a></h2>'
    ]
    parts.append(f"<p><code>{_e(report.file)}</code></p>")
    parts.append(_summary_line(s))
    paper: list[int] = []
    if report.yardstick:
        paper = list(report.yardstick.get("injected_after_steps") or [])
        parts.append(
            f"<p>{_badge('paper', 'paper memory agent')} {len(paper)} injections over "
            f"{_e(report.yardstick.get('memory_steps', 0))} memory steps, after agent steps "
            f"<code>{_e(paper)}</code>.</p>"
        )
    by_step: dict[int, list[Any]] = defaultdict(list)
    for r in report.reminders:
        by_step[r.step].append(r)
    failures = set(report.failure_steps)
    informative = set(report.informative_steps)
    rows = ["<table><tr><th>step</th><th>tool</th><th>call</th><th>result / memory</th></tr>"]
    rows += [_memory_row(r) for r in by_step.pop(0, [])]
    turns = recording.turns if recording is not None else []
    for number, turn in enumerate(turns, 1):
        if turn.user_text:
            rows.append(
                f'<tr class="turn"><td></td><td colspan="3">turn {number} — user: '
                f"{_e(_clip(turn.user_text, 600))}</td></tr>"
            )
        for call in turn.calls:
            if call.index in failures:
                cls, badge = "fail", _badge("fail", "failed")
            elif call.index in informative:
                cls, badge = "info", _badge("info", f"exit {call.exit_code} (informative)")
            else:
                cls, badge = (
                    "ok",
                    _badge("ok", "ok" if call.exit_code in (0, None) else f"exit {call.exit_code}"),
                )
            output = _clip(call.output or "", OUTPUT_CHARS)
            rows.append(
                f'<tr class="{cls}" id="{anchor}-step-{call.index}"><td class="num">'
                f"{call.index}</td>"
                f"<td><code>{_e(call.tool_name)}</code></td>"
                f"<td><code>{_e(_clip(_args_text(call), ARG_CHARS))}</code></td>"
                f'<td class="out">{badge}<details><summary>output ({len(call.output or "")} chars)'
                f"</summary><pre>{_e(output)}</pre></details></td></tr>"
            )
            rows += [_memory_row(r) for r in by_step.pop(call.index, [])]
    for step in sorted(by_step):  # effects whose call is not in the recording view
        rows += [_memory_row(r) for r in by_step[step]]
    rows.append("</table>")
    parts.append("<h3>Timeline</h3>" + "".join(rows))
    if report.environmental:
        parts.append(
            "<h3>Environment faults</h3><ul>"
            + "".join(
                f"<li><code>{_e(e['id'])}</code> {_e(e['content'])}</li>"
                for e in report.environmental
            )
            + "</ul>"
        )
    parts.append("<h3>Bank at the end</h3>" + _bank(report.bank))
    if report.telemetry:
        parts.append(
            "<h3>Memory steps</h3><p>"
            + ", ".join(f"<code>{_e(k)}</code> × {v}" for k, v in sorted(report.telemetry.items()))
            + "</p>"
        )
    return "".join(parts)


def render_html(
    items: Sequence[tuple[ReplayReport, Recording | None]], *, title: str = "clio-acp replay"
) -> str:
    """The whole page for ``items`` (each report with the recording it came from, or
    None when that is unavailable: the timeline then lists only the memory effects)."""
    at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    total_calls = sum(r.tool_calls for r, _ in items)
    total_fx = sum(len(r.reminders) for r, _ in items)
    anchors = [f"rec-{n}" for n in range(1, len(items) + 1)]
    body = "".join(_section(r, rec, a) for (r, rec), a in zip(items, anchors, strict=True))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1><p>{len(items)} recordings, {total_calls} tool calls, "
        f"{total_fx} memory effects. Written {at}.</p>"
        f"{_contents(items, anchors)}{body}</body></html>\n"
    )


_CONTENTS_FIELDS = (
    ("tool calls", "toolCalls"),
    ("failures", "failures"),
    ("reminders", "turnEndReminders"),
    ("loop stops", "loopStops"),
)


def _contents(
    items: Sequence[tuple[ReplayReport, Recording | None]], anchors: Sequence[str]
) -> str:
    """The summary table of contents: one linked row per recording with its counts."""
    head = "".join(f"<th>{_e(label)}</th>" for label, _ in _CONTENTS_FIELDS)
    rows = [
        f'<tr><td><a href="#{anchor}">{_e(report.instance)}</a></td>'
        + "".join(
            f'<td class="num">{_e(report.summary.get(key, 0))}</td>' for _, key in _CONTENTS_FIELDS
        )
        + "</tr>"
        for (report, _), anchor in zip(items, anchors, strict=True)
    ]
    return (
        f'<h2 id="contents">Contents</h2><table class="contents"><tr><th>recording</th>{head}</tr>'
        + "".join(rows)
        + "</table>"
    )
