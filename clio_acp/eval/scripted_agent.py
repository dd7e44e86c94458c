"""The scripted agent and memory model of ``clio-acp eval ab --scripted``: turns a
task's :class:`~clio_acp.eval.tasks.ScriptedPlay` into answers of the scripted model
server (``clio_acp.models.scripted``), deterministically.

It decides from the request body alone (plus which prompt turn the harness is in):
a request with ``tools`` is the agent; one whose system prompt opens the compaction
summary is answered with ``play.summary``; anything else is the memory policy step.
The agent follows ``steps`` until memory text is visible in the conversation (a tool
result line starting ``Memory:`` or a ``<system-reminder>`` block), then ``on_memory``.
It must not reach into the session: only what the model sees counts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clio_acp.eval.tasks import ScriptedPlay, ScriptedStep
from clio_acp.models.scripted import Reply, ToolCall, usage

__all__ = ["ScriptedAgent", "memory_visible"]

SUMMARY_MARK = "You write the working summary"  # clio_acp.context.compaction system prompt
_MEMORY_LINE = re.compile(r"(?m)^Memory:")
_ENTRY_ID = re.compile(r"\btm-[skp]-\d+\b")
SILENCE = "<operations>[]</operations>\n<no_intervention/>"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def memory_visible(message: dict[str, Any]) -> bool:
    """Whether a non-system message carries memory text."""
    if message.get("role") == "system":
        return False
    text = _text(message)
    return "<system-reminder>" in text or bool(_MEMORY_LINE.search(text))


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedAgent:
    """The ``responder`` of a :class:`~clio_acp.models.scripted.ScriptedModelServer`
    for one trial. ``turn`` is the 0-based prompt turn, set by the harness before
    each prompt. Every answer reports usage (prompt chars / 4, answer chars / 4)."""

    def __init__(self, play: ScriptedPlay, prompts: list[str]) -> None:
        self.play = play
        self.prompts = prompts
        self.turn = 0
        self.memory_requests = 0

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

    def _memory(self, request: str) -> str:
        for rule in self.play.memory:
            if rule.when_input_contains in request:
                ids = _ENTRY_ID.findall(request.split("</bank>")[0]) or _ENTRY_ID.findall(request)
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
        branch_at: int | None = None
        if turn.on_memory is not None:
            seen = 0
            for i, m in enumerate(messages):
                if i >= start and m.get("role") == "assistant":
                    seen += 1
                if memory_visible(m):
                    branch_at = seen if i >= start else 0
                    break
        script: list[ScriptedStep] = list(turn.steps)
        if branch_at is not None and turn.on_memory is not None:
            script = script[:branch_at] + list(turn.on_memory)
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
