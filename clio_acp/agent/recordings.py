"""Adapters from recorded coding-agent trajectories to one neutral shape.

Owns reading the three published formats described in
``../shared/trajectories/README.md`` — mini-swe-agent ``*.traj.json``, OpenHands
``output.jsonl`` and the pma-tb2 ``trajectory_agent.steps.jsonl`` — and the other
versions of the first two (mini-swe-agent 2.x: commands in ``extra.actions``, answered
by tool or Responses API messages; early bare message lists; OpenHands
``[action, observation]`` pairs and the SDK's ``kind``-tagged events) into
``Recording`` objects: user prompts and agent turns, each turn a batch of tool calls
with the recorded output and exit code (or a failure read from terminal text when
the format has none). Files are read as their tools wrote them: a byte-order mark,
bytes that are not UTF-8 and lone surrogate escapes do not refuse a file. Unknown
formats raise ``RecordingFormatError`` with a message naming what was expected. This
module only reads files; it knows nothing about memory (``clio_acp.agent.replay``
feeds recordings into the middleware).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Literal

from clio_acp.memory.bank import well_formed_text
from clio_acp.memory.calls import ascii_fold

__all__ = [
    "FORMATS",
    "RecordedCall",
    "RecordedTurn",
    "Recording",
    "RecordingFormatError",
    "detect_format",
    "iter_recordings",
    "load_recordings",
    "split_task",
    "task_prompt",
]

RecordingFormat = Literal["mini-swe-agent", "openhands", "pma"]
FORMATS: tuple[str, ...] = ("mini-swe-agent", "openhands", "pma")


class RecordingFormatError(ValueError):
    """The file is not one of the supported trajectory formats (or is malformed)."""


@dataclass
class RecordedCall:
    """One executed tool call. ``index`` is 1-based within its recording; ``exit_code``
    is None when the format has none (pma) or the call timed out."""

    index: int
    tool_name: str
    args: dict[str, Any]
    output: str
    exit_code: int | None
    is_error: bool
    kind: str = "other"
    """execute, edit, read or other (the session event's tool kind)."""
    timed_out: bool = False


@dataclass
class RecordedTurn:
    """One model response and the tool batch it ran. ``user_text`` is the user prompt
    that opened this turn (empty for continuation turns)."""

    user_text: str = ""
    calls: list[RecordedCall] = field(default_factory=list)


@dataclass
class Recording:
    path: Path
    format: str
    name: str
    """Instance id or file stem."""
    turns: list[RecordedTurn] = field(default_factory=list)
    task: str = ""
    """The user's own task (§13.4), separated from the harness template: what a
    live session's user would have typed. The first turn's ``user_text`` is this
    task plus the template's task-scope constraints (``task_constraints``)."""
    task_constraints: list[str] = field(default_factory=list)
    """Sentences of the harness template that bound the task itself (which files
    may change), e.g. SWE-bench's "DO NOT MODIFY: Tests"; never its format rules."""
    yardstick: dict[str, Any] | None = None
    """pma: what the paper's memory agent did on the same task (when recorded)."""

    @property
    def calls(self) -> list[RecordedCall]:
        """Every recorded tool call of the run, in order (the turns flattened)."""
        return [call for turn in self.turns for call in turn.calls]


# -- task and harness template (§13.4) --------------------------------------------------

# A template sentence that bounds the task (which files may change), not the format.
_TASK_SCOPE = re.compile(
    r"\bnon-test files\b|"
    r"\b(?:do not|don't|must not|never|should not)\b(?: have to)?\s*:?\s*"
    r"(?:modify|change|edit|touch)\b[^\n]*?\b(?:tests?|testing|configuration)\b",
    re.IGNORECASE,
)
_PLACEHOLDER_TAG = re.compile(r"<([A-Za-z_]+)>")
# Tags harnesses put the user's task in (mini-swe-agent, OpenHands and SWE-agent
# templates), first match wins.
_TASK_TAGS = ("pr_description", "issue_description", "issue", "problem_statement", "task")
# Harness blocks that are never the task (instructions, format examples).
_TEMPLATE_BLOCK = re.compile(
    r"<(instructions|format_example|example_response|system_information)>.*?</\1>", re.DOTALL
)
# Terminus (pma-tb2): the task follows "Task Description:" up to the terminal state.
_TERMINUS_TASK = re.compile(
    r"(?:Task Description|Task|Instructions?):[ \t]*\n(.*?)(?:\n\s*Current terminal state:|\Z)",
    re.DOTALL,
)


def _tag_body(text: str, tag: str) -> tuple[str, str] | None:
    """(body of the first ``<tag>…</tag>``, the text around it) or None."""
    match = re.search(rf"<{tag}>\s*\n?(.*?)\n?\s*</{tag}>", text, re.DOTALL)
    if match is None:
        return None
    return match.group(1).strip(), text[: match.start()] + "\n" + text[match.end() :]


def _scope_sentences(template: str) -> list[str]:
    """Task-scope sentences of a harness template (de-duplicated, in order): the
    prohibitions ("DO NOT MODIFY: Tests …") when there are any, else the sentences
    naming the files to change ("… changes to non-test files …"). A new list each
    call; the sentences of the last few templates are remembered, since every run of
    one harness carries the same template (~0.3 ms of reading a mini-swe-agent run)."""
    return list(_template_scope(template))


@lru_cache(maxsize=16)
def _template_scope(template: str) -> tuple[str, ...]:
    """``_scope_sentences`` of ``template``, computed."""
    found: list[str] = []
    for line in template.splitlines():
        line = _PLACEHOLDER_TAG.sub(lambda m: m.group(1).replace("_", " "), line)
        for sentence in re.split(r"(?<=[.!])\s+", line.strip()):
            sentence = sentence.strip(" -*")
            if _TASK_SCOPE.search(sentence) and sentence not in found:
                found.append(sentence)
    prohibitions = [s for s in found if not re.search(r"non-test files", s, re.IGNORECASE)]
    return tuple(prohibitions or found)


def split_task(fmt: str, prompt: str) -> tuple[str, list[str]]:
    """Separate the user's task from the harness template wrapped around it.

    Returns (task, task-scope constraints). mini-swe-agent: the body of
    ``<pr_description>`` (its "Consider the following PR description:" lead
    dropped); OpenHands: the body of ``<issue_description>``; pma (Terminus): the
    text after ``Task Description:`` up to ``Current terminal state:``. A prompt
    without the format's markers is taken whole (a plain user prompt)."""
    prompt = prompt or ""
    if fmt == "pma":
        match = _TERMINUS_TASK.search(prompt)
        return (match.group(1).strip(), []) if match else (prompt.strip(), [])
    for tag in _TASK_TAGS:
        found = _tag_body(prompt, tag)
        if found is not None:
            task, template = found
            task = re.sub(r"^Consider the following (?:PR|issue) description:\s*", "", task)
            return task.strip(), _scope_sentences(template)
    # No task tag: drop the harness's instruction and example blocks if there are any.
    template = "\n".join(m.group(0) for m in _TEMPLATE_BLOCK.finditer(prompt))
    task = _TEMPLATE_BLOCK.sub("\n", prompt).strip()
    return task, _scope_sentences(template)


def task_prompt(task: str, constraints: list[str]) -> str:
    """The user prompt a live session would have received: the task, then the
    task-scope constraints as a ``Constraints:`` list (§13.4 list capture)."""
    if not constraints:
        return task
    return task + "\n\nConstraints:\n" + "\n".join(f"- {c}" for c in constraints)


# -- reading -----------------------------------------------------------------------------

# Recordings are read as UTF-8 text the way their tools wrote it, not refused for a
# stray byte: a leading byte-order mark (Windows editors) is dropped and bytes that are
# not UTF-8 (raw program output) read as U+FFFD, on every path below.
_ENCODING = {"encoding": "utf-8-sig", "errors": "replace"}

# An escape of a UTF-16 surrogate. json.loads joins a pair into one character, so a
# surrogate left in a parsed string is a lone one ("\ud800" alone is valid JSON).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _parse(text: str) -> Any:
    """``json.loads(text)`` with every lone surrogate in its strings and keys replaced
    by U+FFFD: UTF-8 cannot encode one, so hashing an output, printing the report or
    the bank would fail on it. Only text with a surrogate escape is walked."""
    value = json.loads(text, strict=False)  # raw control characters (NUL, ESC) in strings
    if _SURROGATE_ESCAPE.search(text) is None:
        return value
    if isinstance(value, str):
        return well_formed_text(value)
    stack = [value] if isinstance(value, dict | list) else []
    while stack:  # iterative: as deep as the parser allowed
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if isinstance(node, dict):
            node.clear()  # re-filled in order, under well-formed keys
        for key, item in items:
            if isinstance(item, str):
                item = well_formed_text(item)
            elif isinstance(item, dict | list):
                stack.append(item)
            node[well_formed_text(key) if isinstance(key, str) else key] = item
    return value


_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_ERRORS = (EOFError, zlib.error)  # a cut or corrupt stream (BadGzipFile is an OSError)


def _gzipped(path: Path) -> bool:
    """``path`` starts with the gzip magic (``output.jsonl.gz`` as published)."""
    with path.open("rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def _open_text(path: Path) -> IO[str]:
    """``path`` opened for reading text (``_ENCODING``), through gzip when it is
    compressed."""
    if _gzipped(path):
        return gzip.open(path, "rt", **_ENCODING)
    return path.open(**_ENCODING)


def _plain_name(path: Path) -> str:
    """The file name without a ``.gz`` suffix: what the format is told by."""
    return path.name.removesuffix(".gz")


def _read_document(path: Path) -> Any:
    """The whole file parsed as one JSON document (``_parse``)."""
    data = path.read_bytes()
    if data.startswith(_GZIP_MAGIC):
        data = gzip.decompress(data)
    return _parse(data.decode(**_ENCODING))


# -- detection ---------------------------------------------------------------------------


def _first_json_line(path: Path) -> Any:
    with _open_text(path) as handle:
        for line in handle:
            if line.strip():
                return _parse(line)
    return None


def detect_format(path: Path) -> RecordingFormat:
    """Guess the format of ``path`` from its content.

    Raises ``RecordingFormatError`` when it matches none of the three formats."""
    return _detect(path)[0]


def _detect(path: Path) -> tuple[RecordingFormat, Any]:
    """``detect_format`` and what it parsed to decide, which the loader takes instead
    of parsing it a second time: a ``.json`` file's document, an OpenHands file's
    first instance; else None."""
    try:
        if _plain_name(path).endswith(".json"):
            data = _read_document(path)
            if isinstance(data, dict) and isinstance(data.get("messages"), list):
                return "mini-swe-agent", data
            if _message_list(data):  # early mini-swe-agent: the bare message list
                return "mini-swe-agent", data
        else:
            first = _first_json_line(path)
            if isinstance(first, dict) and isinstance(first.get("history"), list):
                return "openhands", first
            if isinstance(first, dict) and "memory_ops" in first:
                raise RecordingFormatError(
                    f"{path}: this is a pma memory-agent log (trajectory_memory.steps.jsonl); "
                    "replay its sibling trajectory_agent.steps.jsonl instead"
                )
            if isinstance(first, dict) and "step" in first and "tool_calls" in first:
                return "pma", None
    except OSError as exc:
        raise RecordingFormatError(f"{path}: cannot read: {exc}") from exc
    except _GZIP_ERRORS as exc:
        raise RecordingFormatError(f"{path}: cannot read: gzip: {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise RecordingFormatError(f"{path}: {_UNKNOWN} (not JSON: {exc})") from exc
    raise RecordingFormatError(f"{path}: {_UNKNOWN}")


def _message_list(data: Any) -> bool:
    """``data`` is a non-empty list of chat messages (objects with a ``role``)."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(m, dict) and "role" in m for m in data)
    )


_UNKNOWN = (
    "unknown trajectory format; expected mini-swe-agent *.traj.json ({messages:[…]}), "
    "OpenHands output.jsonl ({history:[…]} per line) or pma trajectory_agent.steps.jsonl "
    "({step, tool_calls, observations} per line)"
)


def load_recordings(
    path: Path, fmt: str = "auto", *, part: tuple[int, int] | None = None
) -> list[Recording]:
    """Read ``path`` as ``fmt`` (``auto`` detects). One file gives one recording,
    except OpenHands output.jsonl, which gives one per instance line.

    ``part`` = (i, k) reads the i-th of k interleaved shares of the file (``--jobs``
    workers splitting one file): for OpenHands the instances whose ordinal is i modulo
    k, for a one-recording format the recording in share 0 and nothing in the others;
    a share may be empty. Raises ``RecordingFormatError`` for an unknown format name,
    an undetectable file or a file that does not have the named format's shape."""
    return list(iter_recordings(path, fmt, part=part))


_LOAD_ERRORS = (
    OSError,
    ValueError,  # UnicodeDecodeError and json.JSONDecodeError included
    KeyError,
    TypeError,
    AttributeError,  # e.g. a null where a message object belongs
    RecursionError,  # deeply nested JSON
    *_GZIP_ERRORS,
)


def iter_recordings(
    path: Path, fmt: str = "auto", *, part: tuple[int, int] | None = None
) -> Iterator[Recording]:
    """``load_recordings`` one recording at a time: an OpenHands file's instance lines
    are read and parsed as the caller asks for them, so a caller that replays each and
    lets it go holds one instance, not the whole file. Raises what ``load_recordings``
    raises, once iteration reaches the fault (the recordings before it were yielded)."""
    if path.exists() and not path.is_file() and not path.is_dir():
        # A pipe (<(zcat run.jsonl.gz)) or FIFO: it is opened more than once (format
        # detection, then each --jobs share), and a FIFO without a writer blocks open.
        raise RecordingFormatError(
            f"{path}: not a regular file (a pipe or device); save it to a file and replay that"
        )
    document = None
    if fmt == "auto":
        fmt, document = _detect(path)
    loaders = {"mini-swe-agent": _load_mini, "openhands": _iter_openhands, "pma": _load_pma}
    if fmt not in loaders:
        raise RecordingFormatError(
            f"unknown format {fmt!r}; choose one of auto, {', '.join(FORMATS)}"
        )
    try:
        if fmt == "openhands":
            found: Iterator[Recording] = _iter_openhands(path, part, first=document)
        elif part is None or part[0] == 0:
            found = iter(_load_mini(path, document) if document is not None else loaders[fmt](path))
        else:
            found = iter(())
        # What detection parsed is not kept alive while the caller replays: every
        # garbage collection there would walk the whole document again.
        del document
        yield from found
    except RecordingFormatError:
        raise
    except _LOAD_ERRORS as exc:
        raise RecordingFormatError(f"{path}: not a valid {fmt} trajectory: {exc}") from exc


# -- mini-swe-agent ----------------------------------------------------------------------

# mini-swe-agent's own action regexes: exactly one ```bash block is an action (1.x);
# 2.x text-based runs fence it as ```mswea_bash_command, or tag it (its XML config).
_MINI_ACTION = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_MINI_XML_ACTION = re.compile(r"<mswea_bash_command>(.*?)</mswea_bash_command>", re.DOTALL)
_MINI_RC = re.compile(r"^\s*<returncode>(-?\d+)</returncode>")
_MINI_TIMEOUT = re.compile(r"^\s*The last command <command>(.*?)</command> timed out", re.DOTALL)


def _between(text: str, tag: str) -> str | None:
    """The body of the first ``<tag>…</tag>`` (one newline after the opening and one
    before the closing tag dropped), or None: what ``<tag>\\n?(.*?)\\n?</tag>`` (DOTALL)
    captures, found with ``str.find`` (the lazy regex tests every position of a long
    observation)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = text.find(opening)
    if start < 0:
        return None
    start += len(opening)
    end = text.find(closing, start)
    if end < 0:
        return None
    body = text[start:end]
    if body.startswith("\n"):
        body = body[1:]
    return body[:-1] if body.endswith("\n") else body


def _mini_output(observation: str) -> str:
    body = _between(observation, "output")
    if body is not None:
        return body
    head = _between(observation, "output_head") or ""
    tail = _between(observation, "output_tail") or ""
    elided = (_between(observation, "elided_chars") or "").strip()
    return f"{head}\n[{elided}]\n{tail}" if elided else head + tail


def _text_of(content: Any) -> str:
    """A message's content as text: a string as is; a list of parts (the chat APIs'
    multi-part content, e.g. ``[{"type": "text", "text": …}]``) as its texts joined;
    anything else as its JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "\n\n".join(str(p["text"]) for p in content if p.get("text") is not None)
    return json.dumps(content)


def _mini_actions(message: dict[str, Any]) -> list[str]:
    """The commands of a mini-swe-agent 2 message (``extra.actions``: one per tool
    call, or the one parsed from the text), else [] (1.x: read from the text)."""
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if not isinstance(actions, list):
        return []
    return [str(a["command"]) for a in actions if isinstance(a, dict) and "command" in a]


def _mini_call(index: int, command: str, observation: Any) -> RecordedCall | None:
    """The call of ``command`` given the message that answered it, or None when no
    observation holds an exit code (a format error, the final submission). 2.x
    observations also carry ``extra.returncode`` and ``extra.raw_output``, used when
    the text has no ``<returncode>`` (e.g. an ``<exception>`` leads it)."""
    if not isinstance(observation, dict):
        return None
    if observation.get("type") == "function_call_output":  # the Responses API's answer
        text = _text_of(observation.get("output", ""))
    elif observation.get("role") in ("user", "tool"):
        text = _text_of(observation.get("content", ""))
    else:
        return None
    rc, timeout = _MINI_RC.match(text), _MINI_TIMEOUT.match(text)
    extra = observation.get("extra")
    extra = extra if isinstance(extra, dict) else {}
    returncode = extra.get("returncode")
    if rc:
        exit_code, output = int(rc.group(1)), _mini_output(text)
    elif timeout:
        exit_code, output = None, (_between(text, "output") or "").strip()
    elif isinstance(returncode, int) and not isinstance(returncode, bool):
        exit_code, output = returncode, str(extra.get("raw_output") or "")
        if exit_code == -1 and "timed out" in str(extra.get("exception_info") or ""):
            exit_code, timeout = None, True
    else:
        return None
    if timeout:
        output = "command timed out and was killed\n" + output
    return RecordedCall(
        index=index,
        tool_name="bash",
        args={"command": command},
        output=output,
        exit_code=exit_code,
        is_error=exit_code != 0,
        kind="execute",
        timed_out=bool(timeout),
    )


def _load_mini(path: Path, document: Any = None) -> list[Recording]:
    """The one recording of a mini-swe-agent file (``document``: the file already
    parsed by format detection). 1.x: one fenced bash block per assistant message,
    the next message its observation; 2.x: the commands in ``extra.actions`` (tool
    calls or text), answered by as many following observation messages."""
    data = _read_document(path) if document is None else document
    if isinstance(data, list):  # early versions saved the bare message list
        data = {"messages": data}
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise RecordingFormatError(f"{path}: not a mini-swe-agent trajectory (no messages list)")
    messages = data["messages"]
    name = str(data.get("instance_id") or _plain_name(path).removesuffix(".traj.json"))
    name = well_formed_text(name)  # a file name that is not UTF-8: printed, hashed
    recording = Recording(path, "mini-swe-agent", name)
    index = 0
    pending_user = ""
    for i, message in enumerate(messages):
        role, content = message.get("role"), _text_of(message.get("content"))
        if role == "user" and not recording.turns and i <= 1:
            recording.task, recording.task_constraints = split_task(recording.format, content)
            pending_user = task_prompt(recording.task, recording.task_constraints)
            continue
        commands = _mini_actions(message)  # a Responses API message has no role
        if role != "assistant" and not commands:
            continue
        turn = RecordedTurn(user_text=pending_user)
        pending_user = ""
        if not commands:
            actions = _MINI_ACTION.findall(content) or [
                a.strip() for a in _MINI_XML_ACTION.findall(content)
            ]
            commands = actions if len(actions) == 1 else []
        for k, command in enumerate(commands, 1):
            observation = messages[i + k] if i + k < len(messages) else None
            call = _mini_call(index + 1, command, observation)
            if call is None:
                break
            index += 1
            turn.calls.append(call)
        recording.turns.append(turn)
    return [recording]


# -- OpenHands ---------------------------------------------------------------------------

_OH_KINDS = {"run": "execute", "read": "read", "edit": "edit", "write": "edit", "browse": "fetch"}


def _oh_arguments(event: dict[str, Any]) -> dict[str, Any] | None:
    meta = event.get("tool_call_metadata") or {}
    call_id = meta.get("tool_call_id")
    try:
        for choice in meta["model_response"]["choices"]:
            for call in choice["message"].get("tool_calls") or []:
                if call.get("id") == call_id:
                    args = _parse(call["function"]["arguments"])
                    return args if isinstance(args, dict) else None
    except (KeyError, TypeError, json.JSONDecodeError):
        return None
    return None


def _json_line(path: Path, line_no: int, line: str) -> Any:
    """One JSON Lines row; a bad one is named by its line (the decoder's own position
    counts within the line only, so it always said "line 1")."""
    try:
        return _parse(line)
    except (ValueError, RecursionError) as exc:
        raise RecordingFormatError(f"{path}:{line_no}: not a JSON line: {exc}") from exc


def _iter_openhands(
    path: Path, part: tuple[int, int] | None = None, *, first: Any = None
) -> Iterator[Recording]:
    """One recording per instance line, read as asked for. ``part`` = (i, k) keeps the
    instance lines whose 0-based ordinal among the non-blank lines is i modulo k (the
    others are not parsed), for ``--jobs`` workers sharing one file. ``first``: the
    first instance line already parsed (by format detection), or None."""
    found = False
    with _open_text(path) as handle:
        ordinal = -1
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            ordinal += 1
            parsed, first = (first if ordinal == 0 else None), None  # detection's parse of line 1
            if part is not None and ordinal % part[1] != part[0]:
                continue
            found = True
            try:
                recording = _openhands_recording(path, line_no, line, parsed)
            except RecordingFormatError:
                raise
            except _LOAD_ERRORS as exc:  # a value of the wrong type: name its line
                raise RecordingFormatError(
                    f"{path}:{line_no}: not a valid OpenHands record: {exc}"
                ) from exc
            del parsed  # not kept alive while the caller replays (see iter_recordings)
            yield recording
    if not found and part is None:
        raise RecordingFormatError(f"{path}: no OpenHands records")


def _openhands_recording(path: Path, line_no: int, line: str, parsed: Any = None) -> Recording:
    """The recording of one OpenHands instance line (``parsed``: the line's JSON
    value when it was already read). Its ``history`` is a list of events, or (early
    OpenHands) of ``[action, observation]`` pairs; SDK (V1) events, told by their
    ``kind``, are read by ``_oh_sdk_turns``."""
    obj = _json_line(path, line_no, line) if parsed is None else parsed
    if not isinstance(obj, dict) or not isinstance(obj.get("history"), list):
        raise RecordingFormatError(f"{path}:{line_no}: not an OpenHands record (no history)")
    name = well_formed_text(
        str(obj.get("instance_id") or f"{Path(_plain_name(path)).stem}:{line_no}")
    )
    recording = Recording(path, "openhands", name)
    history: list[dict[str, Any]] = []
    paired: dict[int, dict[str, Any]] = {}
    for item in obj["history"]:
        pair = item if isinstance(item, list) else [item]
        events = [e for e in pair if isinstance(e, dict)]
        if len(pair) == 2 and len(events) == 2 and events[1].get("observation"):
            paired[id(events[0])] = events[1]  # a pair answers its own action
        history += events
    if any(isinstance(e.get("kind"), str) for e in history):
        _oh_sdk_turns(recording, history)
        return recording
    observations = {
        e.get("cause"): e for e in history if e.get("observation") and e.get("cause") is not None
    }
    _oh_turns(
        recording, history, lambda event: paired.get(id(event)) or observations.get(event.get("id"))
    )
    return recording


def _oh_user_prompt(recording: Recording, text: str) -> str:
    """The prompt of a user message; the first one is the task (§13.4)."""
    if recording.task:
        return text
    task, scope = split_task("openhands", text)
    recording.task, recording.task_constraints = task, scope
    return task_prompt(task, scope)


def _oh_turns(
    recording: Recording,
    history: list[dict[str, Any]],
    answer: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> None:
    """The turns of event-stream (V0) history: each agent action with the
    observation that ``answer`` finds for it (its ``cause``, or its pair)."""
    index = 0
    pending_user = ""
    for event in history:
        action = event.get("action")
        if event.get("source") == "user" and action == "message":
            text = str((event.get("args") or {}).get("content") or "")
            pending_user = _oh_user_prompt(recording, text)
            continue
        if event.get("source") != "agent" or action not in _OH_KINDS:
            continue
        observation = answer(event)
        if observation is None:
            continue
        index += 1
        meta = event.get("tool_call_metadata") or {}
        tool_name = str(meta.get("function_name") or action)
        args = _oh_arguments(event)
        if args is None:
            raw = event.get("args") or {}
            args = {k: v for k, v in raw.items() if k not in {"thought", "hidden"}}
        content = str(observation.get("content") or "")
        extras = observation.get("extras") or {}
        exit_code = (extras.get("metadata") or {}).get("exit_code")
        if not isinstance(exit_code, int):  # before CmdOutputMetadata: extras.exit_code
            exit_code = extras.get("exit_code") if isinstance(extras, dict) else None
        exit_code = exit_code if isinstance(exit_code, int) else None
        error = observation.get("observation") == "error" or content.startswith("ERROR:")
        call = _oh_call(index, tool_name, args, content, exit_code, _OH_KINDS[action], error)
        recording.turns.append(RecordedTurn(user_text=pending_user, calls=[call]))
        pending_user = ""


# OpenHands SDK (V1) action kinds -> tool kind; a file editor's "view" is a read.
_SDK_KINDS = {
    "TerminalAction": "execute",
    "ExecuteBashAction": "execute",
    "BashAction": "execute",
    "FileEditorAction": "edit",
    "StrReplaceEditorAction": "edit",
    "BrowserUseAction": "fetch",
}
_SDK_ANSWERS = ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation")


def _oh_sdk_turns(recording: Recording, history: list[dict[str, Any]]) -> None:
    """The turns of OpenHands SDK (V1) history, events told by ``kind``: a user
    ``MessageEvent``, an ``ActionEvent`` answered by the observation (or error,
    rejection) naming its ``action_id`` or ``tool_call_id``."""
    answers: dict[Any, dict[str, Any]] = {}
    for e in history:
        if e.get("kind") in _SDK_ANSWERS:
            for key in (e.get("action_id"), e.get("tool_call_id")):
                if isinstance(key, str):
                    answers.setdefault(key, e)
    index, pending_user = 0, ""
    for event in history:
        kind = event.get("kind")
        if kind == "MessageEvent" and event.get("source") == "user":
            message = event.get("llm_message") or {}
            pending_user = _oh_user_prompt(recording, _text_of(message.get("content") or ""))
            continue
        action = event.get("action")
        if kind != "ActionEvent" or not isinstance(action, dict):
            continue
        answer = answers.get(event.get("id")) or answers.get(event.get("tool_call_id"))
        if answer is None:
            continue
        index += 1
        tool_kind = _SDK_KINDS.get(str(action.get("kind")), "other")
        if tool_kind == "edit" and action.get("command") == "view":
            tool_kind = "read"
        args = {k: v for k, v in action.items() if k != "kind" and v is not None}
        observation = answer.get("observation")
        observation = observation if isinstance(observation, dict) else {}
        output = _text_of(observation.get("content") or answer.get("error") or "")
        exit_code = observation.get("exit_code")
        if not isinstance(exit_code, int):
            exit_code = (observation.get("metadata") or {}).get("exit_code")
        exit_code = exit_code if isinstance(exit_code, int) else None
        if observation.get("timeout") is True and tool_kind == "execute":
            exit_code = -1
        error = answer.get("kind") != "ObservationEvent" or observation.get("is_error") is True
        tool_name = str(event.get("tool_name") or action.get("kind"))
        call = _oh_call(index, tool_name, args, output, exit_code, tool_kind, error)
        recording.turns.append(RecordedTurn(user_text=pending_user, calls=[call]))
        pending_user = ""


def _oh_call(
    index: int,
    tool_name: str,
    args: dict[str, Any],
    output: str,
    exit_code: int | None,
    kind: str,
    error: bool,
) -> RecordedCall:
    """A call: a command fails by its exit code (-1: timed out), another tool by
    ``error``."""
    timed_out = exit_code == -1
    return RecordedCall(
        index=index,
        tool_name=tool_name,
        args=args,
        output=output,
        exit_code=None if timed_out and kind == "execute" else exit_code,
        is_error=exit_code != 0 if kind == "execute" else error,
        kind=kind,
        timed_out=timed_out,
    )


# -- pma-tb2 (terminal keystrokes, no exit codes) ---------------------------------------

_PROMPT = re.compile(r"^(?:\([^)]*\)\s*)?[\w.-]+@[\w.-]+:[^\n]*?[#$] ?", re.MULTILINE)
# Failure read from terminal text (the format has no exit codes): each shape, with
# the lowercase texts one of which any screen it matches holds.
_FAILURE_SHAPES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("command not found",), r"command not found"),
    (("no such file or directory",), r"No such file or directory"),
    (("permission denied",), r"Permission denied"),
    (("operation not permitted",), r"Operation not permitted"),
    (("connection ",), r"Connection (?:reset|refused|timed out)"),
    (("could not resolve host",), r"Could not resolve host"),
    (("temporary failure in name resolution",), r"Temporary failure in name resolution"),
    (("traceback (most recent call last)",), r"^Traceback \(most recent call last\)"),
    (("error", "exception"), r"^[A-Za-z_][\w.]*(?:Error|Exception)\b:"),
    (("error", "fatal"), r"^(?:error|fatal)(?:\[\w+\])?:"),
    (("error in ",), r"^Error in .+:\s*$"),
    (("execution halted",), r"^Execution halted$"),
    (("sh: ",), r"^(?:-?bash|sh|zsh|dash): .+: "),
    (("e: ",), r"^E: "),
    (("segmentation fault",), r"Segmentation fault"),
    (("failed",), r"\bFAILED\b"),
    (("no working ",), r"^No working "),
    (("cannot ",), r"cannot (?:open|access|find|stat|create|remove)"),
    ((": not found",), r": not found$"),
    (("make: ***",), r"make: \*\*\*"),
    (("killed",), r"^Killed$"),
    (("core dumped",), r"core dumped"),
)
_TERMINAL_FAILURE = re.compile(
    "|".join(shape for _needles, shape in _FAILURE_SHAPES), re.MULTILINE | re.IGNORECASE
)
# The same pattern, case-sensitive, for lowercased ASCII text (it has no upper-case
# escape such as \\S or \\W that lowercasing would change).
_TERMINAL_FAILURE_LOWER = re.compile(_TERMINAL_FAILURE.pattern.lower(), re.MULTILINE)
# Each shape alone, for lowercased ASCII text, behind the texts it needs: a search
# of the whole alternation tries every shape at every offset (~80 ns a character).
_LOWER_SHAPES = tuple(
    (needles, re.compile(shape.lower(), re.MULTILINE)) for needles, shape in _FAILURE_SHAPES
)


_SHAPES_ANY_CASE = tuple(
    (needles, re.compile(shape, re.MULTILINE | re.IGNORECASE)) for needles, shape in _FAILURE_SHAPES
)


def _shape_found(text: str, haystack: str, shapes: tuple[tuple[Any, re.Pattern[str]], ...]) -> bool:
    """Some shape matches ``text``; a shape is searched only when one of its texts
    occurs in ``haystack`` (``text`` as the shape's texts are written)."""
    for needles, shape in shapes:
        for needle in needles:  # a loop, not any(): ~20 shapes per screen, most absent
            if needle in haystack:
                if shape.search(text):
                    return True
                break
    return False


def _failure_any_text(text: str) -> bool:
    """``_TERMINAL_FAILURE.search(text)`` for text that is not ASCII: each shape is
    searched only where one of its texts occurs in ``ascii_fold(text).lower()`` (the
    characters IGNORECASE takes for an ASCII letter are that letter there, the others
    no ASCII character at all, so a match always leaves its texts there)."""
    return _shape_found(text, ascii_fold(text).lower(), _SHAPES_ANY_CASE)


def _lower_ascii_failure(text: str) -> bool:
    """``_TERMINAL_FAILURE_LOWER.search(text)`` for lowercased ASCII ``text``: some
    shape matches somewhere, and a shape is only searched for where its texts are."""
    return _shape_found(text, text, _LOWER_SHAPES)


_WARNING_LINE = re.compile(r"^\s*(?:\S+:\s*)?(?:WARNING|warning|Warning)\b.*$", re.MULTILINE)
# tmux-style special keys (C-c, C-d, Escape…) are keystrokes, not commands.
_SPECIAL_KEYS = re.compile(r"^\s*(?:[CM]-[a-z\\\[\]]|Escape|Enter|Tab|Up|Down|Left|Right)\s*$")


def terminal_failed(output: str, keystrokes: str) -> bool:
    """True when the terminal text of one command reads as a failure: a known
    failure line outside warning lines. Special keys and empty keystrokes (a wait)
    are never failures of their own."""
    if not keystrokes.strip() or _SPECIAL_KEYS.match(keystrokes):
        return False
    # A warning line holds WARNING, warning or Warning: no "arning"/"ARNING", none.
    text = _WARNING_LINE.sub("", output) if "arning" in output or "ARNING" in output else output
    if text.isascii():  # str.lower is the regex's case folding there
        return _lower_ascii_failure(text.lower())
    return _failure_any_text(text)


# A continuation line the shell echoes while a multi-line command (here-document,
# open quote) is typed: "> text", or ">" alone for an empty line.
_CONTINUATION = re.compile(r"^>(?: |$)")  # on one line: ">" alone or "> …" (as tested)


def _drop_echo(text: str, command: str) -> str:
    """The screen text minus what the terminal echoed of ``command``: continuation
    lines and lines equal to a line of the typed command (a here-document's body
    scrolled past its prompt line is data being written, not output)."""
    typed = {line.strip() for line in command.split("\n") if line.strip()}
    kept = [
        line
        for line in text.split("\n")
        if not (line == ">" or line.startswith("> ")) and line.strip() not in typed
    ]
    return "\n".join(kept).strip()


_SCREEN_HEADER = re.compile(
    r"^(?:New Terminal Output|Current Terminal Screen):?[ \t]*$", re.MULTILINE
)


def _split_screen(screen: str, commands: list[str]) -> list[str]:
    """Assign the screen text after each command's echoed prompt line to it."""
    outputs = [""] * len(commands)
    matches = list(_PROMPT.finditer(screen))
    segments = []
    for j, match in enumerate(matches):
        end = matches[j + 1].start() if j + 1 < len(matches) else len(screen)
        segments.append(screen[match.end() : end])
    k = 0
    for segment in segments:
        if k >= len(commands):
            break
        first = commands[k].strip().split("\n", 1)[0].strip()
        if not first or segment.lstrip().startswith(first[:40]):
            # Drop the echoed command line itself (and its heredoc continuation lines).
            body = segment.split("\n", 1)[1] if "\n" in segment else ""
            outputs[k] = _drop_echo(body, commands[k])
            k += 1
    if k == 0 and commands:
        # The prompt line scrolled off: only the tail of the screen is left.
        tail = _PROMPT.sub("", screen)
        outputs[-1] = _drop_echo(tail, commands[-1])
    return outputs


def _load_pma(path: Path) -> list[Recording]:
    run = path.absolute().parent  # "task/run" however the path was typed (a relative
    # "trajectory_agent.steps.jsonl" named its run "/")
    recording = Recording(path, "pma", well_formed_text(run.parent.name + "/" + run.name))
    index = 0
    pending_user = ""
    with _open_text(path) as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            row = _json_line(path, line_no, line)
            if not isinstance(row, dict) or "step" not in row or "tool_calls" not in row:
                raise RecordingFormatError(f"{path}:{line_no}: not a pma agent step")
            if row.get("role") == "user":
                pending_user = str(row.get("message") or "")
                if not recording.task:
                    recording.task, _scope = split_task("pma", pending_user)
                    pending_user = recording.task
                continue
            try:
                turn = _pma_turn(row, index, pending_user)
            except _LOAD_ERRORS as exc:  # a value of the wrong type: name its line
                raise RecordingFormatError(
                    f"{path}:{line_no}: not a pma agent step: {exc}"
                ) from exc
            pending_user = ""
            index += len(turn.calls)
            recording.turns.append(turn)
    memory_log = path.parent / "trajectory_memory.steps.jsonl"
    if memory_log.is_file():
        recording.yardstick = _pma_yardstick(memory_log)
    return [recording]


def _pma_turn(row: dict[str, Any], index: int, user_text: str) -> RecordedTurn:
    """The turn of one agent step: its keystroke batches, numbered after ``index``,
    each with its share of the screen."""
    calls = [c for c in row.get("tool_calls") or [] if isinstance(c, dict)]
    screen = _SCREEN_HEADER.sub("", "\n".join(str(o) for o in row.get("observations") or []))
    keystrokes = [
        str((c.get("args") or {}).get("keystrokes") or "")
        for c in calls
        if str(c.get("name", "")).startswith("bash_command")
    ]
    outputs = iter(_split_screen(screen, keystrokes))
    turn = RecordedTurn(user_text=user_text)
    for call in calls:
        name = str(call.get("name", "")).split(" ", 1)[0]
        args = dict(call.get("args") or {})
        index += 1
        output = next(outputs, "") if name == "bash_command" else ""
        failed = terminal_failed(output, str(args.get("keystrokes") or ""))
        turn.calls.append(
            RecordedCall(
                index=index,
                tool_name=name,
                args=args,
                output=output,
                exit_code=None if failed else 0,
                is_error=failed,
                kind="execute" if name == "bash_command" else "other",
            )
        )
    return turn


def _pma_yardstick(path: Path) -> dict[str, Any]:
    """What the paper's memory agent did: memory steps and the agent steps after
    which it injected a reminder (memory step i precedes agent step i+1). A fault
    in it is named by this file and line, not by the agent log being replayed."""
    steps = 0
    injected: list[int] = []
    with _open_text(path) as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            row = _json_line(path, line_no, line)
            steps += 1
            if not isinstance(row, dict):
                raise RecordingFormatError(f"{path}:{line_no}: not a pma memory step")
            if row.get("injected_reminder"):
                try:
                    injected.append(int(row.get("step", steps)))
                except (TypeError, ValueError) as exc:
                    raise RecordingFormatError(f"{path}:{line_no}: bad step: {exc}") from exc
    return {"memory_steps": steps, "injected_after_steps": injected}
