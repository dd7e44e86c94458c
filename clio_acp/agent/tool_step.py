"""One tool call of a turn, from the model's request to its journaled result.

The step: parse and describe the call, journal and announce it (``ToolCallStarted``),
tell the memory hooks (``before_tool``), ask the permission gate for edit/execute
calls, run the tool, spill an oversized result (``context/spill.py``), hand the
observation to the memory hooks (``after_tool``: annotations appended to this result,
reminders queued, a loop-guard stop), journal the result and announce it
(``ToolCallFinished``, then each annotation as a ``MemoryReminder``). Calls skipped by
a loop-guard stop or cut off by a cancel still get a result row, so the model view
never holds a call without its result.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from clio_acp.advisory import neutralize_untrusted
from clio_acp.agent import history
from clio_acp.agent.memory_hooks import AnnotateToolResult, StopTurn, ToolObservation
from clio_acp.agent.permissions import PermissionRequest
from clio_acp.agent.tools import (
    ToolContext,
    ToolInputError,
    ToolRegistry,
    ToolResult,
    ToolSpec,
    Workspace,
    error_result,
)
from clio_acp.agent.turn import TurnState
from clio_acp.context.spill import needs_spill, spill
from clio_acp.events import MemoryReminder, ToolCallFinished, ToolCallStarted, ToolCallUpdated
from clio_acp.memory.calls import is_state_changing

if TYPE_CHECKING:
    from clio_acp.agent.loop import AgentLoop


@dataclass(frozen=True)
class PreparedCall:
    """A tool call as the model asked for it, parsed and described.

    ``args_model`` is None (and ``parse_error`` says why) when the arguments do not
    fit the tool's schema or the tool is unknown (``spec`` None); ``arguments`` is
    then the loosely decoded JSON, so the journal still shows what was asked.
    """

    call_id: str
    name: str
    spec: ToolSpec | None
    args_model: BaseModel | None
    parse_error: str | None
    arguments: dict[str, Any]
    title: str
    locations: list[str]

    @property
    def kind(self) -> str:
        """ACP tool kind (``read``, ``edit``, ``search``, ``execute``, ``other``)."""
        return self.spec.kind if self.spec else "other"

    @property
    def category(self) -> str:
        """Permission category; an unknown tool counts as ``read`` (it never runs)."""
        return self.spec.category if self.spec else "read"

    @property
    def spillable(self) -> bool:
        """False for the read-back tools (their output is already a bounded slice); an unknown
        tool's error result may be spilled."""
        return self.spec is None or self.spec.spillable


def prepare_call(
    registry: ToolRegistry, workspace: Workspace, call_id: str, name: str, raw_args: str
) -> PreparedCall:
    """Parse ``raw_args`` (the model's JSON text) for tool ``name`` and describe the
    call (title, absolute locations). Never raises: a bad call is prepared with its
    ``parse_error`` and later answered with an error result."""
    args_model = None
    parse_error: str | None = None
    try:
        args_model = registry.parse_args(name, raw_args)
    except ToolInputError as exc:
        parse_error = str(exc)
    arguments = args_model.model_dump() if args_model is not None else loose_args(raw_args)
    title, locations = registry.describe(name, args_model, workspace)
    return PreparedCall(
        call_id, name, registry.get(name), args_model, parse_error, arguments, title, locations
    )


async def run_tool_step(
    loop: AgentLoop, state: TurnState, call_id: str, name: str, raw_args: str
) -> None:
    """Run one tool call of the turn ``state`` on ``loop`` to its journaled result.

    Sets ``state.stop_notice`` when the memory hooks stop the turn. Raises
    ``asyncio.CancelledError`` when the turn is cancelled (also from a cancelled
    permission prompt); the caller records the call as cancelled.
    """
    call = prepare_call(loop.registry, loop.workspace, call_id, name, raw_args)
    await _announce(loop, state, call)
    if call.args_model is None or call.spec is None:
        result = error_result(call.parse_error or f"unknown tool {name!r}")
    else:
        result = await _execute(loop, call)
    # §13.8: tool and file text cannot pass for a memory advisory.
    visible, spill_ref = neutralize_untrusted(result.output), None
    if call.spillable and needs_spill(visible, loop.context_rules().spill_threshold_bytes):
        spilled = await spill(loop.spill_store, loop.session_id, call_id, visible)
        spill_ref, visible = spilled.ref, spilled.visible
    annotations = _observe(loop, state, call, result)
    note = "\n".join(a.text.strip() for a in annotations if a.text.strip()) or None
    if note:
        visible = f"{visible}\n\n{note}"
    row = result_row(call, result, visible, spill_ref=spill_ref, note=note, annotations=annotations)
    await loop.transcript.add(history.ROW_TOOL_RESULT, row)
    state.inflight.pop(call_id, None)
    loop.tool_running = False
    loop.last_tool_end = time.monotonic()
    await _announce_result(loop, call, result, visible, note, annotations)


async def _announce(loop: AgentLoop, state: TurnState, call: PreparedCall) -> None:
    await loop.transcript.add(
        history.ROW_TOOL_CALL,
        {
            "tool_call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
            "title": call.title,
            "kind": call.kind,
            "locations": call.locations,
        },
    )
    await loop.emit(
        ToolCallStarted(
            session_id=loop.session_id,
            tool_call_id=call.call_id,
            tool_name=call.name,
            title=call.title,
            kind=call.kind,  # type: ignore[arg-type]
            arguments=call.arguments,
            locations=call.locations,
        )
    )
    state.inflight[call.call_id] = call.name
    loop.tool_running = True
    loop.queue_effects(
        loop.memory.before_tool(loop.session_id, call.call_id, call.name, call.arguments)
    )


async def _execute(loop: AgentLoop, call: PreparedCall) -> ToolResult:
    """Ask the permission gate (edit/execute calls), then run the tool."""
    if call.category != "read":
        verdict = await loop.gate.check(
            PermissionRequest(
                session_id=loop.session_id,
                tool_call_id=call.call_id,
                tool_name=call.name,
                title=call.title,
                kind=call.kind,
                category=call.category,  # type: ignore[arg-type]
                arguments=call.arguments,
                locations=call.locations,
            )
        )
        if verdict.cancelled:
            raise asyncio.CancelledError()
        if not verdict.allowed:
            await loop.notice("warning", f"{call.title}: {verdict.reason}")
            return error_result(verdict.reason)
    await loop.emit(
        ToolCallUpdated(session_id=loop.session_id, tool_call_id=call.call_id, status="in_progress")
    )

    async def on_output(chunk: str) -> None:
        await loop.emit(
            ToolCallUpdated(
                session_id=loop.session_id,
                tool_call_id=call.call_id,
                status="in_progress",
                output=chunk,
            )
        )

    ctx = ToolContext(
        workspace=loop.workspace,
        host=loop.host,
        session_id=loop.session_id,
        spill_store=loop.spill_store,
        on_output=on_output,
        values=loop.values,
        emit=loop.emit,
    )
    assert call.args_model is not None
    return await loop.registry.execute(call.name, call.args_model, ctx)


def observation_of(call: PreparedCall, result: ToolResult) -> ToolObservation:
    """What the memory hooks see of a finished call: the full (unspilled) output and
    the canonical disposition (MEMORY_SPEC §4 ``metadata.resultKind``)."""
    return ToolObservation(
        tool_call_id=call.call_id,
        tool_name=call.name,
        arguments=call.arguments,
        ok=result.disposition.ok,
        digest=result.disposition.digest,
        exit_code=result.disposition.exit_code,
        category=call.category,
        output=result.output,
        metadata={"resultKind": result.disposition.result_kind, **result.disposition.to_dict()},
    )


def _observe(
    loop: AgentLoop, state: TurnState, call: PreparedCall, result: ToolResult
) -> list[AnnotateToolResult]:
    """Note a state change for the progress guard, hand the observation to the memory
    hooks, queue their reminders, apply a loop-guard stop; returns the annotations
    for this result."""
    if result.disposition.ok and (
        call.category == "edit" or changes_files(call.name, call.arguments, call.kind)
    ):
        loop.guard.note_state_change()
    effects = loop.memory.after_tool(loop.session_id, observation_of(call, result))
    loop.queue_effects(effects)
    for effect in effects:
        if isinstance(effect, StopTurn):
            state.stop_notice = effect.notice
            loop.memory.signal_loop()
    return [e for e in effects if isinstance(e, AnnotateToolResult)]


def result_row(
    call: PreparedCall,
    result: ToolResult,
    visible: str,
    *,
    spill_ref: str | None,
    note: str | None,
    annotations: Sequence[AnnotateToolResult],
) -> dict[str, Any]:
    """The journal's ``tool_result`` row: ``visible`` is what the model sees (spill
    preview and memory annotation included); ``note`` the annotation text."""
    return {
        "tool_call_id": call.call_id,
        "name": call.name,
        "status": "completed" if result.disposition.ok else "failed",
        "output": visible,
        "disposition": result.disposition.to_dict(),
        "exit_code": result.disposition.exit_code,
        "spill_ref": spill_ref,
        "diff": result.diff,
        "path": result.path,
        "annotation": note,
        "cited": [c for a in annotations for c in a.cited],
    }


async def _announce_result(
    loop: AgentLoop,
    call: PreparedCall,
    result: ToolResult,
    visible: str,
    note: str | None,
    annotations: Sequence[AnnotateToolResult],
) -> None:
    await loop.emit(
        ToolCallFinished(
            session_id=loop.session_id,
            tool_call_id=call.call_id,
            status="completed" if result.disposition.ok else "failed",
            output=visible,
            exit_code=result.disposition.exit_code,
            diff=result.diff,
            path=result.path,
            old_text=result.old_text,
            new_text=result.new_text,
            annotation=note,
        )
    )
    for annotation in annotations:
        await loop.emit(
            MemoryReminder(
                session_id=loop.session_id,
                text=annotation.text.strip(),
                cited_entries=list(annotation.cited),
                channel="annotation",
                trigger=annotation.trigger,
                paths=list(annotation.paths) or list(call.locations),
                line=annotation.lines[0] if annotation.paths and annotation.lines else None,
                lines=list(annotation.lines) if annotation.paths else [],
            )
        )


async def record_skipped_calls(loop: AgentLoop, calls: Sequence[Any]) -> None:
    """Give each of ``calls`` (``.id``, ``.name``) that has no result yet a failed
    "not run" result: the loop guard ended the turn before they ran."""
    done = {
        r.data.get("tool_call_id")
        for r in loop.transcript.rows
        if r.type == history.ROW_TOOL_RESULT
    }
    for call in calls:
        if call.id not in done:
            await loop.transcript.add(
                history.ROW_TOOL_RESULT,
                {
                    "tool_call_id": call.id,
                    "name": call.name,
                    "status": "failed",
                    "output": "Not run: the loop guard ended the turn.",
                    "disposition": error_result("not run").disposition.to_dict(),
                },
            )


async def finish_cancelled_calls(loop: AgentLoop, state: TurnState) -> None:
    """Journal and announce a failed "Cancelled by the user." result for every call of
    ``state`` that started but did not finish."""
    for call_id, name in list(state.inflight.items()):
        await loop.transcript.add(
            history.ROW_TOOL_RESULT,
            {
                "tool_call_id": call_id,
                "name": name,
                "status": "failed",
                "output": "Cancelled by the user.",
                "disposition": error_result("cancelled").disposition.to_dict(),
            },
        )
        await loop.emit(
            ToolCallFinished(
                session_id=loop.session_id,
                tool_call_id=call_id,
                status="failed",
                output="Cancelled by the user.",
            )
        )
    state.inflight.clear()
    loop.tool_running = False
    loop.last_tool_end = time.monotonic()


def changes_files(name: str, arguments: dict[str, Any], kind: str) -> bool:
    """MEMORY_SPEC §12.1 classification of a call as state-changing (the memory
    package's table: edit tools, file-changing shell commands). Never raises."""
    try:
        return is_state_changing(name, arguments, kind)
    except Exception:
        return False


def loose_args(raw: str) -> dict[str, Any]:
    """The model's argument text as a dict for the journal, whatever it holds: a JSON
    object as is, another JSON value as ``{"_value": …}``, bad JSON as ``{"_raw": …}``."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}
