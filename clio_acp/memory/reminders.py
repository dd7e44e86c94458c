"""The rules tier's reminder sentences (MEMORY_SPEC §4, §12, §13.7).

A reminder reads like a colleague's note: the command as the user would type it
(never canonical JSON), the failure line, the step numbers, the cited entry id,
and at most ``REMINDER_MAX_CHARS`` characters. Each builder fits its text into
that cap by shortening the variable parts (command, failure line, lists) and never
drops the citation. Pure functions.
"""

from __future__ import annotations

__all__ = [
    "REMINDER_MAX_CHARS",
    "blind_retry_text",
    "completion_check_text",
    "environment_note",
    "environment_text",
    "loop_stop_text",
    "recurring_problem_text",
    "status_text",
    "unchanged_after_edit_text",
]

# §13.7: a rules-tier reminder is at most this many characters.
REMINDER_MAX_CHARS = 300


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    if limit <= 1:
        return "…"
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _steps(steps: list[int]) -> str:
    shown = steps[-4:]
    prefix = "…, " if len(steps) > len(shown) else ""
    return prefix + ", ".join(str(s) for s in shown)


def _fit(build, command: str, line: str, extra: str = "") -> str:
    """Call ``build(command, line, extra)`` with shorter parts until it fits."""
    for cmd_max, line_max, extra_max in (
        (80, 120, 80),
        (60, 90, 60),
        (40, 70, 40),
        (30, 50, 24),
        (20, 30, 12),
    ):
        text = build(_cut(command, cmd_max), _cut(line, line_max), _cut(extra, extra_max))
        if len(text) <= REMINDER_MAX_CHARS:
            return text
    return _cut(text, REMINDER_MAX_CHARS)


def blind_retry_text(
    entry_id: str, command: str, first_step: int, line: str, *, advice: bool = True
) -> str:
    """§4/§12.1 repeated failure (a blind retry): nothing changed in between. The
    text is stable for one key, so §12.4 never delivers it twice in a row."""
    tail = " Change the approach rather than repeating it." if advice else ""

    def build(c: str, ln: str, _x: str) -> str:
        return (
            f"Memory: [{entry_id}] you already ran `{c}` at step {first_step} and it failed "
            f"the same way, with nothing changed since: {ln.rstrip('.')}.{tail}"
        )

    return _fit(build, command, line)


def unchanged_after_edit_text(
    entry_id: str, command: str, steps: list[int], line: str, edited: str, *, third: bool
) -> str:
    """§13.1: the same failure after edits; the third in a row says so once."""

    def build(c: str, ln: str, e: str) -> str:
        if third:
            return (
                f"Memory: [{entry_id}] third identical failure of `{c}` after edits "
                f"(steps {_steps(steps)}): {ln.rstrip('.')}. The edits ({e}) do not reach it: "
                "check the edit landed and where this failure is raised."
            )
        return (
            f"Memory: [{entry_id}] `{c}` failed exactly as at step {steps[-2]} "
            f"(steps {_steps(steps)}): {ln.rstrip('.')}, although {e} changed in between. "
            "Check that the edit landed and is on the failing path."
        )

    return _fit(build, command, line, edited)


def environment_note(signature_line: str, step: int, command: str) -> str:
    """§13.2 knowledge entry at the first sighting of an environment fault."""
    return (
        f"Environment: {_cut(signature_line, 200)} (first seen at step {step}: "
        f"`{_cut(command, 80)}`)"
    )


def environment_text(entry_id: str, line: str, steps: list[int], commands: list[str]) -> str:
    """§13.2 reminder at the second call failing with one environment signature."""

    def build(_c: str, ln: str, cmds: str) -> str:
        return (
            f"Memory: [{entry_id}] environment, not code: {ln.rstrip('.')} "
            f"(steps {_steps(steps)}: {cmds}). Fix or work around the environment "
            "(tool, permission, service, network) before retrying."
        )

    listed = ", ".join(f"`{c}`" for c in dict.fromkeys(commands[-2:]))
    return _fit(build, "", line, listed)


def recurring_problem_text(entry_id: str, line: str, steps: list[int], commands: int) -> str:
    """§13.3: one problem line across several different commands."""

    def build(_c: str, ln: str, _x: str) -> str:
        return (
            f"Memory: [{entry_id}] the same problem in {len(steps)} recent failures of "
            f"{commands} different commands (steps {_steps(steps)}): {ln.rstrip('.')}. "
            "Its cause is shared: look at it once rather than per command."
        )

    return _fit(build, "", line)


def completion_check_text(requirements: list[tuple[str, str]]) -> str:
    """§13.6: "before you finish, check: …" listing the captured requirements
    (``(entry id, text)``). Each is shortened just enough for all to fit; when even
    short forms do not, the first ones are listed and the rest cited by id only."""
    head = "Memory: before you finish, check: "
    for per_item in (120, 90, 60, 45):
        parts = [f"[{i}] {_cut(text, per_item).rstrip('.')}" for i, text in requirements]
        text = head + "; ".join(parts) + "."
        if len(text) <= REMINDER_MAX_CHARS:
            return text
    ids_only = [f"[{i}]" for i, _ in requirements]
    for shown in range(len(requirements) - 1, -1, -1):
        parts = [f"[{i}] {_cut(t, 45).rstrip('.')}" for i, t in requirements[:shown]]
        rest = ", ".join(ids_only[shown:])
        text = head + "; ".join([*parts, f"also {rest}"]) + "."
        if len(text) <= REMINDER_MAX_CHARS:
            return text
    return _cut(head + ", ".join(ids_only), REMINDER_MAX_CHARS)


def loop_stop_text(command: str, repeats: int, line: str) -> str:
    """§12.4 loop-guard notice shown to the user when the turn is ended."""

    def build(c: str, ln: str, _x: str) -> str:
        return (
            f"Memory: stopped this turn: `{c}` failed {repeats} times in a row with the same "
            f"error and nothing changed in between ({ln.rstrip('.')}). Change the approach "
            "or give new instructions."
        )

    return _fit(build, command, line)


def status_text(
    goal: str,
    files: list[str],
    last: str,
    unresolved: list[str],
    steps: int,
) -> str:
    """§13.5 the rules-written status entry (the bank caps it at 1200 chars)."""
    parts = [f"Goal: {_cut(goal, 200).rstrip('.')}."]
    parts.append(
        "Files changed: " + (", ".join(_cut(f, 80) for f in files[-12:]) or "none yet") + "."
    )
    if last:
        parts.append(f"Last command: {_cut(last, 260).rstrip('.')}.")
    if unresolved:
        parts.append(
            "Unresolved failures: " + "; ".join(_cut(u, 160) for u in unresolved[-4:]) + "."
        )
    parts.append(f"Tool steps so far: {steps}.")
    return " ".join(parts)
