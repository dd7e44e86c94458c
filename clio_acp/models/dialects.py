"""Runtime dialects: what each kind of server needs in a request, and what it offers.

Owns the per-runtime table (issue 5 items 1-3): how to ask for thinking *off*
(llama.cpp and vLLM ``chat_template_kwargs.enable_thinking``, LM Studio
``reasoning_effort``; nothing for a runtime we know no switch for), where a GBNF
grammar goes (llama.cpp / llama-cpp-python ``grammar``, vLLM
``structured_outputs.grammar``), whether the runtime is a local single-box server
(default capacity one slot), whether it reports its slots (llama.cpp ``/props``) and
whether it reuses a cached prompt prefix on request (llama.cpp ``cache_prompt``,
MEMORY_SPEC §14.4).
It must not send requests; the client applies these to a body it builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

GrammarField = Literal["grammar", "structured_outputs"]
ThinkingOff = Literal["chat_template_kwargs", "reasoning_effort"]


@dataclass(frozen=True)
class Dialect:
    """Facts about one runtime. ``local``: a single-box server whose capacity defaults
    to 1 slot when neither declared nor discovered (seed 000; a gateway gets no
    invented bound). ``reports_slots``: answers llama.cpp's ``/props``/``/slots``."""

    runtime: str
    local: bool
    reports_slots: bool = False
    thinking_off: ThinkingOff | None = None
    grammar_field: GrammarField | None = None
    needs_api_key: bool = False
    prompt_cache: bool = False
    """Takes ``cache_prompt: true`` (llama.cpp's server): a request whose prompt starts
    like the slot's previous one re-evaluates only the new tail."""

    @property
    def supports_grammar(self) -> bool:
        """True when this runtime accepts a GBNF grammar in a request field."""
        return self.grammar_field is not None

    def apply_thinking_off(self, body: dict[str, Any]) -> None:
        """Add this runtime's thinking-off switch to a chat completion body (in place);
        nothing for a runtime without a known switch."""
        if self.thinking_off == "chat_template_kwargs":
            kwargs = dict(body.get("chat_template_kwargs") or {})
            kwargs["enable_thinking"] = False
            body["chat_template_kwargs"] = kwargs
        elif self.thinking_off == "reasoning_effort":
            body["reasoning_effort"] = "none"

    def apply_prompt_cache(self, body: dict[str, Any]) -> None:
        """Ask the runtime to reuse the cached prompt prefix (in place; §14.4)."""
        if self.prompt_cache:
            body["cache_prompt"] = True

    def apply_grammar(self, body: dict[str, Any], grammar: str) -> bool:
        """Put a GBNF ``grammar`` into ``body`` where this runtime reads it; returns
        whether the request is now constrained (False: the runtime has no field)."""
        if self.grammar_field == "grammar":
            body["grammar"] = grammar
            return True
        if self.grammar_field == "structured_outputs":
            body["structured_outputs"] = {"grammar": grammar}
            return True
        return False


DIALECTS: dict[str, Dialect] = {
    d.runtime: d
    for d in (
        Dialect(
            "llamacpp",
            local=True,
            reports_slots=True,
            thinking_off="chat_template_kwargs",
            grammar_field="grammar",
            prompt_cache=True,
        ),
        Dialect(
            "embedded",
            local=True,
            reports_slots=True,
            thinking_off="chat_template_kwargs",
            grammar_field="grammar",
            prompt_cache=True,
        ),
        # llama-cpp-python's server takes `grammar` but has no chat_template_kwargs.
        Dialect("llama-cpp-python", local=True, grammar_field="grammar"),
        Dialect("ollama", local=True),
        Dialect("lmstudio", local=True, thinking_off="reasoning_effort"),
        # vLLM batches many requests: no single-slot default. v0.12 replaced
        # guided_grammar with structured_outputs.
        Dialect(
            "vllm",
            local=False,
            thinking_off="chat_template_kwargs",
            grammar_field="structured_outputs",
        ),
        Dialect("litellm", local=False),
        Dialect("openai", local=False, needs_api_key=True),
    )
}

_UNKNOWN = Dialect("unknown", local=False)


def dialect_for(runtime: str) -> Dialect:
    """The dialect of ``runtime``; an unknown name gets one that adds nothing."""
    return DIALECTS.get(runtime, _UNKNOWN)
