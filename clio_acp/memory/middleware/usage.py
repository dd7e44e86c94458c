"""Usage accounting of the LLM tier's steps (MEMORY_SPEC §5 usage rows).

One usage row per llm call that reported usage, under the target that call ran on
and the session that *started* the step (also when the answer arrives after a
session change). Rows go to ``<state>/usage/out-of-turn.jsonl`` off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clio_acp.memory.spend import UsageRow

__all__ = ["PerCallUsage", "StepUsage", "UsageAccounting", "answered_route"]

log = logging.getLogger(__name__)


def answered_route(result: Any, target_id: str | None, model_id: str | None) -> dict[str, Any]:
    """The step row's ``targetId``/``modelId`` (§5, both or neither): the route that
    answered when the client said, else the configured memory route."""
    answered = getattr(result, "target_id", None)
    if answered:
        target_id, model_id = answered, getattr(result, "model_id", None)
    if target_id and model_id:
        return {"target_id": target_id, "model_id": model_id}
    return {"target_id": None, "model_id": None}


class UsageAccounting:
    """Mixin of ``MemoryMiddleware``: writes §5 usage rows and keeps ``usage_log``."""

    def _record_usage(
        self,
        usage: Any,
        origin_session: str | None,
        target: str | None,
        model: str | None,
        started: float,
    ) -> None:
        """§5 usage rows: one per llm call that reported usage (``input_tokens``,
        ``output_tokens``), under the origin session even when the answer arrives
        after a session change; ``started`` is the step's ``perf_counter`` start.
        Never raises."""
        try:
            input_tokens = int(getattr(usage, "input_tokens", 0) or 0)
            output_tokens = int(getattr(usage, "output_tokens", 0) or 0)
            self.usage_log.append(
                {
                    "sessionId": origin_session or "",
                    "input": input_tokens,
                    "output": output_tokens,
                    "generationCurrent": origin_session == self.session_id,
                }
            )
            if self.usage_path is None:
                return
            # Here, not at import: replay and rules-only sessions never write usage, and
            # the row's module brings the file lock (~15 ms of every replay start).
            from clio_acp.memory.spend import UsageFigures, UsageRow, UsageTiming

            row = UsageRow(
                session_id=origin_session or "",
                repo_identity=self.repo_identity,
                target=target,
                attributed_model_id=model,
                usage=UsageFigures(
                    input=input_tokens,
                    output=output_tokens,
                    total_tokens=input_tokens + output_tokens,
                ),
                timing=UsageTiming(duration_ms=(time.perf_counter() - started) * 1000),
            )
            pending = _append_off_loop(self.usage_path, row)
            if pending is not None:
                writes = self.__dict__.setdefault("_usage_writes", set())
                writes.add(pending)
                pending.add_done_callback(writes.discard)
        except Exception:
            log.debug("memory usage accounting failed", exc_info=True)

    async def usage_written(self) -> None:
        """Wait for the usage rows still being written off the loop (``wait_idle``: a
        caller that removes the state folder next must not race the write)."""
        writes = self.__dict__.get("_usage_writes")
        if writes:
            await asyncio.gather(*list(writes), return_exceptions=True)


def _append_off_loop(path: Any, row: UsageRow) -> asyncio.Future[None] | None:
    """Append on an executor thread when a loop runs (the future), else right here."""
    from clio_acp.memory.spend import append_usage_row

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        append_usage_row(path, row)
        return None
    return loop.run_in_executor(None, append_usage_row, path, row)


class StepUsage:
    """The usage callbacks of one LLM step: ``on_call`` for every call's report (a
    fallback's calls run on different targets), ``on_step`` for the step's total,
    which makes a row only when no call reported its own (§3 step 3)."""

    def __init__(
        self,
        record: Callable[[Any, str | None, str | None, str | None, float], None],
        origin_session: str | None,
        route: tuple[str | None, str | None],
    ) -> None:
        self._record = record
        self._origin = origin_session
        self.target_id, self.model_id = route
        self.started = time.perf_counter()
        self._calls_with_usage = 0

    def on_call(self, usage: Any) -> None:
        """One llm call's usage, under the target that call ran on."""
        self._calls_with_usage += 1
        call_target = getattr(usage, "target_id", None)
        model = getattr(usage, "model_id", None) or (None if call_target else self.model_id)
        self._record(usage, self._origin, call_target or self.target_id, model, self.started)

    def on_step(self, usage: Any) -> None:
        """The step's usage; recorded only when no call reported its own."""
        if not self._calls_with_usage:
            self._record(usage, self._origin, self.target_id, self.model_id, self.started)


class PerCallUsage:
    """Wraps the step's memory client so every usage report of a call reaches
    ``on_call`` (usage rows) before the policy sees it (which keeps the first)."""

    def __init__(self, inner: Any, on_call: Callable[[Any], None]) -> None:
        self._inner = inner
        self._on_call = on_call

    async def complete(
        self, system: str, user: str, max_tokens: int, *, abort: Any, on_usage: Any
    ) -> Any:
        """``MemoryCompletionClient.complete`` of the wrapped client."""

        def both(usage: Any) -> None:
            try:
                self._on_call(usage)
            except Exception:
                log.debug("memory usage row failed", exc_info=True)
            on_usage(usage)

        return await self._inner.complete(system, user, max_tokens, abort=abort, on_usage=both)
