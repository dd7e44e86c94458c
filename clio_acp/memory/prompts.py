"""What the memory model reads: the system prompt and the user prompt (MEMORY_SPEC §3).

Owns the policy system prompt (our own paraphrase of §3, with its two worked
examples), the three-section user prompt (bank last, §14.4), and the trajectory
rendering that keeps the trajectory JSON within 4000 chars by dropping the oldest
whole steps and, for a single oversized step, trimming its ``resultDigest`` — the
output is always valid JSON (bug class §11.2). Pure string building: it must not
call a model, touch a bank beyond ``render`` or do I/O. Status never reaches these prompts (§1 "Status
privacy"): the bank section is ``bank.render``, which omits it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "POLICY_SYSTEM_PROMPT",
    "TASK_MAX_CHARS",
    "TRAJECTORY_MAX_CHARS",
    "WORKED_EXAMPLES",
    "TrajectoryStep",
    "build_user_prompt",
    "render_trajectory",
    "step_to_dict",
]

# MEMORY_SPEC §3 "Prompt construction": the task is cut to 2000 chars.
TASK_MAX_CHARS = 2000
# MEMORY_SPEC §3 "Trajectory rendering": the trajectory JSON is at most 4000 chars.
TRAJECTORY_MAX_CHARS = 4000

# MEMORY_SPEC §3: two worked examples; tests parse both with our own parser and
# check that only the second carries a context_for_action.
WORKED_EXAMPLE_SILENT = (
    '<operations>[{"op":"update_status","content":"The --verbose flag is added; the CLI '
    'tests are next."},{"op":"save_knowledge","content":"The user forbids new dependencies '
    'and requires Python 3.9 compatibility."},{"op":"save_procedural","content":"The CLI '
    "tests failed with ModuleNotFoundError for click; the test file imports click, which is "
    'not installed."}]</operations>\n'
    "<no_intervention/>"
)
WORKED_EXAMPLE_REMINDER = (
    '<operations>[{"op":"update_status","content":"Rerunning the CLI tests without any '
    'change since the import error."}]</operations>\n'
    "<context_for_action>[tm-p-1] These tests already failed because click is missing; "
    "change the import before running them again.</context_for_action>"
)
WORKED_EXAMPLES: tuple[str, str] = (WORKED_EXAMPLE_SILENT, WORKED_EXAMPLE_REMINDER)

POLICY_SYSTEM_PROMPT = f"""\
You keep the execution memory of a separate coding agent, the action agent. You never \
act yourself: you call no tools, run no commands and edit no files. You read the task, \
the task bank and the agent's most recent tool steps, write down what is worth keeping, \
and only rarely hand the agent a short reminder.

Answer with exactly two lines and nothing else, without code fences:
line 1: <operations>JSON array</operations>
line 2: <no_intervention/> or <context_for_action>one short reminder</context_for_action>

Operations write memory and nothing else. An operation is never a tool call, a \
command, a file to read or a next step. The only shapes are:
{{"op":"update_status","content":"..."}}   private note of where the task stands now
{{"op":"save_knowledge","content":"..."}}  a stable fact about the task or a user constraint
{{"op":"save_procedural","content":"..."}} an attempt, how it turned out, and the fix
{{"op":"delete","id":"..."}}               remove a listed entry that is wrong or obsolete
Any other op is thrown away. Put "id" on a save only to overwrite an entry that the task \
bank already lists. Use at most 8 operations, and write [] when nothing is worth keeping.

Example 1, a quiet step that records status, a fact and an attempt:
{WORKED_EXAMPLE_SILENT}

Example 2, the agent is about to repeat a failure the bank holds as [tm-p-1]:
{WORKED_EXAMPLE_REMINDER}

Status is private: never mention it in a reminder.
Silence is the default. Write a reminder only to bring back a bank fact the agent is \
losing sight of, or to stop it from repeating a failure the bank already records, and \
cite each entry you rely on as [entry-id]. Never restate the latest observation, never \
plan or strategize, never block a tool and never ask the agent to continue."""


@dataclass(frozen=True)
class TrajectoryStep:
    """One completed tool call as the memory model sees it (MEMORY_SPEC §3).

    ``call_description`` is the canonical call text (≤180 chars, §4);
    ``result_digest`` a redacted, whitespace-collapsed digest (≤240 bytes, §4).
    """

    step: int
    tool_name: str
    operation_fingerprint: str
    call_description: str
    outcome: Literal["ok", "error"]
    result_digest: str = ""
    result_digest_provenance: str = "legacy"

    def to_dict(self) -> dict[str, Any]:
        """The camelCase JSON object of the prompt."""
        return {
            "step": self.step,
            "toolName": self.tool_name,
            "operationFingerprint": self.operation_fingerprint,
            "callDescription": self.call_description,
            "outcome": self.outcome,
            "resultDigest": self.result_digest,
            "resultDigestProvenance": self.result_digest_provenance,
        }


StepLike = TrajectoryStep | Mapping[str, Any]


def step_to_dict(step: StepLike) -> dict[str, Any]:
    """A trajectory step as its camelCase dict (a ``TrajectoryStep`` or a mapping
    that already uses the camelCase keys)."""
    if isinstance(step, TrajectoryStep):
        return step.to_dict()
    return dict(step)


def _dumps(steps: list[dict[str, Any]]) -> str:
    # ``default=str``: a step value JSON cannot represent is shown as text, not raised.
    return json.dumps(steps, ensure_ascii=False, separators=(",", ":"), default=str)


def render_trajectory(steps: Sequence[StepLike], max_chars: int = TRAJECTORY_MAX_CHARS) -> str:
    """The trajectory as JSON text of at most ``max_chars`` chars when possible.

    While the JSON is too long and more than one step remains, the oldest whole step
    is dropped. A single step still too long has its ``resultDigest`` cut so the JSON
    fits (room = max_chars − length with an empty digest); if even an empty digest
    does not fit, the digest is emptied and the (over-long) JSON is returned. The
    result always parses as a JSON array. ``[]`` for no steps.
    """
    items = [step_to_dict(step) for step in steps]
    text = _dumps(items)
    while len(text) > max_chars and len(items) > 1:
        items.pop(0)
        text = _dumps(items)
    if len(text) <= max_chars or not items:
        return text
    only = dict(items[0])
    digest = str(only.get("resultDigest") or "")
    only["resultDigest"] = ""
    room = max_chars - len(_dumps([only]))
    if room <= 0:
        return _dumps([only])
    # JSON escaping can make a cut of ``room`` chars longer than ``room``: take the
    # longest prefix that fits (binary search; the empty digest is known to fit).
    lo, hi = 0, min(room, len(digest))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        only["resultDigest"] = digest[:mid]
        if len(_dumps([only])) <= max_chars:
            lo = mid
        else:
            hi = mid - 1
    only["resultDigest"] = digest[:lo]
    text = _dumps([only])
    return text


class RendersBank(Protocol):
    """Anything that renders a bank view within a token budget (the bank, or a test
    double)."""

    def render(self, budget_tokens: float, kinds: Sequence[str] = ...) -> str:
        """The bank's entries of ``kinds`` as prompt text within ``budget_tokens``
        estimated tokens."""
        ...


def build_user_prompt(
    task: str | None,
    bank: RendersBank,
    max_tokens: int,
    trajectory: Sequence[StepLike] = (),
) -> str:
    """The policy user prompt: three labelled sections (MEMORY_SPEC §3), in the order
    that lets a caching route re-read only the tail (§14.4):

    - ``Task:`` the task cut to 2000 chars, or ``(unknown)``;
    - ``Recent completed tool trajectory:`` the JSON of ``render_trajectory``;
    - ``Task bank (status is intentionally omitted):`` ``bank.render(max_tokens)``
      (knowledge and procedural only), or ``(empty)``.

    §3 lists the bank before the trajectory. The bank comes last here because a step
    may rewrite any entry of it, while the trajectory only grows at its end (and loses
    whole steps at its front, which llama.cpp's ``--cache-reuse`` shifts past): with the
    bank in the middle, one new entry made the server re-read the whole trajectory
    (639 of 1294 prompt tokens on ``bench/embedded_model.py``'s second step).
    """
    task_text = (task or "").strip()[:TASK_MAX_CHARS] or "(unknown)"
    bank_text = bank.render(max_tokens) or "(empty)"
    return (
        f"Task:\n{task_text}\n\n"
        f"Recent completed tool trajectory:\n{render_trajectory(trajectory)}\n\n"
        f"Task bank (status is intentionally omitted):\n{bank_text}"
    )
