"""Pure facts about one tool call: identity, digest, exit-code meaning, state change.

Owns the canonical call string and operation fingerprint (MEMORY_SPEC §4 "Tool
observation"), result digests (§4 "Result digest", redacted and capped at 240 bytes),
the normalised error signature used as the repeated-failure key (§12.1), the
exit-code semantics table (§12.2) and the state-changing-call classifier (§12.1).
Everything here is a pure function of its inputs: no I/O, no clock, no bank, no
settings. The middleware and the rules tier decide what to *do* with these facts.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache, wraps
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, Literal, TypeVar

from clio_acp.memory.redact import redact_secrets_text

__all__ = [
    "DIGEST_MAX_BYTES",
    "EXIT_CODE_TABLE",
    "ExitVerdict",
    "call_description",
    "canonical_call",
    "canonical_json",
    "cap_digest",
    "classify_exit",
    "clear_caches",
    "error_digest",
    "error_signature",
    "flat_json_object",
    "is_state_changing",
    "last_simple_command",
    "looks_environmental",
    "meaningful_signature",
    "ok_digest",
    "operation_fingerprint",
    "problem_signature",
    "shell_changes_files",
    "shell_command_of",
    "split_simple_commands",
]

# MEMORY_SPEC §4: digests are capped at 240 bytes of UTF-8, never splitting a character.
DIGEST_MAX_BYTES = 240
# MEMORY_SPEC §4: callDescription is the collapsed canonical text cut to 180 chars + "…".
CALL_DESCRIPTION_MAX_CHARS = 180
UNREPRESENTABLE = "<unrepresentable>"
# Digests and signatures of recent texts are memoised (a rerun fails the same way);
# texts longer than this are not kept alive by the cache.
MEMO_ENTRIES = 512
MEMO_MAX_CHARS = 65_536

_WS = re.compile(r"\s+")


def collapse(text: str) -> str:
    """Whitespace runs as one space, trimmed: ``_WS.sub(" ", text).strip()``, done by
    ``str.split`` (the same characters: both use ``str.isspace``; 4x faster)."""
    return " ".join(text.split())


# MEMORY_SPEC §4: the legacy digest takes the first line naming a problem.
_PROBLEM_WORDS = (
    r"error|failed|failure|cannot|unable|expected|refused|denied|missing|not found|"
    r"timed out|timeout|fatal"
)
_PROBLEM_LINE = re.compile(_PROBLEM_WORDS, re.IGNORECASE)
# The same words on lowercased ASCII text (str.lower is the regex's case folding there,
# offsets kept): a case-sensitive scan is several times faster.
_PROBLEM_LOWER = re.compile(_PROBLEM_WORDS)
# The final exception line of a Python traceback ("pkg.SomeError: message").
_EXCEPTION_LINE = re.compile(
    r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|\.error)\b(?::.*)?$"
)


class _Unrepresentable(Exception):
    pass


def _canon(value: Any, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Unrepresentable
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        if id(value) in seen:
            raise _Unrepresentable
        seen.add(id(value))
        out = {}
        for key in sorted(value, key=str):
            if not isinstance(key, str):
                raise _Unrepresentable
            out[key] = _canon(value[key], seen)
        seen.discard(id(value))
        return out
    if isinstance(value, list | tuple):
        if id(value) in seen:
            raise _Unrepresentable
        seen.add(id(value))
        out_list = [_canon(item, seen) for item in value]
        seen.discard(id(value))
        return out_list
    raise _Unrepresentable


# Keys sorted, no whitespace between tokens, non-ASCII kept (built once, not per call).
_CANONICAL_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True
)


def flat_json_object(value: Any) -> bool:
    """True for a plain dict of string keys and str/int/bool/None/finite float values
    (exact types): nearly every tool call's arguments. Such a dict is its own
    canonical form, so the encoder can take it as is."""
    if type(value) is not dict:
        return False
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is not str and kind is not int and kind is not bool and item is not None:
            return False
    return True


def _flat_json(value: dict[str, Any]) -> str:
    """What ``_CANONICAL_ENCODER`` writes for a ``flat_json_object``, without building
    an encoder per call: each scalar written as ``json`` writes it (``float.__repr__``,
    ``int.__repr__``, ``encode_basestring`` with non-ASCII kept)."""
    if len(value) == 1:  # most tool calls: one string argument
        ((key, item),) = value.items()
        if type(item) is str:
            return "{" + encode_basestring(key) + ":" + encode_basestring(item) + "}"
    parts = []
    for key in sorted(value):
        item = value[key]
        kind = type(item)
        if kind is str:
            text = encode_basestring(item)
        elif item is None or kind is bool:
            text = _JSON_CONSTANTS[item]
        elif kind is int:
            text = int.__repr__(item)
        else:
            text = float.__repr__(item)
        parts.append(f"{encode_basestring(key)}:{text}")
    return "{" + ",".join(parts) + "}"


_JSON_CONSTANTS = {None: "null", True: "true", False: "false"}


def canonical_json(value: Any) -> str:
    """Canonical JSON of tool arguments (§4): keys sorted, no whitespace between
    tokens, non-ASCII kept. Raises ``ValueError`` for values JSON cannot represent
    (non-finite numbers, cycles, non-string keys, arbitrary objects)."""
    if flat_json_object(value):
        return _flat_json(value)
    try:
        canon = _canon(value, set())
    except (_Unrepresentable, RecursionError) as exc:
        raise ValueError("arguments cannot be represented as JSON") from exc
    return _CANONICAL_ENCODER.encode(canon)


def canonical_call(tool_name: str, args: Any, flat: bool = False) -> str:
    """``toolName`` + canonical JSON of the args, no separator (§4). Arguments that
    cannot be represented make the args part ``<unrepresentable>``. ``flat``: the
    caller found ``flat_json_object(args)`` true (spares checking it again)."""
    try:
        rendered = _flat_json(args) if flat else canonical_json(args if args is not None else {})
    except ValueError:  # also an int past sys.get_int_max_str_digits()
        rendered = UNREPRESENTABLE
    return tool_name.strip() + rendered


def operation_fingerprint(canonical: str) -> str:
    """First 16 hex chars of sha256 of the canonical call string (§4)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def call_description(canonical: str) -> str:
    """Canonical text with whitespace collapsed, cut to 180 chars ending in ``…`` (§4)."""
    text = collapse(canonical)
    if len(text) > CALL_DESCRIPTION_MAX_CHARS:
        text = text[: CALL_DESCRIPTION_MAX_CHARS - 1].rstrip() + "…"
    return text


_MEMOISED: list[Any] = []
_T = TypeVar("_T")


def _memo_text(func: Callable[[str], _T]) -> Callable[[str], _T]:
    """Memoise a pure function of one text: a failing command is usually rerun with
    the same output, and its digest and signatures are wanted more than once per
    event. Texts over ``MEMO_MAX_CHARS`` are computed every time (not kept alive)."""
    cached = lru_cache(maxsize=MEMO_ENTRIES)(func)
    _MEMOISED.append(cached)

    @wraps(func)
    def memoised(text: str) -> _T:
        return func(text) if len(text) > MEMO_MAX_CHARS else cached(text)

    return memoised


def clear_caches() -> None:
    """Forget every memoised text and tokenised command (benchmarks measure first
    sightings this way; results never depend on the caches)."""
    for func in _MEMOISED:
        func.cache_clear()
    _tokens.cache_clear()
    _simple_commands.cache_clear()
    _changes_of.cache_clear()


@_memo_text
def cap_digest(text: str) -> str:
    """Redact secrets (§8), collapse whitespace, cap at 240 UTF-8 bytes (§4).

    A cut never splits a character; a cut digest ends with ``…`` inside the cap."""
    text = collapse(redact_secrets_text(text))
    raw = text.encode("utf-8")
    if len(raw) <= DIGEST_MAX_BYTES:
        return text
    cut = raw[: DIGEST_MAX_BYTES - len("…".encode())].decode("utf-8", errors="ignore")
    return cut.rstrip() + "…"


_BANNER = re.compile(r"^[=\-*_#~ ]{3,}\s*[\w ]{0,40}?\s*[=\-*_#~ ]{3,}$")
# The characters a ``_BANNER`` / ``_EXCEPTION_LINE`` match can start with: a line
# starting otherwise is not tried (a regex call per line is most of a line's cost).
_BANNER_FIRST = frozenset("=-*_#~ ")
_EXCEPTION_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


_TRACEBACK_HEAD = "Traceback (most recent call last)"


def _kept_line(raw: str) -> str:
    """``raw`` stripped when a digest may name it, else ``""``: blank lines, echoed
    input ("> " / ">>> " continuation prompts) and banners such as
    "===== FAILURES =====" are skipped."""
    line = raw.strip()
    if not line or raw.startswith(("> ", ">>> ")) or _BANNER.match(line):
        return ""
    return line


@_memo_text
def _problem_line(text: str) -> str:
    """The §4 problem line of ``text``: among the kept lines (``_kept_line``), a
    traceback's last exception line, else the first line naming a problem, else the
    first line; a line ending in ``:`` gets the next kept line appended. ``""`` when
    no line is kept."""
    if _TRACEBACK_HEAD in text:
        return _problem_line_of([line for line in map(_kept_line, text.splitlines()) if line])
    # The lines joined by "\n" (the text itself when "\n" is its only line break), read
    # by offsets: one regex pass finds the candidate lines; only they are tested.
    joined = _joined_lines(text)
    start = _first_problem_line_start(joined)
    if start is None:
        start = _next_kept_line_start(joined, 0)
        if start is None:
            return ""
    end = _line_end(joined, start)
    line = _kept_line(joined[start:end])
    if line.endswith(":") and end < len(joined):
        following = _next_kept_line_start(joined, end + 1)
        if following is not None:  # "Some error:" names the problem next
            line = f"{line} {_kept_line(joined[following : _line_end(joined, following)])}"
    return line


# What ``str.splitlines`` breaks lines at besides "\n" (the last three are not ASCII).
_OTHER_LINE_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _joined_lines(text: str) -> str:
    """``"\\n".join(text.splitlines())``, without splitting when "\\n" is the only
    line break in ``text`` (then only a final "\\n" goes)."""
    breaks = _OTHER_LINE_BREAKS[:6] if text.isascii() else _OTHER_LINE_BREAKS
    for other in breaks:
        if other in text:
            return "\n".join(text.splitlines())
    return text[:-1] if text.endswith("\n") else text


def _line_end(joined: str, start: int) -> int:
    end = joined.find("\n", start)
    return len(joined) if end < 0 else end


def _next_kept_line_start(joined: str, position: int) -> int | None:
    """Offset of the first line of ``joined`` from ``position`` (a line start) that
    ``_kept_line`` keeps, or None."""
    while position <= len(joined):
        end = _line_end(joined, position)
        if _kept_line(joined[position:end]):
            return position
        position = end + 1
    return None


# ``_first_problem_line_start`` lowercases a long text a window of whole lines at a
# time: a problem named early in a huge log is found without folding all of it.
PROBLEM_WINDOW_CHARS = 65_536


def _first_problem_line_start(joined: str, window: int = PROBLEM_WINDOW_CHARS) -> int | None:
    """Offset of the first kept line of ``joined`` naming a problem, or None; the
    text is searched lowercased (``ascii_fold`` first when it is not ASCII: same
    length, so offsets hold), in windows of whole lines of about ``window`` chars."""
    base = 0
    while True:
        cut = joined.find("\n", base + window)
        end = len(joined) if cut < 0 else cut + 1
        found = _first_problem_line_in(joined[base:end] if base or end < len(joined) else joined)
        if found is not None:
            return base + found
        if end >= len(joined):
            return None
        base = end


def _first_problem_line_in(joined: str) -> int | None:
    lowered = (joined if joined.isascii() else ascii_fold(joined)).lower()
    position = 0
    while (match := _PROBLEM_LOWER.search(lowered, position)) is not None:
        start = lowered.rfind("\n", position, match.start()) + 1 or position
        end = _line_end(lowered, match.start())
        if _kept_line(joined[start:end]):
            return start
        if end == len(lowered):
            return None
        position = end + 1
    return None


def _problem_line_of(lines: list[str]) -> str:
    """``_problem_line`` over the kept lines (the path for text with a traceback)."""
    if not lines:
        return ""
    chosen = None
    if any(line.startswith(_TRACEBACK_HEAD) for line in lines):
        # A traceback names its problem in the last exception line, not the first
        # matching frame (§11.10: never digest loader noise).
        for line in reversed(lines):
            if _EXCEPTION_LINE.match(line):
                chosen = lines.index(line)
                break
    if chosen is None:
        chosen = next((i for i, line in enumerate(lines) if _PROBLEM_LINE.search(line)), 0)
    line = lines[chosen]
    if line.endswith(":") and chosen + 1 < len(lines):
        line = f"{line} {lines[chosen + 1]}"  # "Some error:" names the problem next
    return line


def error_digest(text: str | None, *, exit_code: int | None = None) -> str:
    """The digest of a failed result (§4 legacy digest): the first non-empty line
    naming a problem (for a Python traceback, its final exception line), else the
    first line; ``an unknown tool error`` when empty. Redacted and capped.
    A non-zero ``exit_code`` with no text gives ``exit code N with no output``."""
    line = _problem_line(text or "")
    if not line:
        if exit_code not in (None, 0):
            return f"exit code {exit_code} with no output"
        return "an unknown tool error"
    return cap_digest(line)


def ok_digest(output: str | None) -> str:
    """The digest of an ok result (§4): ``ok result <fp16 of the output>`` or ``ok``."""
    if not output:
        return "ok"
    return "ok result " + hashlib.sha256(output.encode("utf-8")).hexdigest()[:16]


# Volatile details masked before comparing failures: object addresses, durations,
# clock times, pids. Numbers in messages are kept (version 0.10 vs 0.11 differ).
# Every alternative starts with a digit or "p"/"P": the lookahead lets the engine
# skip other positions at once (4x faster on failure outputs, same matches).
_VOLATILE = re.compile(
    r"(?=[\dpP])(?:"
    r"(?P<addr>0x[0-9a-fA-F]{4,})"
    r"|(?P<ts>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b)"
    r"|(?P<dur>\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds)\b)"
    r"|(?P<pid>\b(?:pid|PID)[ =:]\d+)"
    r")"
)
# The same matches on text whose only decimal digits are ASCII (there ``\d`` is
# ``[0-9]``), with the first character consumed by a set the engine skips to in C (a
# lookahead start is tried at every offset) and the ``\b`` before it checked behind:
# ~2x faster on failure outputs. A duration's digits, fraction and blank are taken
# possessively: giving one back can only put a digit or a "." where the unit must be, so
# no match is lost, and a long number no longer backtracks digit by digit (~15 %).
# tests/memory/test_calls.py compares the two on generated and recorded texts.
_VOLATILE_ASCII = re.compile(
    r"[0-9pP](?:"
    r"(?P<addr>(?<=0)x[0-9a-fA-F]{4,})"
    r"|(?<=\b[0-9])(?:"
    r"(?P<ts>[0-9]{3}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
    r"|[0-9]?:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?\b)"
    r"|(?P<dur>[0-9]*+(?:\.[0-9]++)?+\s?+(?:ms|s|sec|secs|seconds)\b))"
    r"|(?P<pid>(?<=\bp)id[ =:][0-9]+|(?<=\bP)ID[ =:][0-9]+)"
    r")"
)
# ``_VOLATILE_ASCII`` without its pid branch, for text holding neither "pid" nor
# "PID" (where that branch, the last, never matches): only digits start a try, not
# every "p" of the text (~1.8x faster on recorded failure outputs).
_VOLATILE_DIGITS = re.compile(
    _VOLATILE_ASCII.pattern.replace("[0-9pP](?:", "[0-9](?:", 1).replace(
        r"|(?P<pid>(?<=\bp)id[ =:][0-9]+|(?<=\bP)ID[ =:][0-9]+)", "", 1
    )
)
_MASKS = {"addr": "0x…", "ts": "<ts>", "dur": "<t>", "pid": "pid <n>"}


def _mask_match(match: re.Match[str]) -> str:
    return _MASKS[match.lastgroup or "addr"]


def mask_volatile_details(text: str, ascii_digits: bool = False) -> str:
    """``text`` with addresses, clock times, durations and pids masked (``_VOLATILE``).
    ``ascii_digits``: the caller knows every decimal digit of ``text`` is ASCII."""
    pattern = _VOLATILE_ASCII if ascii_digits else _volatile_pattern(text)
    if pattern is _VOLATILE_ASCII and "pid" not in text and "PID" not in text:
        pattern = _VOLATILE_DIGITS
    return pattern.sub(_mask_match, text)


_DIGIT = re.compile(r"\d")
_DIGIT_CHECK_ERRORS = "clio-acp-non-ascii-digit"


class _NonAsciiDigit(Exception):
    pass


def _digit_check_error(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler of ``_volatile_pattern``: raises ``_NonAsciiDigit`` when a
    run of characters the ASCII encoder could not take holds a decimal digit."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    if _DIGIT.search(error.object, error.start, error.end):
        raise _NonAsciiDigit
    return "", error.end


codecs.register_error(_DIGIT_CHECK_ERRORS, _digit_check_error)


def _volatile_pattern(text: str) -> re.Pattern[str]:
    """``_VOLATILE_ASCII`` unless ``text`` holds a non-ASCII decimal digit (the ASCII
    encoder walks the text in C and hands over only the runs of other characters)."""
    if text.isascii():
        return _VOLATILE_ASCII
    try:
        text.encode("ascii", _DIGIT_CHECK_ERRORS)
    except _NonAsciiDigit:
        return _VOLATILE
    return _VOLATILE_ASCII


# §12.1 signatures look at the head and the tail of a long result (where tools put
# what failed); the middle of a huge log is not compared.
SIGNATURE_HEAD_CHARS = 2000
SIGNATURE_TAIL_CHARS = 6000


@_memo_text
def _mask_volatile(text: str) -> str:
    if len(text) > SIGNATURE_HEAD_CHARS + SIGNATURE_TAIL_CHARS:
        head, tail = text[:SIGNATURE_HEAD_CHARS], text[-SIGNATURE_TAIL_CHARS:]
        text = head + "\n…\n" + tail
        return collapse(mask_volatile_details(text, head.isascii() and tail.isascii()))
    return collapse(mask_volatile_details(text))


def error_signature(output: str | None, *, exit_code: int | None = None) -> str:
    """Normalised error signature (§12.1): 16 hex of sha256 over the whole result
    with volatile details (addresses, durations, clock times, pids) masked. Two
    failures of the same call compare equal only if they failed *identically*.
    Empty output gives ``empty:<exit code>``."""
    text = _mask_volatile(output or "")
    if not text:
        return f"empty:{exit_code}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# §12.3: problem lines that name the environment rather than the code under work.
_ENVIRONMENTAL = re.compile(
    r"command not found|: not found$|No module named|ModuleNotFoundError|ImportError|"
    r"Permission denied|Read-only file system|No space left|Too many open files|"
    r"not a git repository|Name or service not known|Failed to resolve|NameResolution|"
    r"Could not resolve host|Temporary failure in name resolution|Connection refused|"
    r"Connection reset|Network is unreachable|Max retries exceeded|SSL|certificate|"
    r"error while loading shared libraries|No working .* found|is not installed|"
    r"externally-managed-environment|Killed|Out of memory|Cannot allocate memory|"
    r"timed out|cannot connect|Could not connect|No such file or directory",
    re.IGNORECASE,
)


def problem_signature(output: str | None, *, exit_code: int | None = None) -> str:
    """Command-independent signature for environmental failures (§12.3): the masked
    problem line of the result (the first line naming a problem, or a traceback's
    exception line). Empty output gives ``<empty output>``."""
    line = _mask_volatile(_problem_line(output or ""))
    return line[:300] if line else "<empty output>"


def meaningful_signature(signature: str) -> bool:
    """True when a problem signature says something (an empty output counts; a bare
    prompt such as ``>`` or a line without a word does not), so that unrelated
    failures are never grouped as one environment fault by accident."""
    return signature == "<empty output>" or bool(_WORD.search(signature))


def looks_environmental(signature: str) -> bool:
    """True when a problem signature names the environment (missing command or
    module, permissions, network, disk, git repository, missing path) or is empty."""
    return signature == "<empty output>" or bool(_ENVIRONMENTAL.search(signature))


# -- shell parsing ------------------------------------------------------------------

# Precompiled once: these run on every observed shell command.
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python[\d.]*$")
_SHORT_I_FLAG = re.compile(r"^-[a-zA-Z]*i")
_TAR_WRITES = re.compile(r"^-?[a-zA-Z]*[xc]")
_WORD = re.compile(r"[A-Za-z]{3,}")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_SEPARATORS = {"&&", "||", ";", "|", "|&", "&", "(", ")", ";;", "\n"}
_REDIRECT_WRITE = {">", ">>", ">|", "&>", "&>>"}
_REDIRECTS = frozenset(_REDIRECT_WRITE | {"<", "<<", "<<<", ">&"})
_WRAPPERS = {"sudo", "env", "command", "time", "nice", "nohup", "exec", "builtin"}


def _strip_heredocs(command: str) -> str:
    """Remove here-document bodies (their text is data, not commands): the lines after
    a line whose ``<<`` operators name delimiters, up to and including the line that
    is each delimiter (stripped), in turn; to the end when one never comes.

    Goes from one occurrence of a delimiter to the next (a long script is skipped in
    C); tests/memory/test_calls.py compares it with the line-by-line definition."""
    if "<<" not in command:
        return command  # no here-document operator, nothing to remove
    kept: list[str] = []
    position, size = 0, len(command)
    while position <= size:
        operator = command.find("<<", position)
        line_end = command.find("\n", operator) if operator >= 0 else -1
        if line_end < 0:
            kept.append(command[position:])  # the rest holds no body
            break
        kept.append(command[position:line_end])
        line = command[command.rfind("\n", 0, operator) + 1 : line_end]
        position = line_end + 1
        for match in _HEREDOC.finditer(line):
            position = _after_delimiter_line(command, match.group(2), position)
    return "\n".join(kept)


def _after_delimiter_line(command: str, delimiter: str, position: int) -> int:
    """Where the line after the first line from ``position`` (a line start) that is
    ``delimiter`` once stripped begins (past the end when no line is)."""
    at = command.find(delimiter, position)
    while at >= 0:
        start = command.rfind("\n", position, at) + 1 or position
        end = command.find("\n", at)
        end = len(command) if end < 0 else end
        if command[start:end].strip() == delimiter:
            return end + 1
        at = command.find(delimiter, end)
    return len(command) + 1


# One shell token: a word (quoted parts kept together) or an operator. A word is a run
# of plain characters, quoted parts and escapes; plain characters are taken a run at a
# time (the alternative nearly every character needs comes first), so are the plain
# characters of a double-quoted part (between escapes), a lone backslash last
# (tests/memory/test_calls.py checks the one-character-at-a-time definition). Every
# repeat is possessive: nothing follows a word in its branch and the runs' classes
# exclude what ends them, so giving back a character never finds another match; the
# engine then keeps no backtracking state (~10 % faster). The word is unrolled (a plain
# run, then quoted parts or escapes each followed by a plain run; or one of those first)
# so a plain word never enters the loop of alternatives. The whitespace before a token
# is taken by the match (group 1 is the token) instead of failing the whole pattern at
# each whitespace character (~20 % faster); the text must then not end in whitespace,
# or every offset of that run would take the rest of it before failing.
_PLAIN = r"""[^\s'"|&;()<>\\]"""
_PART = r"""(?:'[^']*+'|"[^"\\]*+(?:\\.[^"\\]*+)*+"|\\.|\\)"""
_TOKEN = re.compile(
    rf"\s*+({_PLAIN}++(?:{_PART}{_PLAIN}*+)*+|{_PART}{_PLAIN}*+(?:{_PART}{_PLAIN}*+)*+"
    r"|&&|\|\||;;|\|&|&>>|&>|>>|>\||>&|<<<|<<-?|[|&;()<>]|['\"])"
)
_QUOTED = re.compile(r"'([^']*)'|\"((?:\\.|[^\"\\])*)\"")


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word:
        return word
    # One quoted part and nothing else (most quoted words): ``_QUOTED`` would match
    # the whole word; a double-quoted one without backslashes keeps all it holds.
    quote = word[0]
    if word[-1] == quote and len(word) > 1 and word.count(quote) == 2:
        if quote == "'" or (quote == '"' and "\\" not in word):
            return word[1:-1]
    return _QUOTED.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), word)


@lru_cache(maxsize=1024)
def _tokens(command: str) -> tuple[str, ...]:
    """Shell-like tokens of a command line: quotes removed from words, operators
    split out, here-document bodies dropped, newlines as ``;``. Tolerant: an
    unbalanced quote never raises (the stray quote becomes its own token)."""
    text = _strip_heredocs(command)
    if "\n" in text:  # both replacements need a line break
        text = text.replace("\\\n", " ").replace("\n", " ; ")
    stripped = text.rstrip()  # rstrip strips exactly ``\s`` (tested)
    if stripped.endswith("\\") and len(stripped) < len(text):
        stripped = text[: len(stripped) + 1]  # ``\ `` at the end: an escaped character
    tokens = _TOKEN.findall(stripped)
    if "'" not in text and '"' not in text:
        return tuple(tokens)  # no quotes: no word to unquote
    return tuple(_unquote(t) if "'" in t or '"' in t else t for t in tokens)


def split_simple_commands(command: str) -> list[list[str]]:
    """Split a shell command line into simple commands (lists of words), separated by
    ``&& || ; | & ( )`` and newlines. Here-document bodies are ignored; redirection
    operators stay in the word list."""
    commands: list[list[str]] = []
    current: list[str] = []
    for token in _tokens(command):
        if token in _SEPARATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    return commands


def _program(words: list[str]) -> tuple[str, list[str]]:
    """The program name (basename) and its arguments, skipping env assignments and
    wrappers such as ``sudo`` or ``timeout 30``."""
    i = 0
    while i < len(words):
        word = words[i]
        if "=" in word and _ENV_ASSIGNMENT.match(word):  # an assignment holds "="
            i += 1
            continue
        base = word[word.rfind("/") + 1 :]  # after the last "/", or the whole word
        if base in _WRAPPERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            continue
        if base == "timeout":
            i += 1
            while i < len(words) and (words[i].startswith("-") or words[i][:1].isdigit()):
                i += 1
            continue
        return base, words[i + 1 :]
    return "", []


def _module_program(program: str, args: list[str]) -> tuple[str, list[str]]:
    """``python -m pylint x`` → (``pylint``, [x]); other programs unchanged."""
    if len(args) >= 2 and args[0] == "-m" and _PYTHON.match(program):
        return args[1], args[2:]
    return program, args


def last_simple_command(command: str) -> tuple[str, list[str]]:
    """The program and arguments of the command whose exit code the whole line
    returns (the last simple command; a pipeline returns its last stage)."""
    commands = split_simple_commands(command)
    if not commands:
        return "", []
    program, args = _program(commands[-1])
    return _module_program(program, args)


# -- §12.2 exit-code semantics ---------------------------------------------------------

ExitMeaning = Literal["ok", "informative", "error"]


@dataclass(frozen=True)
class ExitVerdict:
    """What a shell exit code means: ``ok`` (0), ``informative`` (a documented
    non-zero answer, not a failure) or ``error``; ``note`` names the rule."""

    meaning: ExitMeaning
    note: str = ""


_GREP_FAMILY = {"grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack"}
# pylint's exit status is a bitmask: 1 fatal, 2 error, 4 warning, 8 refactor,
# 16 convention, 32 usage error (pylint docs, "Exit codes"). Only 1 and 32 mean
# pylint itself failed; the other bits mean "messages were emitted".
_PYLINT_MESSAGE_BITS = 2 | 4 | 8 | 16

EXIT_CODE_TABLE: tuple[tuple[str, str, str], ...] = (
    ("grep, egrep, fgrep, zgrep, rg, ag, ack, git grep", "1", "no match"),
    ("diff, cmp, git diff --exit-code/--quiet/--no-index", "1", "inputs differ"),
    ("test, [, [[", "1", "condition is false"),
    ("pylint (also python -m pylint)", "any of 2|4|8|16, without 1 or 32", "messages emitted"),
)
"""The documented table (§12.2): (commands, exit codes, meaning). Rendered in docs."""


def classify_exit(command: str, exit_code: int | None) -> ExitVerdict:
    """Meaning of ``exit_code`` for the shell ``command`` (MEMORY_SPEC §12.2).

    0 is ``ok``; the table in ``EXIT_CODE_TABLE`` marks informative answers; any
    other non-zero (and ``None``, an unknown or timed-out exit) is ``error``. Only
    the last simple command decides, since it sets the line's exit status. The
    verdict (frozen) is memoised per (command, exit code) with the code's type."""
    try:
        return _classify_exit_memo(command, exit_code)
    except TypeError:  # an unhashable exit code: never memoised
        return _classify_exit(command, exit_code)


def _classify_exit(command: str, exit_code: int | None) -> ExitVerdict:
    if exit_code == 0:
        return ExitVerdict("ok")
    if exit_code is None:
        return ExitVerdict("error", "no exit code")
    program, args = last_simple_command(command)
    if exit_code == 1:
        if program in _GREP_FAMILY:
            return ExitVerdict("informative", f"{program} exit 1: no match")
        if program == "git" and args[:1] == ["grep"]:
            return ExitVerdict("informative", "git grep exit 1: no match")
        if program in {"diff", "cmp"}:
            return ExitVerdict("informative", f"{program} exit 1: inputs differ")
        if (
            program == "git"
            and args[:1] == ["diff"]
            and {"--exit-code", "--quiet", "--no-index"} & set(args)
        ):
            return ExitVerdict("informative", "git diff exit 1: inputs differ")
        if program in {"test", "[", "[["}:
            return ExitVerdict("informative", f"{program} exit 1: condition is false")
    if program in {"pylint", "pylint3"} and 0 < exit_code < 64:
        if exit_code & ~_PYLINT_MESSAGE_BITS == 0:
            return ExitVerdict("informative", f"pylint exit {exit_code}: messages emitted")
    return ExitVerdict("error", f"exit code {exit_code}")


_classify_exit_memo = lru_cache(maxsize=MEMO_ENTRIES, typed=True)(_classify_exit)
_MEMOISED.append(_classify_exit_memo)


# -- §12.1 state-changing calls -----------------------------------------------------------

_EDIT_TOOL_NAMES = {
    "write",
    "write_file",
    "write_text",
    "create_file",
    "edit",
    "edit_file",
    "multi_edit",
    "multiedit",
    "apply_patch",
    "patch",
    "delete_file",
    "move_file",
    "rename_file",
    "notebook_edit",
}
_EDITOR_TOOL_NAMES = {"str_replace_editor", "str_replace_based_edit_tool", "editor"}
_EDITOR_WRITE_COMMANDS = {"create", "str_replace", "insert", "undo_edit", "write", "edit"}
_SHELL_TOOL_NAMES = {"bash", "shell", "run_command", "execute_bash", "terminal", "sh", "run"}

_FILE_PROGRAMS = {
    "tee",
    "patch",
    "mv",
    "cp",
    "rm",
    "rmdir",
    "mkdir",
    "touch",
    "ln",
    "chmod",
    "chown",
    "truncate",
    "dd",
    "install",
    "unzip",
    "rsync",
    "make",
    "cmake",
    "ninja",
}
_GIT_CHANGES = {
    "apply",
    "checkout",
    "reset",
    "restore",
    "stash",
    "merge",
    "rebase",
    "cherry-pick",
    "pull",
    "switch",
    "clean",
    "am",
    "revert",
    "mv",
    "rm",
}
_PACKAGE_MANAGERS = {
    "pip": {"install", "uninstall"},
    "pip3": {"install", "uninstall"},
    "uv": {"pip", "add", "remove", "sync"},
    "npm": {"install", "i", "ci", "add", "uninstall", "remove"},
    "pnpm": {"install", "i", "add", "remove"},
    "yarn": {"install", "add", "remove"},
    "apt": {"install", "remove", "purge"},
    "apt-get": {"install", "remove", "purge"},
    "conda": {"install", "remove", "create", "update"},
    "mamba": {"install", "remove", "create", "update"},
    "poetry": {"add", "install", "remove", "update"},
    "cargo": {"add", "install", "remove", "update"},
    "go": {"get", "install"},
    "gem": {"install", "uninstall"},
    "brew": {"install", "uninstall"},
}
# A script whose name says it edits something (``python apply_fix.py``).
_EDITING_SCRIPT = re.compile(
    r"(?:fix|patch|apply|edit|modify|update|replace|rewrite|refactor|migrate|insert|write)",
    re.IGNORECASE,
)
# The same words matched case-sensitively on a lowercased ASCII name: ``IGNORECASE``
# folds case at every offset (~5 µs on an 18-char script name, ~6x this).
_EDITING_WORDS = re.compile(_EDITING_SCRIPT.pattern)
_PY_WRITES = re.compile(
    r"\.write\(|write_text\(|write_bytes\(|open\([^)]*['\"][wax]b?\+?['\"]|"
    r"os\.(?:remove|rename|unlink)|shutil\."
)
_NULL_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}
# A Python interpreter reading its script from a here-document.
_PY_HEREDOC_SOURCE = r"\bpython[\d.]*(?:\s+-[\w-]*)*\s+(?:-\s*)?<<-?\s*['\"]?\w"
# The same pattern led by its literal (``\b`` checked behind it), so the engine skips
# to each "python" in C instead of trying every offset of a long script.
_PY_HEREDOC = re.compile(r"python(?<=\bpython)" + _PY_HEREDOC_SOURCE.removeprefix(r"\bpython"))


def _editing_script_name(name: str) -> bool:
    """``_EDITING_SCRIPT.search(name)``: an ASCII name lowercased and searched
    case-sensitively (for ASCII text that is what case-insensitive matching means;
    tests/memory/test_calls.py checks it), any other name by the regex itself."""
    if name.isascii():
        return _EDITING_WORDS.search(name.lower()) is not None
    return _EDITING_SCRIPT.search(name) is not None


def _writes_by_redirection(words: list[str]) -> bool:
    """A redirection writes a file (not ``/dev/null``, not a descriptor ``&N``)."""
    for i, word in enumerate(words):
        target = None
        if word in _REDIRECT_WRITE and i + 1 < len(words):
            target = words[i + 1]
        elif word in _REDIRECT_WRITE:
            return True
        if target is not None and target not in _NULL_TARGETS and not target.startswith("&"):
            return True
    return False


def _simple_command_changes(words: list[str]) -> bool:
    if not _REDIRECTS.isdisjoint(words):
        if _writes_by_redirection(words):
            return True
        clean = [w for w in words if w not in _REDIRECTS]
    else:
        clean = words
    program, args = _program(clean)
    program, args = _module_program(program, args)
    if not program:
        return False
    if program == "sed" or program == "gsed":
        return any(
            a == "--in-place" or a.startswith("--in-place=") or _SHORT_I_FLAG.match(a) for a in args
        )
    if program == "perl":
        return any(_SHORT_I_FLAG.match(a) for a in args)
    if program in _FILE_PROGRAMS:
        return not (program == "tee" and all(a in _NULL_TARGETS for a in args))
    if program == "tar":
        return any(_TAR_WRITES.match(a) for a in args[:1]) or "--extract" in args
    if program == "git":
        sub = next((a for a in args if not a.startswith("-")), "")
        return sub in _GIT_CHANGES
    if program in _PACKAGE_MANAGERS:
        sub = next((a for a in args if not a.startswith("-")), "")
        return sub in _PACKAGE_MANAGERS[program]
    if program.startswith("python") and _PYTHON.match(program):
        if args[:1] == ["-c"] and len(args) > 1:
            return bool(_PY_WRITES.search(args[1]))
        script = next((a for a in args if not a.startswith("-")), "")
        if script.endswith("setup.py"):
            return any(a in {"install", "develop", "build", "build_ext"} for a in args)
        if script.endswith(".py"):
            return _editing_script_name(script.rsplit("/", 1)[-1])
    return False


def shell_changes_files(command: str) -> bool:
    """True when a shell command line (probably) modifies the workspace (§12.1):
    in-place edits (``sed -i``, ``perl -i``), redirections into files (not
    ``/dev/null``), ``tee``, ``patch``, file utilities (``mv cp rm mkdir touch``…),
    builds (``make``), ``git apply/checkout/reset/restore/stash/…``, package installs
    (``pip install``, ``npm install``…), and Python scripts that write files
    (``python -c`` with a write, a script named like ``apply_fix.py``, or a script
    fed on stdin by a here-document that writes, ``python - <<'EOF' … open(p, 'w')``)."""
    # The substring tests are what the regex needs anyway; they spare its scan.
    if (
        "<<" in command
        and "python" in command
        and _PY_HEREDOC.search(command)
        and _PY_WRITES.search(command)
    ):
        return True
    return _may_change_files(command) and any(_changes_of(command))


@lru_cache(maxsize=1024)
def _simple_commands(command: str) -> tuple[list[str], ...]:
    """``split_simple_commands(command)``, split once for §12.1, §13.1 (revert),
    §13.5 (written files) and §13.2 (programs). Shared: never mutate the lists."""
    return tuple(split_simple_commands(command))


@lru_cache(maxsize=1024)
def _changes_of(command: str) -> tuple[bool, ...]:
    """``_simple_command_changes`` of each of ``split_simple_commands(command)``, in
    order (§12.1 asks for every call, §13.1/§13.5 again for a state-changing one)."""
    return tuple(_simple_command_changes(words) for words in _simple_commands(command))


# What ``_may_change_files`` looks for: the programs (and ``python -m`` modules) a rule
# of ``_simple_command_changes`` reacts to, and what else each needs, as ASCII bytes.
_ALWAYS_CHANGES = frozenset(name.encode() for name in (*_FILE_PROGRAMS, "tar"))
_IN_PLACE_EDITORS = frozenset({b"sed", b"gsed", b"perl"})
_GIT_CHANGES_BYTES = frozenset(sub.encode() for sub in _GIT_CHANGES)
_PACKAGE_CHANGES_BYTES = {
    manager.encode(): frozenset(sub.encode() for sub in subs)
    for manager, subs in _PACKAGE_MANAGERS.items()
}
_RULE_PROGRAMS = _ALWAYS_CHANGES | _IN_PLACE_EDITORS | {b"git"} | set(_PACKAGE_CHANGES_BYTES)
# Where a word of a command line ends besides ASCII whitespace: the operator characters
# (">" never gets here) and "/" (a program's name is its basename); \x1c-\x1f are
# ``\s`` but not ``bytes.split`` whitespace.
_WORD_BREAKS = bytes.maketrans(b"|&;()</\x1c\x1d\x1e\x1f", b" " * 11)
_IN_PLACE_FLAG = re.compile(r"-[a-zA-Z]*i")
# Quotes of both kinds, each part closed: the tokeniser (no backslash) pairs them the same.
_PAIRED_QUOTES = re.compile(r"""(?:[^'"]++|'[^']*+'|"[^"]*+")*+""")


def _may_change_files(command: str) -> bool:
    """False only when ``any(_changes_of(command))`` is False, decided without the
    tokeniser for most read-only command lines (§12.1, first sightings).

    Exact because: a write redirection is a word holding ">"; every other rule needs
    a word (the program's basename, a ``python -m`` module, a git or package-manager
    subcommand) equal to one of a few names. With no backslash, no here-document, ASCII
    only and every quoted part closed (a quote inside the other kind is text), no quote
    is left alone, so such a word is its token's text without the quote characters,
    bounded by whitespace or an operator: it is among ``text``'s words split at
    whitespace, operators and "/". ``python -c``'s code is searched for a write in
    ``text`` only when it cannot hold quotes (one kind, all removed). Any other line
    takes the tokeniser. tests/memory/test_calls.py checks it against the
    definition on generated and recorded command lines."""
    if ">" in command or "\\" in command or "<<" in command or not command.isascii():
        return True
    mixed = False
    if "'" in command:
        if '"' in command:
            if not _PAIRED_QUOTES.fullmatch(command):
                return True
            mixed, text = True, command.replace("'", "").replace('"', "")
        elif command.count("'") % 2:
            return True
        else:
            text = command.replace("'", "")
    elif '"' in command:
        if command.count('"') % 2:
            return True
        text = command.replace('"', "")
    else:
        text = command
    if "python" in text and (
        ("-c" in text and (mixed or _PY_WRITES.search(text) is not None))
        or "setup.py" in text
        or (".py" in text and _editing_script_name(text))
    ):
        return True  # python -c that may write, setup.py, a script named like an edit
    words = text.encode().translate(_WORD_BREAKS).split()
    for name in _RULE_PROGRAMS.intersection(words):
        if name in _ALWAYS_CHANGES:
            return True
        if name in _IN_PLACE_EDITORS:
            if _IN_PLACE_FLAG.search(text):
                return True
        elif name == b"git":
            if not _GIT_CHANGES_BYTES.isdisjoint(words):
                return True
        elif not _PACKAGE_CHANGES_BYTES[name].isdisjoint(words):
            return True
    return False


def shell_command_of(tool_name: str, args: Any) -> str | None:
    """The shell command text of a shell tool call, or None for other tools."""
    if type(args) is not dict and not isinstance(args, Mapping):  # the ABC check is slow
        return None
    name = tool_name.strip().lower()
    command = args.get("command") or args.get("cmd") or args.get("keystrokes")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = " ".join(shlex.quote(c) for c in command)
    if not isinstance(command, str):
        return None
    if name in _SHELL_TOOL_NAMES or "bash" in name or "shell" in name or "command" in name:
        return command
    return None


def is_state_changing(tool_name: str, args: Any, kind: str | None = None) -> bool:
    """True when a tool call changes the workspace (§12.1): an edit/delete/move tool
    (by ``kind`` or by name), an editor tool's write command, or a shell command
    that ``shell_changes_files``."""
    if kind in {"edit", "delete", "move"}:
        return True
    name = tool_name.strip().lower()
    if name in _EDIT_TOOL_NAMES:
        return True
    if name in _EDITOR_TOOL_NAMES and isinstance(args, Mapping):
        return str(args.get("command", "")) in _EDITOR_WRITE_COMMANDS
    command = shell_command_of(tool_name, args)
    if command is not None:
        return shell_changes_files(command)
    return False


# -- §13 rules tier v2: failure lines, reverts, changed files, environment --------------

# ``\b\d{6,}\b``, led by a digit with the ``\b`` checked behind it: the engine skips
# to digits instead of trying every offset (same matches, ~2x faster on a line).
_LONG_NUMBER = re.compile(r"\d(?<=\b\d)\d{5,}\b")
# Measured values (4+ decimals) vary between identical runs of stochastic code:
# ``\b\d+\.\d{4,}\b``, led by its first digit the same way.
_MEASURED = re.compile(r"\d(?<=\b\d)\d*\.\d{4,}\b")
# §13.1: a failure is named by its closing problem lines (runners summarise there).
FAILURE_LINES = 3


def failure_lines(output: str | None, *, exit_code: int | None = None) -> tuple[str, ...]:
    """The normalised failure lines of a failed result (§13.1): the last three lines
    naming a problem (the §4 problem words, or an exception line) — where tools and
    test runners summarise what failed — masked like ``error_signature`` plus long
    numbers (ids, object hashes) and measured values (4+ decimals); when no line
    names a problem, the last three non-blank lines, masked the same way. Empty output
    gives ``("<empty output, exit N>",)``."""
    lines = _failure_lines(output or "")
    return lines if lines else (f"<empty output, exit {exit_code}>",)


@_memo_text
def _failure_lines(text: str) -> tuple[str, ...]:
    """``failure_lines`` of a text; ``()`` when no line is left."""
    if len(text) > SIGNATURE_HEAD_CHARS + SIGNATURE_TAIL_CHARS:
        text = text[:SIGNATURE_HEAD_CHARS] + "\n" + text[-SIGNATURE_TAIL_CHARS:]
    # From the end: the last three problem lines are found without testing every line.
    chosen: list[str] = []
    last_lines: list[str] = []
    ascii_text = text.isascii()
    for raw in reversed(text.splitlines()):
        line = raw.strip()
        if not line or line.startswith(("> ", ">>> ")):
            continue
        if line[0] in _BANNER_FIRST and _BANNER.match(line):
            continue
        if len(last_lines) < FAILURE_LINES:
            last_lines.append(line)
        problem = _PROBLEM_LOWER.search(line.lower()) if ascii_text else _PROBLEM_LINE.search(line)
        if problem or (line[0] in _EXCEPTION_FIRST and _EXCEPTION_LINE.match(line)):
            chosen.append(line)
            if len(chosen) == FAILURE_LINES:
                break
    if not last_lines:
        return ()
    chosen = (chosen or last_lines)[::-1]
    return tuple(_MEASURED.sub("<x>", _LONG_NUMBER.sub("<n>", _mask_volatile(ln))) for ln in chosen)


_REVERT_GIT = {"checkout", "restore", "stash", "reset"}


def is_revert(tool_name: str, args: Any) -> bool:
    """True when every state-changing part of a shell command is a git revert
    (``git checkout|restore|stash|reset``): §13.1 does not count it as an edit."""
    command = shell_command_of(tool_name, args)
    if command is None:
        return False
    commands = _simple_commands(command)
    changing = [w for w, changes in zip(commands, _changes_of(command), strict=True) if changes]
    if not changing:
        return False
    for words in changing:
        program, rest = _program(words)
        sub = next((a for a in rest if not a.startswith("-")), "")
        if program != "git" or sub not in _REVERT_GIT:
            return False
    return True


_PATHISH = re.compile(r"^[\w.~/+-]*[\w-]\.[A-Za-z0-9]{1,8}$|^[\w.~+-]*/[\w./+-]+$")
_PATH_ARG_KEYS = ("path", "file_path", "filename", "target_file")


def _shell_changed_paths(words: list[str], changes: bool) -> list[str]:
    """The files one simple command writes; ``changes`` is its
    ``_simple_command_changes``."""
    found: list[str] = []
    for i, word in enumerate(words[:-1]):
        if word in _REDIRECT_WRITE:
            found.append(words[i + 1])
    clean = [w for w in words if w not in _REDIRECT_WRITE and w not in {"<", "<<", "<<<", ">&"}]
    program, args = _program(clean)
    operands = [a for a in args if not a.startswith("-")]
    if program in {"sed", "gsed", "perl"} and changes:
        found += [a for a in operands[1:] if _PATHISH.match(a)]
    elif program in {"tee", "touch", "truncate"}:
        found += operands
    elif program in {"cp", "mv", "install"} and len(operands) >= 2:
        found.append(operands[-1])
    elif program == "patch":
        found += [a for a in operands if _PATHISH.match(a)]
    return found


def changed_paths(tool_name: str, args: Any, kind: str | None = None) -> tuple[str, ...]:
    """Files a state-changing call writes, as named in the call (§13.5 status):
    the path argument of an edit tool, or the targets of a shell line's
    redirections, ``sed -i``/``perl -i``, ``tee``, ``touch``, ``cp``/``mv``
    destinations. ``/dev/*`` is never a file. Best effort; never raises."""
    found: list[str] = []
    command = shell_command_of(tool_name, args)
    if command is not None:
        commands = _simple_commands(command)
        for words, changes in zip(commands, _changes_of(command), strict=True):
            found += _shell_changed_paths(words, changes)
    elif isinstance(args, Mapping) and is_state_changing(tool_name, args, kind):
        for key in _PATH_ARG_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                found.append(value.strip())
    return tuple(
        dict.fromkeys(p for p in found if p and not p.startswith("/dev/") and "\0" not in p)
    )


def typed_command(tool_name: str, args: Any, limit: int = 80) -> str:
    """The call as a user would type it (§13.7): the shell command line itself
    (first line, whitespace collapsed), else ``<tool> <path>`` or the tool name;
    cut to ``limit`` chars with ``…``."""
    command = shell_command_of(tool_name, args)
    if command is None:
        path = next(
            (args.get(k) for k in _PATH_ARG_KEYS if isinstance(args, Mapping) and args.get(k)),
            None,
        )
        command = f"{tool_name} {path}" if isinstance(path, str) else tool_name
    lines = (ln for ln in command.strip().splitlines() if ln.strip())
    first = next(lines, None)  # only the first non-blank line and whether one follows
    text = collapse(command if first is None else first)
    if next(lines, None) is not None:
        text += " …"
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# §13.2 environment-shaped signatures. Each pattern's first group names the thing
# (program, host, package) so that the signature is specific.
_ENV_LINE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("command not found", re.compile(r"(?:^|: )([\w.+-]+): (?:command )?not found$")),
    ("permission denied", re.compile(r"(Permission denied|Operation not permitted)")),
    (
        "network",
        re.compile(
            r"(Could not resolve host|Temporary failure in name resolution|"
            r"Name or service not known|Connection refused|Connection reset|Network is unreachable|"
            r"No route to host|certificate verify failed|SSL certificate problem|"
            r"TLS handshake|Could not connect to|Failed to connect to|"
            r"(?-i:\bE(?:CONNREFUSED|CONNRESET|NOTFOUND|AI_AGAIN)\b))",
            re.IGNORECASE,
        ),
    ),
    (
        "daemon",
        re.compile(
            r"(Cannot connect to the Docker daemon|Is the docker daemon running|"
            r"System has not been booted with systemd|Failed to connect to bus|"
            r"could not connect to server)",
            re.IGNORECASE,
        ),
    ),
    ("disk full", re.compile(r"(No space left on device|Disk quota exceeded)")),
    (
        "missing toolchain",
        re.compile(
            r"(No working C compiler|C compiler cannot create executables|"
            r"Unable to locate package [\w.+-]+|No matching distribution found for [\w.+-]+|"
            r"Could not find a version that satisfies the requirement [\w.+-]+)",
            re.IGNORECASE,
        ),
    ),
)
# A line a program writes about its own failure: it starts with a "name:" prefix
# chain (bash: x:, curl: (6), git@host:, fatal:, E:), with the phrase, or is a
# traceback's final exception line. Report lines about *data* ("(line 1) broken
# https://… NameResolutionError") start otherwise and never count.
_OWN_LINE = re.compile(
    r"^(?:[\w@.+/\-\[\]]+:\s*(?:\(\d+\)\s*)?)+|^[A-Z][a-z]+ |^[A-Z]: |^[\w.-]+ ERR!"
)
_MISSING_MODULE = re.compile(r"No module named '?([\w.]+)'?")
# Any phrase one of the checks below could match (a cheap first pass), lowercased; the
# Node errno names (ECONNREFUSED, ENOTFOUND, EAI_AGAIN) are matched case-sensitively.
_ENV_PHRASES = (
    "not found",
    "permission denied",
    "operation not permitted",
    "no module named",
    "no such file or directory",
    "resolve",
    "name or service",
    "connection",
    "unreachable",
    "no route",
    "certificate",
    "ssl",
    "tls",
    "daemon",
    "systemd",
    "bus",
    "no space",
    "quota",
    "compiler",
    "locate package",
    "distribution",
    "satisfies",
)
_ENV_ERRNO = re.compile(r"\bE(?:CONN|NOTFOUND|AI_AGAIN)")
_ENV_ERRNO_NAMES = ("ECONN", "ENOTFOUND", "EAI_AGAIN")
_ENV_ANY = re.compile(
    "|".join(map(re.escape, _ENV_PHRASES)) + "|(?-i:" + _ENV_ERRNO.pattern + ")", re.IGNORECASE
)


def _programs(command: str) -> set[str]:
    programs: set[str] = set()
    for words in _simple_commands(command):
        program, args = _program(words)
        if program:
            programs.add(program)
            module, _rest = _module_program(program, args)
            programs.add(module)
    return programs


# Non-ASCII characters an IGNORECASE regex matches to an ASCII letter (sre's case
# folding; every code point is checked in tests/memory/test_calls.py).
_FOLDS_TO_ASCII = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


@lru_cache(maxsize=4096)
def _ascii_stand_in(char: str) -> str:
    """The ASCII character that stands for ``char`` in ``ascii_fold``."""
    if char in _FOLDS_TO_ASCII:
        return _FOLDS_TO_ASCII[char]
    return "0" if char.isalnum() else "\x00"  # a word character stays one (\b, \w)


def ascii_fold(text: str) -> str:
    """``text`` with each non-ASCII character replaced by one ASCII character (same
    length, same offsets): the four that fold to an ASCII letter under IGNORECASE
    become that letter, other word characters ``0``, the rest NUL. A pattern of ASCII
    letters, digits-free words and spaces (``\\b`` allowed) matches the lowercased
    result case-sensitively exactly where it matches ``text`` with IGNORECASE."""
    if text.isascii():
        return text
    # The encoder copies the ASCII runs in C and asks ``_fold_error`` for each run of
    # other characters (~3x faster than a regex substitution on a long log).
    return text.encode("ascii", _FOLD_ERRORS).decode("ascii")


_FOLD_ERRORS = "clio-acp-ascii-fold"


def _fold_error(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler of ``ascii_fold``: the stand-ins of the characters the
    ASCII encoder could not take."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    run = error.object[error.start : error.end]
    return "".join(map(_ascii_stand_in, run)), error.end


codecs.register_error(_FOLD_ERRORS, _fold_error)


def _env_candidate_lines(text: str) -> list[str]:
    """``_env_phrase_lines`` as a list."""
    return list(_env_phrase_lines(text))


@_memo_text
def _env_phrase_lines(text: str) -> tuple[str, ...]:
    """The stripped lines holding a phrase ``environment_signature`` looks for, in
    order: the lines one ``_ENV_ANY`` pass (IGNORECASE) would hit, found with
    ``str.find`` on the lowercased text, where ``str.lower`` is exactly the regex's
    case folding and keeps offsets (other text is ``ascii_fold``-ed first: ``ſ``,
    ``K``). ~8× cheaper than the regex on ASCII text, ~10× on other text."""
    starts = _ascii_phrase_line_starts(text if text.isascii() else ascii_fold(text))
    lines = []
    for start in sorted(starts):
        end = text.find("\n", start)
        lines.append(text[start : end if end >= 0 else len(text)].strip())
    return tuple(lines)  # memoised: immutable


def _ascii_phrase_line_starts(text: str) -> set[int]:
    """Start offsets of the lines of ``text`` (ASCII) holding an ``_ENV_PHRASES``
    phrase (any case) or a Node errno name."""
    lowered = text.lower()
    starts: set[int] = set()
    for phrase in _ENV_PHRASES:
        at = lowered.find(phrase)
        while at >= 0:
            starts.add(lowered.rfind("\n", 0, at) + 1)
            line_end = lowered.find("\n", at)
            if line_end < 0:
                break
            at = lowered.find(phrase, line_end)
    for name in _ENV_ERRNO_NAMES:  # ``_ENV_ERRNO`` by str.find (its leading \b kept)
        at = text.find(name)
        while at >= 0:
            if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
                starts.add(text.rfind("\n", 0, at) + 1)
            at = text.find(name, at + 1)
    return starts


def _missing_program(name: str, command: str | None, programs: set[str]) -> bool:
    """A "command not found" names a missing program when the command runs it, or
    when the command does not mention it at all (a script it ran calls it). A name
    that the command mentions only as text (backticks in an unquoted heredoc) is a
    quoting mistake, not a missing program."""
    if not command or name in programs:
        return True
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", command) is None


def environment_signature(
    command: str | None, output: str | None, *, exit_code: int | None = None
) -> str | None:
    """The environment-shaped signature of a failure (§13.2), or None when the
    failure does not name the environment: a program that is not installed, the
    executable itself missing, permission denied / operation not permitted,
    network failures to a host, a daemon not running, disk full, a missing
    compiler or package, or a missing interpreter module *for the tool being run*
    (``python -m pytest`` → No module named pytest). Only lines a program writes
    about its own failure count (see ``_OWN_LINE``); ``cd: x: No such file`` and
    failures of a script's own imports do not. Masked like ``problem_signature``."""
    text = output or ""
    if len(text) > SIGNATURE_HEAD_CHARS + SIGNATURE_TAIL_CHARS:
        text = text[:SIGNATURE_HEAD_CHARS] + "\n" + text[-SIGNATURE_TAIL_CHARS:]
    candidates = _env_phrase_lines(text)
    if not candidates:
        return None  # one pass over the text settles most failures
    programs = _programs(command) if command else set()
    for line in candidates:
        if not line or len(line) > 400:
            continue
        own = bool(_OWN_LINE.match(line)) or bool(_EXCEPTION_LINE.match(line))
        if not own:
            continue
        module = _MISSING_MODULE.search(line)
        if module and module.group(1).split(".")[0] in programs:
            return f"missing module: {_mask_volatile(line)[:200]}"
        if "No such file or directory" in line and programs:
            head = line.split(":", 2)
            named = head[1].strip() if len(head) > 2 and head[0] in {"bash", "sh", "zsh"} else ""
            if named and named.rsplit("/", 1)[-1] in programs and named != "cd":
                return f"executable missing: {_mask_volatile(line)[:200]}"
        for kind, pattern in _ENV_LINE_PATTERNS:
            match = pattern.search(line)
            if match is None:
                continue
            if kind == "command not found" and not _missing_program(
                match.group(1), command, programs
            ):
                continue
            return f"{kind}: {_mask_volatile(line)[:200]}"
    return None


def dead_channel_signature(output: str | None, exit_code: int | None) -> str | None:
    """§13.2 dead tool channel: a failure with empty output is this signature
    (``empty output, exit N``); three different commands sharing it are an
    environment fault."""
    if (output or "").strip():
        return None
    return f"dead channel: empty output, exit {exit_code}"
