"""Propose per-call labels for the shared trajectories (issue 14 item 4).

The proposals come from the explicit rules below, written without looking at the
rules tier's code; ``tests/data/README.md`` says how they were then reviewed by
hand against the trajectory text, and ``trajectory_labels.json`` holds the
reviewed result (this script is only the first pass):

    python tests/data/propose_labels.py > /tmp/proposals.json
    python tests/data/propose_labels.py --reviewed > tests/data/trajectory_labels.json

Rules, per call, in this order:

1. *outcome*: failed when the recorded exit code is non-zero (mini-swe-agent,
   OpenHands) or when the adapter read a failure from the terminal text (pma).
2. *informative*: a failed call whose last pipeline stage is grep/rg/git grep
   (exit 1), diff/cmp (exit 1), test/[ (exit 1), or pylint with only the
   message bits (2|4|8|16) set.
3. *rerun*: the same command (whitespace-normalised) ran before. Between the two,
   an *edit* happened when any call edited a file: an edit tool, or a shell line
   with ``sed -i``, ``perl -i``, a redirection into a file (``>``, ``>>``, not
   /dev/null), ``tee``, ``patch``, ``git apply|checkout|reset|stash|restore``,
   ``pip install``, ``cp|mv|rm|mkdir|touch``, ``apt-get install``, or a Python
   one-liner/script that writes (``open(…, 'w')``, ``.write(``). Reverts
   (``git checkout|restore|stash|reset``) are noted: a call whose only edit is
   such a revert does not count as an edit for *unchanged_after_edit*.
   The *failure lines* of a result are its last three lines naming a problem
   (error, fail, exception, assert, not found, …; else its last three lines), with
   addresses, times, long numbers and temp names masked.
   - previous failed, no edit, same failure lines → ``blind_retry``;
   - previous failed, edit, same failure lines → ``unchanged_after_edit``;
   - previous failed, edit, different outcome (other lines, or success) →
     ``edit_changed_outcome``.
4. *environment*: a failure line says command not found, No such file or
   directory for the program itself, permission denied / operation not permitted,
   name resolution / connection refused / reset / unreachable, Unable to locate
   package, No working C compiler, or "not a git repository"; added to the
   labels above (``a+b``).
5. Any other failure is ``failure``; everything else ``clean``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from clio_acp.agent.recordings import load_recordings  # noqa: E402

TRAJ = ROOT.parent / "shared" / "trajectories"

_ADDR = re.compile(
    r"0x[0-9a-fA-F]+|\b\d+\.\d+s\b|\btmp\w+|\b\d{2}:\d{2}:\d{2}\b|\b\d{6,}\b|"
    r"\bin \d+\.\d+ ?s(?:econds)?\b"
)
_PROBLEM = re.compile(
    r"error|fail|exception|traceback|not found|cannot|denied|refused|assert|"
    r"no such|unable|fatal|missing|invalid|expected",
    re.IGNORECASE,
)
_EDIT = re.compile(
    r"\bsed\s+-[a-zA-Z]*i|\bperl\s+-[a-zA-Z]*i|(?<![0-9&])>{1,2}\s*(?!/dev/null|&)[\w./'\"$-]|"
    r"\btee\b|\bpatch\b|\bgit\s+(?:apply|checkout|reset|stash|restore|am)\b|"
    r"\bpip3?\s+install\b|\b(?:cp|mv|rm|mkdir|touch|chmod)\s|\bapt(?:-get)?\s+install\b|"
    r"open\([^)]*['\"][wa]b?['\"]|\.write\(|write_text\(|\bgit\s+commit\b|\bmake\b"
)
_REVERT = re.compile(r"\bgit\s+(?:checkout|restore|stash|reset)\b")
_REVERT_PART = re.compile(r"\bgit\s+(?:checkout|restore|stash|reset)\b[^;&|\n]*")
_ENV = re.compile(
    r"command not found|Permission denied|Operation not permitted|"
    r"Could not resolve|Name or service not known|Temporary failure in name resolution|"
    r"Connection (?:refused|reset)|Network is unreachable|Unable to locate package|"
    r"No working C compiler|not a git repository",
    re.IGNORECASE,
)


def files() -> list[Path]:
    return [
        *sorted(TRAJ.glob("mini-swe-agent-gemini3-swebv/*.traj.json")),
        TRAJ / "openhands-swebl-gpt5" / "output.jsonl",
        *sorted(TRAJ.glob("pma-tb2/*/*/trajectory_agent.steps.jsonl")),
    ]


def command_of(call) -> str:
    args = call.args or {}
    text = args.get("command") or args.get("keystrokes") or ""
    if call.kind == "edit" or args.get("command") in {"str_replace", "create", "insert"}:
        return f"{call.tool_name}:{args.get('command', '')}:{args.get('path', '')}"
    return re.sub(r"\s+", " ", str(text)).strip()


def is_edit(call) -> bool:
    if call.kind == "edit":
        return True
    args = call.args or {}
    if args.get("command") in {"str_replace", "create", "insert", "undo_edit"}:
        return True
    text = str(args.get("command") or args.get("keystrokes") or "")
    return bool(_EDIT.search(text))


def reverts_only(call) -> bool:
    """A call whose only edit is a git revert (checkout/restore/stash/reset)."""
    text = command_of(call)
    return bool(_REVERT.search(text)) and not _EDIT.search(_REVERT_PART.sub(" ", text))


def failure_lines(output: str) -> tuple[str, ...]:
    """The last three lines naming a problem (else the last three lines), masked."""
    lines = [_ADDR.sub("#", ln.strip()) for ln in output.splitlines() if ln.strip()]
    problems = [ln for ln in lines if _PROBLEM.search(ln)]
    return tuple((problems or lines)[-3:])


def informative(call) -> bool:
    text = str((call.args or {}).get("command") or "")
    last = re.split(r"\|\||&&|\||;|\n", text.strip())[-1].strip()
    program = last.split(" ", 1)[0] if last else ""
    if call.exit_code == 1 and (
        program in {"grep", "egrep", "rg", "diff", "cmp", "test", "["}
        or last.startswith("git grep")
    ):
        return True
    if program == "pylint" or "-m pylint" in last:
        return bool(call.exit_code) and call.exit_code & ~(2 | 4 | 8 | 16) == 0
    return False


def propose(recording) -> list[str]:
    labels: list[str] = []
    last_seen: dict[str, int] = {}
    calls = recording.calls
    for i, call in enumerate(calls):
        cmd = command_of(call)
        label = "clean"
        failed = call.is_error
        if failed and informative(call):
            label = "informative"
        elif cmd in last_seen:
            prev = calls[last_seen[cmd]]
            between = calls[last_seen[cmd] + 1 : i]
            edits = [c for c in between if is_edit(c)]
            real_edits = [c for c in edits if not reverts_only(c)]
            same = failure_lines(prev.output) == failure_lines(call.output)
            if prev.is_error and not informative(prev):
                if failed and same and not edits:
                    label = "blind_retry"
                elif failed and same and real_edits:
                    label = "unchanged_after_edit"
                elif edits and (not failed or not same):
                    label = "edit_changed_outcome"
                elif failed:
                    label = "failure"
        if label == "clean" and failed:
            label = "failure"
        if failed and label != "informative" and _ENV.search(call.output):
            label = "environment" if label in {"failure", "clean"} else f"{label}+environment"
        labels.append(label)
        last_seen[cmd] = i
    return labels


# The hand review (tests/data/README.md): (recording key, call index) → (label, why).
_SPHINX = "mini-swe-agent-gemini3-swebv/sphinx-doc__sphinx-7985.traj.json::sphinx-doc__sphinx-7985"
_LINKCHECK = "linkcheck reporting the test document's deliberately broken links: tool output"
_GIT = "pma-tb2/git-multibranch/memory-v3-opus/trajectory_agent.steps.jsonl::git-multibranch/memory-v3-opus"
_NO_REPO = "not in a repository because the clone failed: a knock-on failure, not the environment"
_KNOCK_ON = "cd into the folder the failed clone just before (same batch) did not make: knock-on"
REVIEW: dict[tuple[str, int], tuple[str, str]] = {
    **{(_SPHINX, i): ("failure", _LINKCHECK) for i in (4, 11, 17, 19, 20, 21, 22, 23, 29)},
    (_SPHINX, 10): (
        "failure",
        "index: command not found comes from backticks in an unquoted heredoc",
    ),
    (_SPHINX, 8): ("unchanged_after_edit", "same linkcheck report after editing linkcheck.py"),
    (_SPHINX, 16): ("edit_changed_outcome", "the local link is now reported: the edit worked"),
    (
        "mini-swe-agent-gemini3-swebv/pylint-dev__pylint-7080.traj.json::pylint-dev__pylint-7080",
        55,
    ): ("environment", "/usr/bin/python3 has no pytest: wrong interpreter for the tool"),
    **{(_GIT, i): ("failure", _NO_REPO) for i in (41, 42, 60, 61, 62)},
    **{(_GIT, i): ("failure", _KNOCK_ON) for i in (58, 74, 99, 164)},
}


def reviewed() -> dict:
    """The labels file: every call of every shared recording, proposals corrected by
    the hand review (``REVIEW``), with the reason for each correction."""
    runs = {}
    for path in files():
        for recording in load_recordings(path):
            key = f"{path.relative_to(TRAJ)}::{recording.name}"
            labels = propose(recording)
            notes = {}
            for (run, index), (label, why) in REVIEW.items():
                if run == key:
                    labels[index - 1] = label
                    notes[str(index)] = why
            runs[key] = {"calls": len(labels), "labels": labels, "notes": notes}
    return {"version": 1, "vocabulary": sorted(VOCABULARY), "runs": runs}


VOCABULARY = {
    "clean",
    "failure",
    "informative",
    "blind_retry",
    "unchanged_after_edit",
    "edit_changed_outcome",
    "environment",
}


def main() -> None:
    if "--reviewed" in sys.argv:
        json.dump(reviewed(), sys.stdout, indent=None, separators=(",", ":"))
        sys.stdout.write("\n")
        return
    out = {}
    for path in files():
        for recording in load_recordings(path):
            key = f"{path.relative_to(TRAJ)}::{recording.name}"
            out[key] = propose(recording)
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
