"""Call identity, digests, exit-code semantics and the state-changing classifier
(MEMORY_SPEC §4 "Tool observation", "Result digest"; §12.1, §12.2)."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

import pytest

from clio_acp.memory.calls import (
    DIGEST_MAX_BYTES,
    call_description,
    canonical_call,
    cap_digest,
    classify_exit,
    error_digest,
    error_signature,
    is_state_changing,
    looks_environmental,
    ok_digest,
    operation_fingerprint,
    problem_signature,
    shell_changes_files,
)


def test_canonical_call_sorts_keys_and_has_no_separator():
    assert canonical_call(" bash ", {"b": [1, None], "a": "é"}) == 'bash{"a":"é","b":[1,null]}'


def test_canonical_call_of_dates_and_nesting_is_stable():
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    one = canonical_call("t", {"z": {"y": 1, "x": 2}, "when": when})
    two = canonical_call("t", {"when": when, "z": {"x": 2, "y": 1}})
    assert one == two


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), object(), {1: "int key"}])
def test_unrepresentable_arguments_make_the_args_part_a_marker(bad):
    assert canonical_call("t", {"x": bad}) == "t<unrepresentable>"


def test_cyclic_arguments_are_unrepresentable():
    cyclic: dict = {}
    cyclic["self"] = cyclic
    assert canonical_call("t", cyclic) == "t<unrepresentable>"


def test_fingerprint_is_sha256_prefix_of_the_canonical_string():
    canonical = canonical_call("bash", {"command": "ls"})
    assert operation_fingerprint(canonical) == hashlib.sha256(canonical.encode()).hexdigest()[:16]


def test_call_description_collapses_whitespace_and_caps_at_180_chars():
    assert call_description('bash{"command":"a  \\n b"}') == 'bash{"command":"a \\n b"}'
    long = call_description("x" * 500)
    assert len(long) == 180 and long.endswith("…")


def test_error_digest_takes_the_first_line_naming_a_problem():
    text = "Loading plugins\nrunning 3 checks\nerror: cannot open foo.c\nmore"
    assert error_digest(text) == "error: cannot open foo.c"
    assert error_digest("just output\nsecond") == "just output"
    assert error_digest("") == "an unknown tool error"
    assert error_digest("", exit_code=3) == "exit code 3 with no output"


def test_error_digest_of_a_traceback_is_its_exception_line():
    text = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "    raise_error_helper()\n"
        "KeyError: 'missing'\n"
    )
    assert error_digest(text) == "KeyError: 'missing'"


def test_error_digest_joins_a_heading_line_with_its_detail():
    assert error_digest("Sphinx version error:\nneeds 0.6, loaded 0.10") == (
        "Sphinx version error: needs 0.6, loaded 0.10"
    )


def test_digest_is_redacted_and_capped_without_splitting_a_character():
    assert "[redacted:" in cap_digest("failed with API_KEY=super-secret-value")
    capped = cap_digest("é" * 400)
    assert len(capped.encode()) <= DIGEST_MAX_BYTES and capped.endswith("…")


def test_ok_digest_names_the_output_hash():
    assert ok_digest("") == "ok"
    assert ok_digest("hello") == "ok result " + hashlib.sha256(b"hello").hexdigest()[:16]


def test_error_signature_ignores_addresses_durations_and_clock_times():
    one = "Failed at 0x7f00aa11 after 0.16s (12:01:02)\nValueError: x"
    two = "Failed at 0x7f00bb22 after 0.31s (13:09:09)\nValueError: x"
    assert error_signature(one) == error_signature(two)
    assert error_signature("version 0.10") != error_signature("version 0.11")
    assert error_signature("", exit_code=1) == "empty:1"


def test_problem_signature_is_command_independent_and_environment_shaped():
    sig = problem_signature("bash: curl: command not found")
    assert looks_environmental(sig)
    assert looks_environmental(problem_signature(""))
    assert not looks_environmental(problem_signature("AssertionError: 1 != 2"))


@pytest.mark.parametrize(
    ("command", "code", "meaning"),
    [
        ("grep -rn needle src", 1, "informative"),
        ("grep -rn needle src", 2, "error"),
        ("cd x && rg foo | grep -v bar", 1, "informative"),
        ("git grep foo", 1, "informative"),
        ("diff a b", 1, "informative"),
        ("cmp a b", 1, "informative"),
        ("git diff --exit-code", 1, "informative"),
        ("git diff", 1, "error"),
        ("test -f x", 1, "informative"),
        ("[ -d x ]", 1, "informative"),
        ("pylint pkg", 16, "informative"),
        ("python -m pylint pkg", 2 | 4 | 8, "informative"),
        ("pylint pkg", 1, "error"),
        ("pylint pkg", 32, "error"),
        ("grep x f; echo done", 1, "error"),
        ("python repro.py", 1, "error"),
        ("python repro.py", None, "error"),
        ("python repro.py", 0, "ok"),
    ],
)
def test_exit_code_semantics_table(command, code, meaning):
    assert classify_exit(command, code).meaning == meaning


@pytest.mark.parametrize(
    "command",
    [
        "sed -i 's/a/b/' f.py",
        "sed -i.bak -e s/a/b/ f.py",
        "perl -pi -e 's/a/b/' f",
        "echo x > f.txt",
        "cat <<'EOF' > repro.py\nprint('>')\nEOF",
        "cmd | tee out.log",
        "patch -p1 < fix.diff",
        "git checkout src/a.py",
        "git apply fix.patch",
        "git stash",
        "pip install -e .",
        "python -m pip install requests",
        "npm install",
        "mv a b",
        "rm -rf build",
        "mkdir -p out",
        "touch x",
        "python apply_fix.py",
        "python -c \"open('f','w').write('x')\"",
        "make",
    ],
)
def test_state_changing_shell_commands(command):
    assert shell_changes_files(command)


@pytest.mark.parametrize(
    "command",
    [
        "python repro.py",
        "grep -rn x src",
        "cat f.py",
        "nl -ba f | sed -n '1,20p'",
        "ls 2>&1 | head",
        "echo hi > /dev/null",
        "pytest -q 2>/dev/null",
        "git status",
        "git diff",
        "python -c 'print(1 > 0)'",
        "echo 'unbalanced",
    ],
)
def test_read_only_shell_commands(command):
    assert not shell_changes_files(command)


def test_edit_tools_change_state_by_kind_name_or_editor_command():
    assert is_state_changing("anything", {}, "edit")
    assert is_state_changing("write_file", {"path": "x"})
    assert is_state_changing("str_replace_editor", {"command": "create", "path": "x"})
    assert not is_state_changing("str_replace_editor", {"command": "view", "path": "x"})
    assert is_state_changing("bash_command", {"keystrokes": "sed -i s/a/b/ f\n"})
    assert not is_state_changing("read_file", {"path": "x"})


def test_a_bare_prompt_is_not_a_meaningful_signature():
    from clio_acp.memory.calls import meaningful_signature

    assert not meaningful_signature(problem_signature(">\n"))
    assert meaningful_signature(problem_signature(""))
    assert meaningful_signature(problem_signature("fatal: not a git repository"))


def test_environment_signatures_are_environment_shaped_only():
    from clio_acp.memory.calls import environment_signature

    assert environment_signature("curl -s x", "bash: curl: command not found")
    assert environment_signature("npm install", "npm ERR! code ENOTFOUND")
    assert environment_signature("node app.js", "Error: connect ECONNREFUSED 127.0.0.1:5432")
    assert environment_signature("python3 -m pytest t", "/usr/bin/python3: No module named pytest")
    # Not the environment: a module error of the code itself, a missing folder for
    # cd, an error class whose name merely contains "NotFound", a tool's report line.
    assert environment_signature("pytest x", "ModuleNotFoundError: No module named 'mypkg'") is None
    assert environment_signature("cd out", "bash: cd: out: No such file or directory") is None
    assert environment_signature("python a.py", "FileNotFoundError: [Errno 2] x.txt") is None
    report = "(line 1) broken https://h - NameResolutionError: Failed to resolve 'h'"
    assert environment_signature("sphinx-build -b linkcheck . _b", report) is None


def test_python_fed_a_writing_heredoc_changes_files():
    from clio_acp.memory.calls import shell_changes_files

    edit = "python - <<'EOF'\np='x.py'\ns=open(p).read()\nopen(p,'w').write(s)\nEOF"
    assert shell_changes_files(edit)
    assert shell_changes_files("python -u - << 'PY'\nwith open('f','w') as f: f.write('x')\nPY")
    assert not shell_changes_files("python3 <<EOF\nprint(open('data.txt').read())\nEOF")


# -- the environment scan's ASCII fast path (issue 18) ---------------------------------

from hypothesis import example, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clio_acp.memory import calls as _calls  # noqa: E402

_ENV_WORDS = st.sampled_from(
    [
        "Not Found",
        "permission DENIED",
        "bus",
        "ECONNREFUSED",
        "econnrefused",
        "xENOTFOUND",
        "No module named x",
        "ſsl",
        "\u212aey",
        "ok",
        "\n",
        " ",
        "TLS",
        "quota",
        "İ",
        "é",
        "ñECONNRESET",
        "\u00a0",
    ]
)


def _regex_lines(text: str) -> list[str]:
    """The scan as one ``_ENV_ANY`` regex pass (what the fast path must equal)."""
    lines, last = [], -1
    for match in _calls._ENV_ANY.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if start != last:
            end = text.find("\n", match.end())
            lines.append(text[start : end if end >= 0 else len(text)].strip())
            last = start
    return lines


@given(st.lists(_ENV_WORDS, max_size=30).map("".join))
def test_environment_scan_finds_the_lines_the_regex_finds(text):
    assert _calls._env_candidate_lines(text) == _regex_lines(text)


def test_environment_scan_fast_path_keeps_case_and_errno_rules():
    text = "curl: (6) Could not RESOLVE host\nfine\nError: connect ECONNREFUSED 1.2.3.4\nENOTFOUNDx"
    assert _calls._env_candidate_lines(text) == [
        "curl: (6) Could not RESOLVE host",
        "Error: connect ECONNREFUSED 1.2.3.4",
        "ENOTFOUNDx",
    ]
    assert _calls._env_candidate_lines("econnrefused only") == []


# -- failure lines scanned from the end (issue 18) -------------------------------------

_OUTPUT_LINES = st.sampled_from(
    [
        "",
        "   ",
        "ok 12",
        "FAILED test_x.py::test_a - assert 1 == 2",
        "error: 1234567 went wrong at 0.123456",
        "ValueError: bad",
        "> assert x",
        ">>> error in doctest",
        "===== 2 failed, 1 passed =====",
        "----------",
        "timed out",
        "done",
    ]
)


def _failure_lines_by_definition(output, exit_code):
    """§13.1 as written: every kept line tested, the last three problem lines."""
    from clio_acp.memory.calls import _BANNER, _EXCEPTION_LINE, _PROBLEM_LINE, _mask_volatile

    lines = [line.strip() for line in output.splitlines() if line.strip()]
    lines = [ln for ln in lines if not ln.startswith(("> ", ">>> ")) and not _BANNER.match(ln)]
    if not lines:
        return (f"<empty output, exit {exit_code}>",)
    chosen = [ln for ln in lines if _PROBLEM_LINE.search(ln) or _EXCEPTION_LINE.match(ln)]
    chosen = (chosen or lines)[-3:]
    return tuple(_MEASURED.sub("<x>", _LONG_NUMBER.sub("<n>", _mask_volatile(ln))) for ln in chosen)


_LONG_NUMBER = re.compile(r"\b\d{6,}\b")
_MEASURED = re.compile(r"\b\d+\.\d{4,}\b")
_NUMBER_PIECES = st.sampled_from(
    ["1234567", "123456", "12345", "0.12345", "3.1415", "1.234", "٣٣٣٣٣٣", "१२३४५६", "x", "_", "a1",
     ".", " ", "-", "é", "9", "0", "\n"]
)  # fmt: skip


@given(st.lists(_NUMBER_PIECES, max_size=16).map("".join))
@example("a1234567 1234567 x0.12345 0.12345_ 12.3456")
def test_number_masks_led_by_a_digit_match_their_word_bounded_forms(text):
    from clio_acp.memory.middleware import triggers

    for fast in (_calls._LONG_NUMBER, triggers._LONG_NUMBER):
        assert fast.sub("<n>", text) == _LONG_NUMBER.sub("<n>", text)
    assert _calls._MEASURED.sub("<x>", text) == _MEASURED.sub("<x>", text)


@given(st.lists(_OUTPUT_LINES, max_size=12).map("\n".join))
def test_failure_lines_scanned_from_the_end_match_the_definition(output):
    assert _calls.failure_lines(output, exit_code=2) == _failure_lines_by_definition(output, 2)


# -- fast paths that must equal their definitions (issue 18 part 3) ---------------------

_SCALARS = st.one_of(
    st.text(max_size=8),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _canonical_by_definition(value):
    import json

    try:
        canon = _calls._canon(value, set())
    except _calls._Unrepresentable:
        return None
    return json.dumps(canon, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@given(
    st.one_of(
        st.dictionaries(st.text(max_size=6), _SCALARS, max_size=6),
        st.dictionaries(st.text(max_size=3), st.lists(_SCALARS, max_size=3), max_size=3),
    )
)
def test_canonical_json_of_flat_arguments_equals_the_walked_form(args):
    expected = _canonical_by_definition(args)
    if expected is None:
        with pytest.raises(ValueError):
            _calls.canonical_json(args)
    else:
        assert _calls.canonical_json(args) == expected


_PROBLEM_TEXT_LINES = st.sampled_from(
    [
        "",
        "  ",
        "ok",
        "Some error:",
        "the cause",
        "> error echoed",
        ">>> failed doctest",
        "===== FAILURES =====",
        "Traceback (most recent call last):",
        '  File "x.py", line 3, in <module>',
        "ValueError: boom",
        "pkg.Error: other",
        "   error: indented:",
        "FAILED x::y - assert 0",
        "done\r",
        "a\x0bpermission denied",
        "x\u2028timed out",
        "\u0130ndexError: fa\u0131led",
        "mi\u017f\u017fing \u212aey",
        "é error ß",
    ]
)


def _problem_line_by_definition(text):
    """§4 legacy digest line as written: every kept line listed first."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip()
        and not line.startswith(("> ", ">>> "))
        and not _calls._BANNER.match(line.strip())
    ]
    if not lines:
        return ""
    chosen = None
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        for line in reversed(lines):
            if _calls._EXCEPTION_LINE.match(line):
                chosen = lines.index(line)
                break
    if chosen is None:
        chosen = next((i for i, ln in enumerate(lines) if _calls._PROBLEM_LINE.search(ln)), 0)
    line = lines[chosen]
    if line.endswith(":") and chosen + 1 < len(lines):
        line = f"{line} {lines[chosen + 1]}"
    return line


@given(st.lists(_PROBLEM_TEXT_LINES, max_size=12), st.sampled_from(["\n", "\r\n", "\r"]))
def test_problem_line_found_by_one_regex_pass_matches_the_definition(lines, newline):
    text = newline.join(lines)
    assert _calls._problem_line(text) == _problem_line_by_definition(text)


_VOLATILE_WORDS = st.sampled_from(
    ["0x7f00aa11", "pid 42", "PID=7", "12:30:01", "2026-01-02T03:04:05Z", "3.5 s", "10ms",
     "p", "P", "x", " ", "\n", "1", "٣", "0x", ":"]
)  # fmt: skip


@given(st.lists(_VOLATILE_WORDS, max_size=20).map("".join))
def test_volatile_mask_lookahead_keeps_the_matches(text):
    import re

    plain = re.compile(_calls._VOLATILE.pattern.removeprefix(r"(?=[\dpP])"))

    def mask(m):
        return _calls._MASKS[m.lastgroup or "addr"]

    assert _calls._VOLATILE.sub(mask, text) == plain.sub(mask, text)


_SHELL_PIECES = st.sampled_from(
    ["echo", "'a b'", '"c d"', "x", "|", "&&", "<<EOF", "\nline\nEOF\n", "\\\n", ";", ">", "f"]
)


@given(st.lists(_SHELL_PIECES, max_size=12).map(" ".join))
def test_tokens_shortcuts_match_the_full_tokeniser(command):
    text = command.replace("\\\n", " ").replace("\n", " ; ")
    _calls.clear_caches()
    full = _calls._strip_heredocs(command)
    assert _calls._tokens(command) == tuple(
        _calls._unquote(t)
        for t in _calls._TOKEN.findall(full.replace("\\\n", " ").replace("\n", " ; "))
    )
    if "<<" not in command:
        assert _calls._tokens(command) == tuple(
            _calls._unquote(t) for t in _calls._TOKEN.findall(text)
        )


@given(
    st.text(
        alphabet=st.sampled_from(
            ["a", " ", "\t", "\n", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000", "é", "\x0b"]
        )
    )
)
def test_collapse_equals_the_whitespace_regex(text):
    assert _calls.collapse(text) == _calls._WS.sub(" ", text).strip()


def test_collapse_agrees_with_the_regex_on_every_code_point():
    every = "".join(map(chr, range(0x3000 + 1)))
    assert _calls.collapse(every) == _calls._WS.sub(" ", every).strip()


@given(
    st.lists(
        _SHELL_PIECES | st.sampled_from(["grep", "git", "diff", "pylint", "test"]), max_size=6
    ),
    st.sampled_from([0, 1, 2, 16, 33, None, True, 1.0, -1]),
)
def test_memoised_exit_verdict_equals_the_definition_types_included(words, code):
    def outcome(func, *args):
        try:
            return func(*args)
        except TypeError as exc:  # pylint with a float code fails alike both ways
            return type(exc)

    command = " ".join(words)
    expected = outcome(_calls._classify_exit, command, code)
    assert outcome(_calls.classify_exit, command, code) == expected
    assert outcome(_calls.classify_exit, command, code) == expected  # the memoised answer
    if code is True:
        assert _calls.classify_exit(command, 1) == _calls._classify_exit(command, 1)


def test_ascii_fold_knows_every_character_ignorecase_matches_to_an_ascii_letter():
    import re

    letter = re.compile("[a-z]", re.IGNORECASE)
    folding = [chr(c) for c in range(128, 0x110000) if letter.fullmatch(chr(c))]
    assert sorted(folding) == sorted(_calls._FOLDS_TO_ASCII)
    for char, ascii_letter in _calls._FOLDS_TO_ASCII.items():
        assert re.fullmatch(ascii_letter, char, re.IGNORECASE)


@given(
    st.text(
        alphabet=st.sampled_from(["a", "E", "\n", "ſ", "\u212a", "İ", "ı", "é", "\u00a0", "€", " "])
    )
)
def test_ascii_fold_keeps_length_word_characters_and_ascii(text):
    import re

    folded = _calls.ascii_fold(text)
    assert folded.isascii() and len(folded) == len(text)
    assert [bool(re.match(r"\w", c)) for c in folded] == [bool(re.match(r"\w", c)) for c in text]


_TOKEN_BY_DEFINITION = __import__("re").compile(
    r"""(?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^\s'"|&;()<>])+"""
    r"|&&|\|\||;;|\|&|&>>|&>|>>|>\||>&|<<<|<<-?|[|&;()<>]|['\"]"
)


@given(
    st.lists(st.sampled_from([*"ab '\"\\|&;()<>\t$=-./\r", "\\'", "&&", ">>", "<<-"])).map("".join)
)
def test_shell_tokens_taken_a_run_at_a_time_match_the_definition(text):
    assert _calls._TOKEN.findall(text) == _TOKEN_BY_DEFINITION.findall(text)


# -- session 4 (hot): fast paths against their definitions ------------------------------


@__import__("functools").cache
def _recorded() -> tuple:
    """Every recorded call of the shared trajectories, loaded once per test run."""
    from tests.memory.middleware.test_facts import _recorded_calls

    return tuple(_recorded_calls())


def _recorded_outputs() -> list[str]:
    return [c.output or "" for c in _recorded()]


def _volatile_by_definition(text: str) -> str:
    return _calls._VOLATILE.sub(lambda m: _calls._MASKS[m.lastgroup or "addr"], text)


_ASCII_VOLATILE_PIECES = st.sampled_from(
    ["0x7f00aa11", "0xABCDEF", "pid 42", "PID=7", "pid:3", "Pid 4", "xpid 5", "12:30:01",
     "1:02:03.5", "2026-01-02T03:04:05Z", "2026-01-02 03:04:05,123+01:00", "3.5 s", "10ms",
     "7 seconds", "4secs", "12.25\x1cs", "a1", "_9", "p", "P", "x", "i", "d", "I", "D", "s",
     "m", " ", "\t", "\n", "\x1f", "0", "1", "9", "0x", ":", "-", ".", ",", "T", "Z", "+"]
)  # fmt: skip


@given(st.lists(_ASCII_VOLATILE_PIECES, max_size=25).map("".join))
@example("took 12.25\x1cs, 3\tms and 1xABCD1 at 10:20:30 (7x0123)")
@example("a1xdead p0xbeef")
def test_ascii_volatile_mask_matches_the_definition(text):
    assert _calls.mask_volatile_details(text) == _volatile_by_definition(text)


@given(st.text(alphabet=st.sampled_from([*"0123456789pPiIdDxsmT:-. \t\x1c_aZ+,"]), max_size=40))
def test_ascii_volatile_mask_matches_the_definition_on_any_ascii_mix(text):
    assert _calls.mask_volatile_details(text) == _volatile_by_definition(text)


def test_volatile_mask_matches_the_definition_on_every_recorded_output():
    outputs = _recorded_outputs()
    assert len(outputs) > 1000
    for output in outputs:
        assert _calls.mask_volatile_details(output) == _volatile_by_definition(output)


@given(st.lists(_ASCII_VOLATILE_PIECES | st.sampled_from(["…", "٣", "é", "१2", "\u2028"])))
def test_volatile_mask_with_non_ascii_text_matches_the_definition(pieces):
    text = "".join(pieces)
    assert _calls.mask_volatile_details(text) == _volatile_by_definition(text)


def test_volatile_mask_without_pid_tries_only_digits():
    digits = _calls._VOLATILE_DIGITS.pattern
    assert digits.startswith("[0-9](?:") and "pid" not in digits and "PID" not in digits
    assert digits.count("(?P<") == 3  # addr, ts, dur: the branches digits can start
    for text in ("pid 42 took 3 s", "PID=7 at 10:20:30", "took 3 s at 0x7f00aa11"):
        assert _calls.mask_volatile_details(text) == _volatile_by_definition(text)


def test_volatile_pattern_choice():
    cut = "x" * _calls.SIGNATURE_HEAD_CHARS + "\n…\n" + "took 3 s"
    assert _calls._volatile_pattern(cut) is _calls._VOLATILE_ASCII
    assert _calls._volatile_pattern(cut + " ٣") is _calls._VOLATILE
    many = "é " * 100
    assert _calls._volatile_pattern(many) is _calls._VOLATILE_ASCII
    assert _calls._volatile_pattern(many + "\u0663") is _calls._VOLATILE


@given(st.lists(_ASCII_VOLATILE_PIECES | st.sampled_from(["٣", "€"]), max_size=12))
@example(["٣", "10ms"])
def test_masking_a_long_output_matches_the_definition(pieces):
    head = "".join(pieces)
    text = head + "-" * (_calls.SIGNATURE_HEAD_CHARS + _calls.SIGNATURE_TAIL_CHARS + 1) + head
    cut = text[: _calls.SIGNATURE_HEAD_CHARS] + "\n…\n" + text[-_calls.SIGNATURE_TAIL_CHARS :]
    _calls.clear_caches()
    assert _calls._mask_volatile(text) == _calls.collapse(_volatile_by_definition(cut))


def _fold_by_definition(text: str) -> str:
    return __import__("re").sub(r"[^\x00-\x7f]", lambda m: _calls._ascii_stand_in(m.group()), text)


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FFFF)))
@example("a\ud800b\udfffİſ\u212aı€文本\n")
def test_ascii_fold_by_the_encoder_matches_the_definition(text):
    assert _calls.ascii_fold(text) == _fold_by_definition(text)


def test_ascii_fold_by_the_encoder_matches_the_definition_on_recorded_outputs():
    for output in _recorded_outputs():
        assert _calls.ascii_fold(output) == _fold_by_definition(output)


def test_memoised_failure_and_environment_scans_equal_fresh_ones():
    outputs = _recorded_outputs()
    fresh = []
    for output in outputs:
        _calls.clear_caches()
        fresh.append(
            (
                _calls.failure_lines(output, exit_code=2),
                _calls.environment_signature("pip install x", output, exit_code=2),
            )
        )
    _calls.clear_caches()
    for _ in range(2):  # the second time through, every text is remembered
        for output, (lines, environment) in zip(outputs, fresh, strict=True):
            assert _calls.failure_lines(output, exit_code=2) == lines
            assert _calls.environment_signature("pip install x", output, exit_code=2) == environment
    assert _calls.failure_lines("", exit_code=3) == ("<empty output, exit 3>",)
    assert _calls.failure_lines(" \n", exit_code=None) == ("<empty output, exit None>",)


def _strip_heredocs_by_lines(command: str) -> str:
    """``_strip_heredocs`` by its definition, one line at a time."""
    if "<<" not in command:
        return command
    lines = command.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if "<<" not in line:
            continue  # the operator is on this line or no body starts here
        for delimiter in [m.group(2) for m in _calls._HEREDOC.finditer(line)]:
            while i < len(lines) and lines[i].strip() != delimiter:
                i += 1
            i += 1  # skip the delimiter line
    return "\n".join(out)


_HEREDOC_PIECES = st.sampled_from(
    ["cat", "<<EOF", "<< 'EOF'", '<<-"END"', "<<<", "EOF", " EOF ", "\tEOF\r", "END", "E0F",
     "x", "> f", "&&", ";", "\n", "\n", "\n", "\x0b", "\u2028", "<<A <<B", "A", "B", "echo hi"]
)  # fmt: skip


@given(st.lists(_HEREDOC_PIECES, max_size=30).map(" ".join))
@example("cat <<EOF\nbody\nEOF\n")
@example("cat <<A <<B\n a \nB\n A\nB\nrm x")
@example("cat <<EOF\nno end")
def test_heredoc_bodies_skipped_by_search_match_the_line_by_line_definition(command):
    assert _calls._strip_heredocs(command) == _strip_heredocs_by_lines(command)


def test_heredoc_bodies_skipped_by_search_on_every_recorded_command():
    commands = [_calls.shell_command_of(c.tool_name, c.args) for c in _recorded()]
    heredocs = [c for c in commands if c and "<<" in c]
    assert len(heredocs) > 50
    for command in heredocs:
        assert _calls._strip_heredocs(command) == _strip_heredocs_by_lines(command)


_PY_HEREDOC_PIECES = st.sampled_from(
    ["python", "python3.11", "xpython", "_python", "python-x", "-u", "-", " ", "\t", "\n",
     "<<", "<<-", "'", '"', "EOF", "cat", "|", "3"]
)  # fmt: skip


@given(st.lists(_PY_HEREDOC_PIECES, max_size=16).map("".join))
@example("xpython <<EOF")
@example("python3 -u - <<'EOF'")
def test_python_heredoc_pattern_led_by_its_literal_matches_the_definition(text):
    import re

    definition = re.compile(_calls._PY_HEREDOC_SOURCE)
    found, expected = _calls._PY_HEREDOC.search(text), definition.search(text)
    assert (found and found.span()) == (expected and expected.span())


def test_python_heredoc_pattern_on_every_recorded_command():
    import re

    definition = re.compile(_calls._PY_HEREDOC_SOURCE)
    for call in _recorded():
        command = _calls.shell_command_of(call.tool_name, call.args) or ""
        found, expected = _calls._PY_HEREDOC.search(command), definition.search(command)
        assert (found and found.span()) == (expected and expected.span())


def _revert_by_definition(command: str) -> bool:
    changing = [
        w for w in _calls.split_simple_commands(command) if _calls._simple_command_changes(w)
    ]
    if not changing:
        return False
    for words in changing:
        program, rest = _calls._program(words)
        sub = next((a for a in rest if not a.startswith("-")), "")
        if program != "git" or sub not in _calls._REVERT_GIT:
            return False
    return True


def _paths_by_definition(command: str) -> tuple[str, ...]:
    found: list[str] = []
    for words in _calls.split_simple_commands(command):
        found += _calls._shell_changed_paths(words, _calls._simple_command_changes(words))
    return tuple(
        dict.fromkeys(p for p in found if p and not p.startswith("/dev/") and "\0" not in p)
    )


_CHANGE_PIECES = st.sampled_from(
    ["git checkout x", "git stash", "git status", "sed -i s/a/b/ f.py", "sed -n 1p f.py", "perl -pi -e s f",
     "echo hi > out.txt", "cat f", "cp a.py b.py", "touch t.txt", "rm -rf build", "ls", "tee log.txt",
     "&&", "||", ";", "|", "\n", "(", ")"]
)  # fmt: skip


@given(st.lists(_CHANGE_PIECES, max_size=8).map(" ".join))
def test_remembered_change_flags_match_the_definitions(command):
    args = {"command": command}
    for _ in range(2):  # fresh, then from the memo
        expected = any(
            _calls._simple_command_changes(w) for w in _calls.split_simple_commands(command)
        )
        assert _calls.shell_changes_files(command) == expected
        assert _calls.is_revert("bash", args) == _revert_by_definition(command)
        assert _calls.changed_paths("bash", args) == _paths_by_definition(command)


def test_remembered_change_flags_match_the_definitions_on_every_recorded_command():
    _calls.clear_caches()
    for call in _recorded():
        command = _calls.shell_command_of(call.tool_name, call.args)
        if not command:
            continue
        args = {"command": command}
        assert _calls.is_revert("bash", args) == _revert_by_definition(command)
        assert _calls.changed_paths("bash", args) == _paths_by_definition(command)


def _unquote_by_definition(word: str) -> str:
    return _calls._QUOTED.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), word)


@given(st.lists(st.sampled_from([*"'\"\\ab ", '\\"']), max_size=12).map("".join))
@example("'a\"b'")
@example('"a\'b"')
@example('"a\\"b"')
@example("aba")
@example('"ab\\"')
def test_unquote_shortcut_matches_the_definition(word):
    assert _calls._unquote(word) == _unquote_by_definition(word)


def test_unquote_shortcut_on_every_recorded_token():
    for call in _recorded():
        command = _calls.shell_command_of(call.tool_name, call.args) or ""
        text = _calls._strip_heredocs(command).replace("\\\n", " ").replace("\n", " ; ")
        for token in _calls._TOKEN.findall(text):
            assert _calls._unquote(token) == _unquote_by_definition(token)


def test_shell_command_of_a_mapping_that_is_not_a_dict():
    from types import MappingProxyType

    assert _calls.shell_command_of("bash", MappingProxyType({"command": "ls"})) == "ls"
    assert _calls.shell_command_of("bash", ["ls"]) is None


def _problem_line_by_lines(text: str) -> str:
    """``_problem_line`` as it was written, line by line."""
    raw_lines = text.splitlines()
    if _calls._TRACEBACK_HEAD in text:
        lines = [line for line in map(_calls._kept_line, raw_lines) if line]
        return _calls._problem_line_of(lines)
    at = _first_problem_raw_line(raw_lines)
    if at is None:
        at = next((i for i, raw in enumerate(raw_lines) if _calls._kept_line(raw)), None)
        if at is None:
            return ""
    line = _calls._kept_line(raw_lines[at])
    if line.endswith(":"):
        following = next((k for k in map(_calls._kept_line, raw_lines[at + 1 :]) if k), None)
        if following is not None:
            line = f"{line} {following}"
    return line


def _first_problem_raw_line(raw_lines: list[str]) -> int | None:
    joined = "\n".join(raw_lines)
    joined = (joined if joined.isascii() else _calls.ascii_fold(joined)).lower()
    pos = index = 0
    while (match := _calls._PROBLEM_LOWER.search(joined, pos)) is not None:
        index += joined.count("\n", pos, match.start())
        if _calls._kept_line(raw_lines[index]):
            return index
        pos = joined.find("\n", match.start()) + 1
        if pos == 0:
            return None
        index += 1
    return None


_PROBLEM_PIECES = st.sampled_from(
    ["error: x", "Failed:", "ok", "  ", "> error", ">>> failed", "===== FAILURES =====", "fatal",
     "İnvalid", "not found", "line", "a:", "ſ", "\n", "\n", "\n", "\r\n", "\r", "\x0b", "\x1c",
     "\x85", "\u2028", "\u2029", "\t"]
)  # fmt: skip


@given(st.lists(_PROBLEM_PIECES, max_size=16).map("".join))
@example("")
@example("\n")
@example("ok\nerror:\n\n  \nnext\n")
@example("x\n> error\nlast:")
def test_problem_line_by_offsets_matches_the_line_by_line_version(text):
    _calls.clear_caches()
    assert _calls._problem_line(text) == _problem_line_by_lines(text)
    assert _calls._joined_lines(text) == "\n".join(text.splitlines())


@given(st.lists(_PROBLEM_PIECES, max_size=16).map("".join), st.integers(1, 12))
@example("ok\nerror: x\n", 1)
@example("a:\n\nnext error\n", 2)
def test_first_problem_line_in_windows_matches_the_whole_text(text, window):
    joined = _calls._joined_lines(text)
    whole = _calls._first_problem_line_in(joined)
    assert _calls._first_problem_line_start(joined, window) == whole
    assert _calls._first_problem_line_start(joined) == whole


def test_problem_line_by_offsets_on_every_recorded_output():
    _calls.clear_caches()
    for output in _recorded_outputs():
        assert _calls._problem_line(output) == _problem_line_by_lines(output)
        joined = _calls._joined_lines(output)
        whole = _calls._first_problem_line_in(joined)
        assert _calls._first_problem_line_start(joined, 1000) == whole


def _cut_for_failure_lines(output: str) -> str:
    head, tail = _calls.SIGNATURE_HEAD_CHARS, _calls.SIGNATURE_TAIL_CHARS
    return output if len(output) <= head + tail else output[:head] + "\n" + output[-tail:]


_FAILURE_LINE_PIECES = st.sampled_from(
    ["ValueError: x", "_Err.error: y", "9Error", "===== FAILURES =====", "--- x ---", "~~~", "#",
     "> error", ">>> failed", "ok", "Error", "  ", "\n", "\n", "\n", "E   assert", "timeout 3.25 s"]
)  # fmt: skip


@given(st.lists(_FAILURE_LINE_PIECES, max_size=20).map("".join))
@example("ok\n_SystemExit: 3\nKeyboardInterrupt\ndone")
def test_failure_lines_with_first_character_checks_match_the_definition(output):
    _calls.clear_caches()
    assert _calls.failure_lines(output, exit_code=1) == _failure_lines_by_definition(output, 1)


def test_failure_lines_with_first_character_checks_on_every_recorded_output():
    _calls.clear_caches()
    for output in _recorded_outputs():
        expected = _failure_lines_by_definition(_cut_for_failure_lines(output), 1)
        assert _calls.failure_lines(output, exit_code=1) == expected


def _program_by_definition(words):
    i = 0
    while i < len(words):
        word = words[i]
        if _calls._ENV_ASSIGNMENT.match(word):
            i += 1
            continue
        base = word.rsplit("/", 1)[-1]
        if base in _calls._WRAPPERS:
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


_PROGRAM_WORDS = st.sampled_from(
    ["A=1", "_x=y", "1A=2", "a=", "=b", "sudo", "-E", "/usr/bin/env", "timeout", "30", "-s",
     "python3", "/opt/python3.11", "-m", "pip", "install", "a/b/", "/", "", "sed", "x=/a/b"]
)  # fmt: skip


@given(st.lists(_PROGRAM_WORDS, max_size=7))
def test_program_shortcuts_match_the_definition(words):
    assert _calls._program(words) == _program_by_definition(words)
    program, args = _program_by_definition(words)
    expected = (
        (args[1], args[2:])
        if (_calls._PYTHON.match(program) and len(args) >= 2 and args[0] == "-m")
        else (program, args)
    )
    assert _calls._module_program(program, args) == expected


def test_shell_tokens_on_every_recorded_command_match_the_definition():
    for call in _recorded():
        command = _calls.shell_command_of(call.tool_name, call.args) or ""
        text = _calls._strip_heredocs(command).replace("\\\n", " ").replace("\n", " ; ")
        assert _calls._TOKEN.findall(text) == _TOKEN_BY_DEFINITION.findall(text)


@given(st.lists(_SHELL_PIECES, max_size=12).map("".join))
@example("\nls")
@example("echo a\\\nb")
def test_tokens_without_a_line_break_skip_the_replacements(command):
    _calls.clear_caches()
    text = _calls._strip_heredocs(command).replace("\\\n", " ").replace("\n", " ; ")
    expected = tuple(_unquote_by_definition(t) for t in _TOKEN_BY_DEFINITION.findall(text))
    assert _calls._tokens(command) == expected


# -- session 6 (shell6): the §12.1 quick "no" against the definition --------------------

# Pieces that reach every rule of ``_simple_command_changes`` and every way a name can be
# spelled or hidden: quotes inside names and unpaired, escapes, here-documents, wrappers,
# paths, python -m, operators glued to words, \s characters bytes.split does not know.
_QUICK_PIECES = st.sampled_from(
    [" ", "  ", "\t", "\n", "\x1c", "\x0b", "\u2028", "é", "'", '"', "\\", "\\\n", "'a b'",
     '"c d"', "r''m", 'r""m', "'rm'", '"rm"', "r'", "'m", "/bin/", "x/", "rm", "cp", "mv",
     "mkdir", "make", "tee", "tar", "xf", "tf", "sed", "gsed", "perl", "-i", "-n", "-ni",
     "--in-place", "-e", "git", "checkout", "diff", "status", "stash", "pip", "pip3",
     "install", "list", "npm", "i", "go", "get", "uv", "python", "python3", "python3.11",
     "-m", "-c", "x.py", "fix.py", "Fix.py", "REPRO.py", "setup.py", "build", "sudo", "env",
     "timeout", "5", "-k", "FOO=1", "nice", "echo", "cat", "ls", "a", "|", "||", "&&", "&",
     ";", "(", ")", "<", "<<", "<<<", "<<EOF", "<<'EOF'", "EOF", ">", ">>", "2>&1",
     "/dev/null", "open('f','w')", "$(", "`"]
)  # fmt: skip


@given(st.lists(_QUICK_PIECES, max_size=14).map("".join))
@example("r'm' x")
@example('x;r""m y')
@example("timeout 5 /bin/rm -f a")
@example("python -m pip install x")
@example("sed -ni 1p f")
@example("echo \"'\"rm'x")
@example("cat <<EOF\n'\nEOF\nrm'x")
@example("rm'x")
@example("echo \"'\";rm'x")
@example("echo \\'; rm'x")
@example("\u2028rm x")
@example("python Fix.py")
@example('rm"x')
@example("npm ci")
@example("go get x")
@example('python3 -c "f.write(1)"')
@example("python setup.py develop")
@example("python -c \"open('f','w')\"")
@example("python -c \"o=open;o('f','w')\"")
@example('echo "it\'s" && rm x')
@example("echo \"it's\";rm'x")
@example("echo \"a'b\" 'c\"d' 'e;rm f'")
@example("python -c 'print(1)'")
def test_quick_no_change_answer_agrees_with_the_definition(command):
    _calls.clear_caches()
    if not _calls._may_change_files(command):
        assert not any(_calls._changes_of(command))


def test_quick_no_change_answer_on_every_recorded_command():
    decided = 0
    for call in _recorded():
        command = _calls.shell_command_of(call.tool_name, call.args)
        if command is not None and not _calls._may_change_files(command):
            decided += 1
            assert not any(_calls._changes_of(command))
    assert decided > 100  # the quick answer is taken at all


@given(st.text(alphabet=st.sampled_from([*"fixpatchEDITwrONLYsu.py_-/ ", "İ", "ı", "ſ", "K"])))
@example("Fix.py")
@example("EDIT")
def test_editing_script_name_matches_the_case_insensitive_regex(name):
    assert _calls._editing_script_name(name) == bool(_calls._EDITING_SCRIPT.search(name))


def test_rstrip_before_the_tokeniser_strips_exactly_the_regex_whitespace():
    # _tokens strips the text's end before _TOKEN takes each token's leading \s: a
    # character rstrip took that \s does not match would lose a token.
    space = re.compile(r"\s")
    for code in range(0x110000):
        char = chr(code)
        assert (("a" + char).rstrip() == "a") == bool(space.fullmatch(char)), hex(code)


@given(
    st.lists(
        _SHELL_PIECES | st.sampled_from([" ", "\t", "\u2028", "\x1c", "é", "\\", "\u00a0"])
    ).map("".join)
)
@example("echo foo\\ ")  # the escaped whitespace at the end is the word's (break6)
@example("touch 'a'\\\t")
@example("rm x\\\u00a0 \t")
@example("echo a\\\\ ")  # an escaped backslash: the space after it is whitespace
def test_tokens_after_leading_whitespace_match_the_definition(text):
    _calls.clear_caches()
    expected = tuple(
        _unquote_by_definition(t)
        for t in _TOKEN_BY_DEFINITION.findall(
            _calls._strip_heredocs(text).replace("\\\n", " ").replace("\n", " ; ")
        )
    )
    assert _calls._tokens(text) == expected


def test_an_escaped_whitespace_character_ending_the_line_stays_in_its_word():
    # break6: stripping the line's end before the tokeniser took the escaped space of
    # ``touch a\ `` away (the file written is "a ", not "a\").
    _calls.clear_caches()
    assert _calls._tokens("echo foo\\ ") == ("echo", "foo\\ ")
    assert _calls.changed_paths("bash", {"command": "touch 'a'\\ "}) == ("a\\ ",)


def test_a_flat_call_with_an_int_too_long_to_write_is_unrepresentable():
    # break6: canonical_call(flat=True), call_facts' path since 15ea44c, let the
    # ValueError of int.__repr__ past the 4,300-digit limit out instead of
    # answering <unrepresentable> like the checked path.
    from clio_acp.memory.middleware.facts import call_facts, clear_facts_cache

    args = {"command": "ls", "n": 10**5000}
    assert _calls.flat_json_object(args)
    expected = "bash" + _calls.UNREPRESENTABLE
    assert _calls.canonical_call("bash", args) == expected
    assert _calls.canonical_call("bash", args, flat=True) == expected
    clear_facts_cache()
    assert call_facts("bash", args, None, None).canonical == expected
