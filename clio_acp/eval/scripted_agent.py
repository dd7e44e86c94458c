"""The scripted agent and memory model of ``clio-acp eval ab --scripted``: turns a
task's :class:`~clio_acp.eval.tasks.ScriptedPlay` into answers of the scripted model
server (``clio_acp.models.scripted``), deterministically.

It decides from the request body alone (plus which prompt turn the harness is in):
a request with ``tools`` is the agent; one whose system prompt opens the compaction
summary is answered with ``play.summary``; anything else is the memory policy step.

The agent reads memory text — the body of a ``<system-reminder>`` block, or a tool
result from its first line starting ``Memory:`` on — and follows ``steps`` until the
memory text in the conversation carries the task's key fact (every ``keyFact``
pattern), then ``on_memory`` instead of the rest. Memory that speaks without the key
fact changes nothing: the agent recovers on content, not on presence. In a negative
task (no key fact) any memory text is a cost: the agent takes its ``on_memory``
detour there, then goes on with the rest of its steps. The seed
(0, 1, 2, …) prepends ``seed % 3`` harmless ``pwd`` calls to the first turn, so seeds
shift the trajectory (tool-call counts, cadence) without changing its meaning.
It must not reach into the session: only what the model sees counts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from clio_acp.eval.tasks import ScriptedPlay, ScriptedStep
from clio_acp.models.scripted import Reply, ToolCall, usage

__all__ = ["ScriptedAgent", "memory_text", "memory_visible"]

SUMMARY_MARK = "You write the working summary"  # clio_acp.context.compaction system prompt
_MEMORY_LINE = re.compile(r"(?m)^Memory:")
_REMINDER_BLOCK = re.compile(r"<system-reminder>(.*?)</system-reminder>", re.DOTALL)
SEED_STEP = "pwd"
BANK_LABEL = "Task bank (status is intentionally omitted):"
TRAJECTORY_LABEL = "Recent completed tool trajectory:"
_ENTRY_ID = re.compile(r"\btm-[skp]-\d+\b")
SILENCE = "<operations>[]</operations>\n<no_intervention/>"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def memory_text(message: dict[str, Any]) -> str:
    """The memory text a non-system message carries ("" for none): reminder block
    bodies, and a tool result from its first ``Memory:`` line on."""
    if message.get("role") == "system":
        return ""
    text = _text(message)
    parts = [m.group(1).strip() for m in _REMINDER_BLOCK.finditer(text)]
    if message.get("role") == "tool":
        line = _MEMORY_LINE.search(text)
        if line is not None:
            parts.append(text[line.start() :])
    return "\n".join(p for p in parts if p)


def memory_visible(message: dict[str, Any]) -> bool:
    """Whether a non-system message carries memory text."""
    return bool(memory_text(message))


def _bank_section(request: str) -> str:
    """The task bank part of a memory request (``memory.prompts`` labels); the
    system prompt's worked examples cite ids too and must not count."""
    start = request.find(BANK_LABEL)
    if start < 0:
        return ""
    end = request.find(TRAJECTORY_LABEL, start)
    return request[start : end if end >= 0 else len(request)]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedAgent:
    """The ``responder`` of a :class:`~clio_acp.models.scripted.ScriptedModelServer`
    for one trial. ``turn`` is the 0-based prompt turn, set by the harness before
    each prompt. Every answer reports usage (prompt chars / 4, answer chars / 4)."""

    def __init__(
        self,
        play: ScriptedPlay,
        prompts: list[str],
        *,
        key_fact: Callable[[str], bool] | None = None,
        seed: int = 0,
    ) -> None:
        self.play = play
        self.prompts = prompts
        self.turn = 0
        self.memory_requests = 0
        self.key_fact = key_fact
        """None: a negative task (any memory text triggers ``on_memory``)."""
        self.seed_steps = seed % 3
        self.recovered = False
        """Whether the agent switched to ``on_memory`` at least once."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        prompt_tokens = sum(_tokens(_text(m)) for m in messages)
        if body.get("tools"):
            return self._agent(messages, prompt_tokens)
        system = next((_text(m) for m in messages if m.get("role") == "system"), "")
        if system.startswith(SUMMARY_MARK):
            text = self.play.summary
        else:
            self.memory_requests += 1
            text = self._memory("\n".join(_text(m) for m in messages))
        return Reply(text=text, usage=usage(prompt_tokens, _tokens(text)))

    def _branch_point(self, messages: list[dict[str, Any]], start: int) -> int | None:
        """Assistant steps of this turn taken before the memory text that decides
        (0 when it was already there at the turn's start), or None."""
        seen = 0
        collected: list[str] = []
        for i, m in enumerate(messages):
            if i >= start and m.get("role") == "assistant":
                seen += 1
            text = memory_text(m)
            if not text:
                continue
            collected.append(text)
            if self.key_fact is None or self.key_fact("\n".join(collected)):
                return seen if i >= start else 0
        return None

    def _memory(self, request: str) -> str:
        for rule in self.play.memory:
            if rule.when_input_contains in request:
                ids = _ENTRY_ID.findall(_bank_section(request))
                return rule.reply.replace("{cite}", ids[0] if ids else "")
        return SILENCE

    def _agent(self, messages: list[dict[str, Any]], prompt_tokens: int) -> Reply:
        index = min(self.turn, len(self.play.turns) - 1)
        turn = self.play.turns[index]
        prompt = self.prompts[self.turn] if self.turn < len(self.prompts) else None
        start = 0
        if prompt:
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].get("role") == "user" and prompt in _text(messages[i]):
                    start = i
                    break
        taken = sum(1 for m in messages[start:] if m.get("role") == "assistant")
        branch_at = self._branch_point(messages, start) if turn.on_memory is not None else None
        script: list[ScriptedStep] = list(turn.steps)
        if self.turn == 0 and self.seed_steps:
            script = [ScriptedStep(run=SEED_STEP)] * self.seed_steps + script
        if branch_at is not None and turn.on_memory is not None:
            # branch_at counts the assistant steps really taken (seed steps included).
            # Positive task: the fix replaces the rest; negative: a detour, then the rest.
            rest = script[branch_at:] if self.key_fact is None else []
            script = script[:branch_at] + list(turn.on_memory) + rest
            self.recovered = True
        step = script[taken] if taken < len(script) else ScriptedStep(say="Done.")
        call = step.tool_call()
        if call is None:
            text = step.say or "Done."
            return Reply(text=text, usage=usage(prompt_tokens, _tokens(text)))
        name, args = call
        arguments = json.dumps(args)
        return Reply(
            tool_calls=[ToolCall(name, arguments, id=f"call_{self.turn}_{taken}")],
            usage=usage(prompt_tokens, _tokens(arguments)),
        )
