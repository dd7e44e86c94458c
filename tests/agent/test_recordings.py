"""Recording adapters: the task is separated from the harness template (§13.4) and
the pma terminal reader classifies real screens right (issue 14 item 2).

Real runs are read from ``../shared/trajectories`` (never copied)."""

from __future__ import annotations

import json
from pathlib import Path

from clio_acp.agent.recordings import load_recordings, split_task, terminal_failed
from tests.conftest import SHARED
from tests.support.recordings import openhands_instances_file

TRAJ = SHARED / "trajectories"
MINI = TRAJ / "mini-swe-agent-gemini3-swebv"
PMA = TRAJ / "pma-tb2"

HARNESS_PHRASES = ("EXACTLY ONE bash code block", "THOUGHT", "COMPLETE_TASK_AND_SUBMIT", "subshell")


def test_mini_task_is_the_pr_description_plus_its_file_scope_only():
    (recording,) = load_recordings(MINI / "django__django-16560.traj.json")
    assert recording.task.startswith("Allow to customize the code attribute of ValidationError")
    assert "Consider the following PR description" not in recording.task
    assert recording.task_constraints == [
        "DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)"
    ]
    prompt = recording.turns[0].user_text
    assert prompt.startswith(recording.task)
    for phrase in HARNESS_PHRASES:
        assert phrase not in prompt


def test_openhands_task_is_the_issue_description():
    (recording,) = load_recordings(TRAJ / "openhands-swebl-gpt5" / "output.jsonl")
    assert recording.task.startswith("[FEATURE]")
    assert "Follow these steps" not in recording.turns[0].user_text
    assert any("modify the testing logic" in c for c in recording.task_constraints)


def test_pma_task_is_the_terminus_task_description():
    path = PMA / "regex-log" / "memory-v3-opus" / "trajectory_agent.steps.jsonl"
    (recording,) = load_recordings(path)
    assert recording.task.startswith("Write a regex expression that matches dates")
    prompt = recording.turns[0].user_text
    assert "keystrokes" not in prompt and "Current terminal state" not in prompt
    assert recording.task_constraints == []


def test_a_plain_prompt_is_taken_whole():
    assert split_task("mini-swe-agent", "Fix the bug in x.py.") == ("Fix the bug in x.py.", [])
    assert split_task("pma", "Just do it") == ("Just do it", [])


def test_pma_heredoc_write_whose_body_scrolled_past_is_not_a_failure():
    path = PMA / "adaptive-rejection-sampler" / "baseline-sonnet" / "trajectory_agent.steps.jsonl"
    (recording,) = load_recordings(path)
    writes = [c for c in recording.calls if c.args.get("keystrokes", "").startswith("cat > ")]
    assert len(writes) >= 4
    # The written R code prints "SOME TESTS FAILED"; writing it is not failing.
    assert not [c.index for c in writes if c.is_error]
    assert all("SOME TESTS FAILED" not in c.output for c in writes)


def test_pma_reads_operation_not_permitted_and_connection_reset_as_failures():
    path = PMA / "git-multibranch" / "memory-v3-opus" / "trajectory_agent.steps.jsonl"
    (recording,) = load_recordings(path)
    by_text = {c.index: c for c in recording.calls}
    kills = [c for c in by_text.values() if c.args.get("keystrokes", "").startswith("kill ")]
    assert kills and all(c.is_error for c in kills if "Operation not permitted" in c.output)
    resets = [c for c in by_text.values() if "Connection reset by" in c.output]
    assert resets and all(c.is_error for c in resets)


def test_terminal_failure_rules_on_small_screens():
    assert terminal_failed("bash: kill: (157) - Operation not permitted", "kill 157\n")
    assert terminal_failed("Connection reset by ::1 port 2222", "ssh -p 2222 x\n")
    assert terminal_failed("Error in f(x) :\n  boom\nExecution halted", "Rscript a.R\n")
    assert not terminal_failed("WARNING: Cannot find a usable tclConfig.sh file.", "./configure\n")
    assert not terminal_failed("Execution halted", "C-c")
    assert not terminal_failed("No such file or directory", "")


def test_mini_prompt_without_pr_description_is_kept(tmp_path):
    path = tmp_path / "x.traj.json"
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Please never touch setup.py. Fix the parser."},
        {"role": "assistant", "content": "```bash\nls\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na\n</output>"},
    ]
    path.write_text(json.dumps({"messages": messages, "instance_id": "x"}))
    (recording,) = load_recordings(path)
    assert recording.task == "Please never touch setup.py. Fix the parser."


def test_a_prompt_without_a_task_tag_loses_the_harness_instruction_blocks():
    prompt = (
        "<instructions>\nYour response MUST include EXACTLY ONE bash code block.\n"
        "DO NOT MODIFY: Tests.\n</instructions>\n"
        "<format_example>```bash\nls\n```</format_example>\n"
        "Fix the bug: the parser must accept ISO dates."
    )
    task, scope = split_task("mini-swe-agent", prompt)
    assert task == "Fix the bug: the parser must accept ISO dates."
    assert scope == ["DO NOT MODIFY: Tests."]
    # OpenHands templates that use <pr_description> are read the same way.
    task, _ = split_task("openhands", "<pr_description>\nAdd flag X.\n</pr_description>\nSteps…")
    assert task == "Add flag X."


# -- mini-swe-agent tag bodies found with str.find (issue 18 part 3) -------------------

import re  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clio_acp.agent.recordings import _between  # noqa: E402

_SCOPE_PIECES = [
    "DO NOT MODIFY: Tests.",
    "Make changes to non-test files.",
    "Never change the configuration!",
    "<pr_description>",
    "<edit_tests>",
    "don't edit tests",
    "\n",
    " ",
    "x.",
    "-",
    "*",
]


@settings(max_examples=150)
@given(st.lists(st.lists(st.sampled_from(_SCOPE_PIECES), max_size=8).map("".join), max_size=4))
def test_remembered_scope_sentences_are_the_computed_ones(templates):
    """A harness template's scope sentences are remembered (every run of a harness
    repeats its template): each answer is the computed one whatever was asked before,
    and a caller changing the list it got changes no later answer."""
    from clio_acp.agent.recordings import _scope_sentences, _template_scope

    for template in [*templates, *reversed(templates)]:
        computed = list(_template_scope.__wrapped__(template))
        got = _scope_sentences(template)
        assert got == computed
        got.append("changed by the caller")
        assert _scope_sentences(template) == computed


_TAG_PIECES = st.sampled_from(
    ["<output>", "</output>", "<output_head>", "</output_head>", "\n", "\n\n", "a", " "]
)


@given(st.lists(_TAG_PIECES, max_size=10).map("".join), st.sampled_from(["output", "output_head"]))
def test_tag_body_by_find_equals_the_lazy_regex(text, tag):
    match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
    assert _between(text, tag) == (match.group(1) if match else None)


_SCREEN_PIECES = st.sampled_from(
    ["bash: x: command not found", "ERROR: y", "Error in f:", "E: no", "e: no", "FAILED", "failed",
     "Traceback (most recent call last)", "ValueError: v", "valueerror: v", "make: ***", "ok",
     "Warning: error", "\n", " ", "Killed", "killed", "core dumped", "x"]
)  # fmt: skip


@given(st.lists(_SCREEN_PIECES, max_size=8).map("".join))
def test_terminal_failure_on_lowercased_ascii_equals_the_ignorecase_regex(screen):
    from clio_acp.agent import recordings

    text = recordings._WARNING_LINE.sub("", screen)
    assert terminal_failed(screen, "cmd") == bool(recordings._TERMINAL_FAILURE.search(text))


_FAILURE_PIECES = st.sampled_from(
    ["command not found", "no such file", "connection reset", "connection ", "traceback ",
     "traceback (most recent call last)", "x.y_error:", "_exception:", "error[e0]:", "fatal:",
     "error in f:", "error in ", "execution halted", "-bash: a: ", "dash: b", "dash: b: ", "zsh: c: ", "sh: ", "e: ",
     "e:", "segmentation fault", "failed", "afailed", "failed_", "no working ", "cannot stat",
     "cannot ", ": not found", "make: ***", "killed", "core dumped", "\n", " ", ":", "a", "_"]
)  # fmt: skip


@given(st.lists(_FAILURE_PIECES, max_size=10).map("".join))
def test_failure_shapes_searched_behind_their_texts_equal_the_whole_alternation(text):
    """Lowercased ASCII screens: a shape searched only where one of its texts occurs
    finds a failure exactly when the alternation of all shapes does."""
    from clio_acp.agent import recordings

    expected = bool(recordings._TERMINAL_FAILURE_LOWER.search(text))
    assert recordings._lower_ascii_failure(text) == expected


def _recorded_screens() -> list[str]:
    """Every pma-tb2 terminal output of the shared trajectories, as the loader sees it
    (warning lines dropped)."""
    from clio_acp.agent import recordings

    return [
        recordings._WARNING_LINE.sub("", call.output)
        for path in sorted((TRAJ / "pma-tb2").glob("*/*/trajectory_agent.steps.jsonl"))
        for recording in load_recordings(path)
        for call in recording.calls
    ]


def test_failure_shapes_agree_with_the_alternation_on_every_recorded_screen():
    from clio_acp.agent import recordings

    screens = [text.lower() for text in _recorded_screens() if text.isascii()]
    assert len(screens) > 100
    for text in screens:
        expected = bool(recordings._TERMINAL_FAILURE_LOWER.search(text))
        assert recordings._lower_ascii_failure(text) == expected


_ANY_PIECES = st.one_of(
    _FAILURE_PIECES,
    st.sampled_from(
        ["İ", "ı", "ſ", "\u212a", "é", "─", "\u00a0", "\u2028", "\u0085", "Ｆ", "ß", "ﬀ",
         "KİLLED", "FAİLED", "ſegmentation fault", "error in x:\u00a0", "\u212aILLED",
         "Traceback (moſt recent call laſt)", "bash: ı: ", "ValueError:", "ÄError:"]
    ),
)  # fmt: skip


@given(st.lists(_ANY_PIECES, max_size=10).map("".join))
def test_failure_shapes_on_any_text_equal_the_ignorecase_alternation(text):
    """Text that is not ASCII: the shapes searched behind their texts in the
    ascii-folded text find a failure exactly when the IGNORECASE alternation does."""
    from clio_acp.agent import recordings

    expected = bool(recordings._TERMINAL_FAILURE.search(text))
    assert recordings._failure_any_text(text) == expected


def test_failure_shapes_on_recorded_screens_that_are_not_ascii():
    from clio_acp.agent import recordings

    screens = [text for text in _recorded_screens() if not text.isascii()]
    assert len(screens) > 5
    for text in screens:
        expected = bool(recordings._TERMINAL_FAILURE.search(text))
        assert recordings._failure_any_text(text) == expected


def test_openhands_first_instance_parsed_by_detection_gives_the_same_recordings():
    """Auto-detection hands the first instance it parsed to the loader; the result
    equals loading with the format named (each line parsed by the loader)."""
    path = TRAJ / "openhands-swebl-gpt5" / "output.jsonl"
    detected = load_recordings(path)
    assert detected and detected == load_recordings(path, "openhands")
    assert load_recordings(path, part=(0, 2)) == load_recordings(path, "openhands", part=(0, 2))
    assert load_recordings(path, part=(1, 2)) == load_recordings(path, "openhands", part=(1, 2))


def test_iter_recordings_reads_instances_as_asked_and_equals_load_recordings(tmp_path):
    """Every shared file (and share) gives the same recordings one at a time; an
    OpenHands file is read lazily: the instances before a bad line come out, then the
    error load_recordings raises."""
    import pytest

    from clio_acp.agent.recordings import RecordingFormatError, iter_recordings

    for path in [*TRAJ.glob("*/*.traj.json"), *TRAJ.glob("*/output.jsonl")][:4]:
        for part in (None, (0, 2), (1, 2)):
            assert list(iter_recordings(path, part=part)) == load_recordings(path, part=part)
    path = openhands_instances_file(tmp_path, 3, bad_line=3)
    lazy = iter_recordings(path)
    assert [next(lazy).name, next(lazy).name] == ["instance-0", "instance-1"]
    with pytest.raises(RecordingFormatError, match=":3: not a JSON line"):
        next(lazy)
    with pytest.raises(RecordingFormatError, match=":3: not a JSON line"):
        load_recordings(path)


async def test_replay_file_replays_instances_one_by_one_and_drops_each(tmp_path, monkeypatch):
    """Recordings are read one at a time and let go once replayed (only reports are
    kept), and a bad line still fails the whole file."""
    import gc
    import weakref

    import pytest

    from clio_acp.agent import replay as replay_module
    from clio_acp.agent.recordings import RecordingFormatError

    alive = []
    replayed = replay_module.replay_recording

    async def watching(recording, *args, **kwargs):
        gc.collect()
        alive.append(sum(1 for ref in seen if ref() is not None))
        seen.append(weakref.ref(recording))
        return await replayed(recording, *args, **kwargs)

    seen: list[weakref.ref] = []
    monkeypatch.setattr(replay_module, "replay_recording", watching)  # the real one, observed
    reports = await replay_module.replay_file(openhands_instances_file(tmp_path, 5))
    assert [r.instance for r in reports] == [f"instance-{n}" for n in range(5)]
    assert max(alive) == 0  # read one at a time; the earlier ones were gone
    with pytest.raises(RecordingFormatError, match=":4: not a JSON line"):
        await replay_module.replay_file(openhands_instances_file(tmp_path, 4, bad_line=4))


def test_what_detection_parsed_is_not_kept_while_a_recording_is_replayed(monkeypatch, tmp_path):
    """The document parsed to tell a file's format (a whole mini-swe-agent run, an
    OpenHands file's first instance) is let go before the recording is handed out:
    kept in the suspended reader, every garbage collection of the replay walked it."""
    import gc
    import weakref

    from clio_acp.agent import recordings

    class Parsed(dict):  # a dict that can be watched
        pass

    watched: list[weakref.ref] = []

    def watching(read):
        def parse(path):
            value = read(path)
            if isinstance(value, dict):
                value = Parsed(value)
                watched.append(weakref.ref(value))
            return value

        return parse

    monkeypatch.setattr(recordings, "_read_document", watching(recordings._read_document))
    monkeypatch.setattr(recordings, "_first_json_line", watching(recordings._first_json_line))
    mini = TRAJ / "mini-swe-agent-gemini3-swebv" / "astropy__astropy-12907.traj.json"
    for path in (mini, openhands_instances_file(tmp_path, 3)):
        watched.clear()
        reader = recordings.iter_recordings(path)
        first = next(reader)
        gc.collect()
        assert first.calls and len(watched) == 1
        assert watched[0]() is None, path.name
        reader.close()


@given(
    st.lists(
        st.sampled_from(
            ["WARNING", "warning", "Warning", "WARN", "arning", "x: ", "Error: e", "\n", " "]
        ),
        max_size=8,
    ).map("".join)
)
def test_terminal_failed_reads_warnings_as_the_warning_scan_does(screen):
    """The scan for warning lines is skipped without "arning"/"ARNING" (no warning
    line can match then); the verdict is the one on the text with warnings removed."""
    from clio_acp.agent import recordings

    if "arning" not in screen and "ARNING" not in screen:
        assert recordings._WARNING_LINE.sub("", screen) == screen
    text = recordings._WARNING_LINE.sub("", screen)
    assert terminal_failed(screen, "cmd") == bool(recordings._TERMINAL_FAILURE.search(text))


@given(st.lists(st.sampled_from([">", " ", "\r", "a", ">>", "\n", "cmd"]), max_size=6).map("".join))
def test_drop_echo_equals_its_definition_with_the_continuation_pattern(text):
    """``_drop_echo`` tests each line as ``">"`` or ``"> …"``, which is what the
    continuation pattern matches on one line."""
    from clio_acp.agent import recordings

    typed = {"cmd", "a"}
    kept = [
        line
        for line in text.split("\n")
        if not recordings._CONTINUATION.match(line) and line.strip() not in typed
    ]
    assert recordings._drop_echo(text, "cmd\n a ") == "\n".join(kept).strip()


# -- regressions from real-world file variants (breaker, issue 18) ----------------------

_ONE_OF_EACH = (
    MINI / "sphinx-doc__sphinx-9711.traj.json",
    TRAJ / "openhands-swebl-gpt5" / "output.jsonl",
    PMA / "regex-log" / "baseline-sonnet" / "trajectory_agent.steps.jsonl",
)


def _variant(tmp_path, source, data: bytes):
    """``data`` written where a copy of ``source`` would go (a pma log keeps its two
    parent folders, which name the recording)."""
    path = tmp_path / source.parent.parent.name / source.parent.name / source.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _same_content(ours, theirs):
    """The recordings equal but for the file they were read from."""
    import dataclasses

    assert [dataclasses.replace(r, path=Path(".")) for r in ours] == [
        dataclasses.replace(r, path=Path(".")) for r in theirs
    ]


def test_a_byte_order_mark_and_crlf_line_ends_read_as_the_plain_file(tmp_path):
    """Editors on Windows write a UTF-8 byte-order mark and CRLF line ends: every format
    used to refuse a BOM as "unknown trajectory format (not JSON)"."""
    for source in _ONE_OF_EACH:
        data = source.read_bytes()
        expected = load_recordings(source)
        for variant in (b"\xef\xbb\xbf" + data, b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")):
            path = _variant(tmp_path, source, variant)
            _same_content(load_recordings(path), expected)
            fmt = expected[0].format
            _same_content(load_recordings(path, fmt), expected)


def _texts(recording):
    """The recording's task, prompts and outputs, in order."""
    return [recording.task] + [
        text
        for turn in recording.turns
        for text in [turn.user_text, *(c.output for c in turn.calls)]
    ]


def _one_text_differs(got, expected, inserted):
    """``got`` equals ``expected`` but for one text holding ``inserted`` once more."""
    ours, theirs = _texts(got), _texts(expected)
    assert len(ours) == len(theirs)
    changed = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert len(changed) == 1
    assert ours[changed[0]].replace(inserted, "", 1) == theirs[changed[0]]


def _unique_marker(data, recording):
    """The bytes of a line of some recorded output that occur once in the file."""
    for call in recording.calls:
        for line in call.output.split("\n"):
            marker = json.dumps(line, ensure_ascii=False)[1:-1].encode("utf-8")
            if len(line) >= 16 and data.count(marker) == 1:
                return marker
    raise AssertionError("no output line occurs once")


def _with_bytes_after_an_output_line(tmp_path, source, inserted: bytes):
    """(the recording of ``source`` with ``inserted`` after one of its output lines,
    the recording as it is)."""
    data = source.read_bytes()
    (expected,) = load_recordings(source)
    marker = _unique_marker(data, expected)
    (got,) = load_recordings(_variant(tmp_path, source, data.replace(marker, marker + inserted, 1)))
    return got, expected


def test_bytes_that_are_not_utf8_inside_an_output_read_as_replacement_characters(tmp_path):
    """Raw program output can hold bytes that are not UTF-8; the file used to be refused
    whole (for OpenHands: every instance in it). They read as U+FFFD; the rest of
    the recording is unchanged."""
    for source in _ONE_OF_EACH:
        got, expected = _with_bytes_after_an_output_line(tmp_path, source, b"\xff\xc3(")
        _one_text_differs(got, expected, "\ufffd\ufffd(")


def test_a_lone_surrogate_escape_reads_as_a_replacement_character(tmp_path):
    """ "\\ud800" alone is valid JSON but no text UTF-8 can encode: in an output it made
    the memory hook fail on hashing it (its effects lost, a traceback logged)."""
    for source in _ONE_OF_EACH:
        got, expected = _with_bytes_after_an_output_line(tmp_path, source, b"\\ud800")
        _one_text_differs(got, expected, "\ufffd")
        for text in _texts(got):
            text.encode("utf-8")


def _well_formed_definition(value):
    """Every lone surrogate in the strings and keys of ``value`` replaced by U+FFFD."""
    if isinstance(value, str):
        return re.sub("[\ud800-\udfff]", "\ufffd", value)
    if isinstance(value, list):
        return [_well_formed_definition(v) for v in value]
    if isinstance(value, dict):
        return {_well_formed_definition(k): _well_formed_definition(v) for k, v in value.items()}
    return value


_TEXT_WITH_SURROGATES = st.text(
    st.sampled_from(["a", "\ud800", "\udfff", "\ud83d", "\ude00", "\U0001f600", "é", "\\"]),
    max_size=6,
)
_JSON_WITH_SURROGATES = st.recursive(
    st.none() | st.integers() | _TEXT_WITH_SURROGATES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(_TEXT_WITH_SURROGATES, inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_JSON_WITH_SURROGATES, st.booleans())
def test_parse_replaces_lone_surrogates_as_the_definition_does(value, ascii_only):
    """``_parse`` (json.loads, then a walk only when a surrogate escape occurs)
    equals the recursive definition; a pair written as two escapes stays one
    character."""
    from clio_acp.agent.recordings import _parse

    text = json.dumps(value, ensure_ascii=ascii_only)
    if not ascii_only and re.search("[\ud800-\udfff]", text):
        return  # not writable as UTF-8 text: no file holds it unescaped
    assert _parse(text) == _well_formed_definition(json.loads(text))
    assert _parse('"\\ud83d\\ude00"') == "\U0001f600"


def test_a_broken_pma_memory_log_is_named_by_its_own_file_and_line(tmp_path):
    """The paper agent's sibling log used to fail with the agent log's name (and a
    bare "'NoneType' object has no attribute 'get'")."""
    import pytest

    from clio_acp.agent.recordings import RecordingFormatError

    source = PMA / "regex-log" / "memory-v3-opus" / "trajectory_agent.steps.jsonl"
    agent = _variant(tmp_path, source, source.read_bytes())
    memory = agent.parent / "trajectory_memory.steps.jsonl"
    lines = (source.parent / memory.name).read_text(encoding="utf-8").splitlines()
    for bad, message in (("{torn", ":3: not a JSON line"), ("null", ":3: not a pma memory step")):
        memory.write_text("\n".join([*lines[:2], bad, *lines[2:]]) + "\n", encoding="utf-8")
        with pytest.raises(RecordingFormatError, match=re.escape(str(memory)) + message):
            load_recordings(agent)
    memory.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (recording,) = load_recordings(agent)
    assert recording.yardstick == load_recordings(source)[0].yardstick


# -- mini-swe-agent 2.x trajectories (breaker, issue 18) --------------------------------


def _as_responses_api(data):
    """A 2.x tool-calling run as its Responses API models save it: the assistant
    message is the response object (no role; ``output`` items, ``extra.actions``),
    each answer a ``function_call_output`` item (no role; its text in ``output``)."""
    messages = []
    for message in data["messages"]:
        message = dict(message)
        if message.get("tool_calls"):
            calls = message.pop("tool_calls")
            del message["role"], message["content"]
            message["object"] = "response"
            message["output"] = [
                {"type": "function_call", "call_id": c["id"], "name": "bash",
                 "arguments": c["function"]["arguments"]} for c in calls
            ]  # fmt: skip
        elif message.get("role") == "tool":
            message = {"type": "function_call_output", "call_id": message.pop("tool_call_id"),
                       "output": message["content"], "extra": message["extra"]}  # fmt: skip
        messages.append(message)
    return {**data, "messages": messages}


def _as_mini_2(data, *, exception_every=0):
    """A 1.x trajectory rewritten as mini-swe-agent 2.x saves a tool-calling run: each
    command in the assistant's ``extra.actions`` and ``tool_calls`` (no fenced block),
    its observation a ``tool`` message with ``extra.returncode`` / ``raw_output``; the
    system and task prompts as one-part content lists. Every ``exception_every``-th
    observation text starts with an ``<exception>`` block, as 2.x writes one."""
    from clio_acp.agent.recordings import _MINI_ACTION, _MINI_RC, _mini_output

    messages = [dict(m) for m in data["messages"]]
    calls = 0
    for i, message in enumerate(messages[:-1]):
        observation = messages[i + 1]
        actions = _MINI_ACTION.findall(message["content"]) if message["role"] == "assistant" else []
        rc = _MINI_RC.match(observation["content"])
        if len(actions) != 1 or not rc:
            continue
        calls += 1
        call_id = f"call_{calls}"
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": actions[0]})},
            }
        ]
        message["extra"] = {"actions": [{"command": actions[0], "tool_call_id": call_id}]}
        observation["role"], observation["tool_call_id"] = "tool", call_id
        observation["extra"] = {
            "raw_output": _mini_output(observation["content"]),
            "returncode": int(rc.group(1)),
        }
        if exception_every and calls % exception_every == 0:
            observation["content"] = "<exception>x</exception>\n" + observation["content"]
    for m in messages[:2]:
        m["content"] = [{"type": "text", "text": m["content"]}]
    return {**data, "messages": messages, "info": {"trajectory_format": "mini-swe-agent-1.1"}}


def _call_shapes(recording):
    return [(c.args, c.output, c.exit_code, c.is_error, c.timed_out) for c in recording.calls]


def test_a_mini_swe_agent_2_tool_calling_run_reads_as_its_1x_twin(tmp_path):
    """2.x saves each command in ``extra.actions`` (tool calls; no fenced block in the
    text) and answers it with a ``tool`` message: such a run used to replay as
    0 tool calls, without an error."""
    for name in ("sphinx-doc__sphinx-9711", "django__django-16263"):
        source = MINI / f"{name}.traj.json"
        (expected,) = load_recordings(source)
        data = json.loads(source.read_text(encoding="utf-8"))
        for every, responses in ((0, False), (3, False), (0, True)):
            twin = _as_mini_2(data, exception_every=every)
            twin = _as_responses_api(twin) if responses else twin
            path = tmp_path / f"{name}-{every}-{responses}.traj.json"
            path.write_text(json.dumps(twin), encoding="utf-8")
            (got,) = load_recordings(path)
            assert len(got.calls) == len(expected.calls) > 10
            assert _call_shapes(got) == _call_shapes(expected)
            assert got.task == expected.task and got.task_constraints == expected.task_constraints
            assert got.turns[0].user_text == expected.turns[0].user_text


def test_mini_swe_agent_2_parallel_calls_and_a_timeout(tmp_path):
    """Several tool calls in one response are one turn of several calls, each answered
    by its own message in order; a 2.x timeout is return code -1 with "timed out" in
    ``exception_info``."""
    answer = {
        "role": "assistant",
        "content": "",
        "extra": {
            "actions": [
                {"command": "ls", "tool_call_id": "a"},
                {"command": "sleep 99", "tool_call_id": "b"},
            ]
        },
    }
    path = tmp_path / "parallel.traj.json"
    path.write_text(json.dumps({"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "List the files."},
        answer,
        {"role": "tool", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>",
         "extra": {"returncode": 0, "raw_output": "a.py\n"}},
        {"role": "tool", "content": "<exception>timeout</exception>\n<returncode>-1</returncode>",
         "extra": {"returncode": -1, "raw_output": "", "exception_info":
                   "An error occurred while executing the command: Command 'sleep 99' timed out"}},
        {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
    ]}), encoding="utf-8")  # fmt: skip
    (recording,) = load_recordings(path)
    assert [len(t.calls) for t in recording.turns] == [2]
    ls, sleep = recording.calls
    assert (ls.index, ls.args, ls.output, ls.exit_code, ls.is_error) == (
        1, {"command": "ls"}, "a.py", 0, False
    )  # fmt: skip
    assert (sleep.index, sleep.exit_code, sleep.is_error, sleep.timed_out) == (2, None, True, True)
    assert sleep.output.startswith("command timed out and was killed")


def test_an_early_mini_swe_agent_bare_message_list_reads_as_a_trajectory(tmp_path):
    """Early mini-swe-agent saved the message list alone (``[{role, content}, …]``);
    it was "unknown trajectory format"."""
    from clio_acp.agent.recordings import detect_format

    source = MINI / "astropy__astropy-12907.traj.json"
    (expected,) = load_recordings(source)
    path = tmp_path / "astropy__astropy-12907.traj.json"
    path.write_text(json.dumps(json.loads(source.read_text())["messages"]), encoding="utf-8")
    assert detect_format(path) == "mini-swe-agent"
    (got,) = load_recordings(path)
    assert got.name == "astropy__astropy-12907"
    assert _call_shapes(got) == _call_shapes(expected) and len(got.calls) == 19


def test_mini_swe_agent_2_text_actions_fenced_or_tagged_read_as_bash_blocks(tmp_path):
    """2.x text-based runs fence the command as ```mswea_bash_command (or tag it
    <mswea_bash_command>, its XML config); those runs replayed as 0 tool calls."""
    from clio_acp.agent.recordings import _MINI_ACTION

    source = MINI / "django__django-16263.traj.json"
    (expected,) = load_recordings(source)
    data = json.loads(source.read_text(encoding="utf-8"))
    fenced, tagged = json.loads(json.dumps(data)), json.loads(json.dumps(data))
    for message, other in zip(fenced["messages"], tagged["messages"], strict=True):
        if message["role"] == "assistant":
            text = message["content"]
            message["content"] = text.replace("```bash", "```mswea_bash_command")
            other["content"] = _MINI_ACTION.sub(
                lambda m: f"<mswea_bash_command>\n{m.group(1)}\n</mswea_bash_command>", text
            )
    for variant, name in ((fenced, "fenced"), (tagged, "tagged")):
        path = tmp_path / f"{name}.traj.json"
        path.write_text(json.dumps(variant), encoding="utf-8")
        (got,) = load_recordings(path)
        assert len(got.calls) == len(expected.calls) > 10
        if name == "fenced":
            assert _call_shapes(got) == _call_shapes(expected)
        else:  # 2.x strips a tagged command
            assert [c.args["command"] for c in got.calls] == [
                c.args["command"].strip() for c in expected.calls
            ]
            assert [c.output for c in got.calls] == [c.output for c in expected.calls]


# -- OpenHands history shapes of other versions (breaker, issue 18) ---------------------

OPENHANDS = TRAJ / "openhands-swebl-gpt5" / "output.jsonl"


def _oh_record():
    return json.loads(next(line for line in OPENHANDS.read_text().splitlines() if line.strip()))


def _oh_shapes(recording):
    return [(c.output, c.exit_code, c.is_error, c.timed_out, c.kind) for c in recording.calls]


def _write_instance(tmp_path, record, name="output.jsonl"):
    path = tmp_path / name
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def test_early_openhands_pairs_without_causes_or_metadata_read_as_the_event_stream(tmp_path):
    """Early OpenHands wrote ``history`` as ``[action, observation]`` pairs (no
    ``cause``) with the exit code in ``extras.exit_code`` (no ``metadata``): such a run
    replayed as 0 tool calls."""
    record = _oh_record()
    (expected,) = load_recordings(OPENHANDS)
    events, pairs = record["history"], []
    answers = {e["cause"]: e for e in events if e.get("observation")}
    for event in events:
        if event.get("observation"):
            continue
        answer = dict(answers.get(event.get("id"), {"observation": "null", "content": ""}))
        answer.pop("cause", None)
        extras = dict(answer.get("extras") or {})
        if "metadata" in extras:
            extras["exit_code"] = extras.pop("metadata")["exit_code"]
        answer["extras"] = extras
        pairs.append([event, answer])
    (got,) = load_recordings(_write_instance(tmp_path, {**record, "history": pairs}))
    assert len(got.calls) == len(expected.calls) == 19
    assert _oh_shapes(got) == _oh_shapes(expected)
    assert [c.args for c in got.calls] == [c.args for c in expected.calls]
    assert got.task == expected.task


def _as_sdk_events(record):
    """The shared V0 run as the OpenHands SDK (V1) writes its history: ``kind``-tagged
    MessageEvent / ActionEvent / ObservationEvent, the action's arguments in
    ``action``, the observation's text as content parts and its exit code."""
    from clio_acp.agent.recordings import _oh_arguments

    answers = {e["cause"]: e for e in record["history"] if e.get("observation")}
    history = [{"kind": "SystemPromptEvent", "source": "agent", "system_prompt": {"text": "x"}}]
    for event in record["history"]:
        if event.get("source") == "user" and event.get("action") == "message":
            text = event["args"]["content"]
            history.append({"kind": "MessageEvent", "source": "user", "llm_message": {
                "role": "user", "content": [{"type": "text", "text": text}]}})  # fmt: skip
            continue
        answer = answers.get(event.get("id"))
        if answer is None:
            continue
        kind = {"run": "TerminalAction", "read": "FileEditorAction", "edit": "FileEditorAction"}
        args = _oh_arguments(event)
        if event["action"] == "read":
            args = {**args, "command": "view"}
        call_id = f"call-{event['id']}"
        tool = event["tool_call_metadata"]["function_name"]
        history.append({"kind": "ActionEvent", "id": f"a{event['id']}", "source": "agent",
                        "tool_name": tool, "tool_call_id": call_id,
                        "action": {"kind": kind[event["action"]], **args}})  # fmt: skip
        content = answer.get("content") or ""
        exit_code = ((answer.get("extras") or {}).get("metadata") or {}).get("exit_code")
        observation = {"kind": "TerminalObservation" if event["action"] == "run" else "Obs",
                       "content": [{"type": "text", "text": content}],
                       "is_error": answer["observation"] == "error" or content.startswith("ERROR:")}  # fmt: skip
        if exit_code is not None:
            observation["exit_code"] = exit_code
        history.append({"kind": "ObservationEvent", "id": f"o{event['id']}",
                        "source": "environment", "tool_name": tool, "tool_call_id": call_id,
                        "action_id": f"a{event['id']}", "observation": observation})  # fmt: skip
    return {**record, "history": history}


def test_an_openhands_sdk_v1_run_reads_as_its_v0_twin(tmp_path):
    """OpenHands' SDK (V1, its benchmarks' output.jsonl) tags events with ``kind``
    (ActionEvent, ObservationEvent, MessageEvent): such a run replayed as 0 tool calls,
    without an error. Same outputs, exit codes, failures and kinds as the V0 run."""
    record = _oh_record()
    (expected,) = load_recordings(OPENHANDS)
    (got,) = load_recordings(_write_instance(tmp_path, _as_sdk_events(record)))
    assert len(got.calls) == len(expected.calls) == 19
    assert _oh_shapes(got) == _oh_shapes(expected)
    assert [c.args for c in got.calls] == [
        {**c.args, "command": "view"} if c.kind == "read" else c.args for c in expected.calls
    ]
    assert got.task == expected.task and got.task_constraints == expected.task_constraints
    assert got.turns[0].user_text == expected.turns[0].user_text


def _unblock_later(fifo, seconds=5.0):
    """Every ``seconds``, open ``fifo`` for writing and close it, so that a reader
    blocked on opening it gets an empty stream instead of waiting for ever (no
    reader: nothing happens). Returns the event that stops it."""
    import os
    import threading

    stop = threading.Event()

    def write_nothing():
        while not stop.wait(seconds):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting (or the folder is gone)

    threading.Thread(target=write_nothing, daemon=True).start()
    return stop


def test_a_pipe_is_refused_by_name_without_being_opened(tmp_path):
    """A pipe (``<(zcat output.jsonl.gz)``) was read twice (detection, then loading):
    the second read started mid-stream ("no OpenHands records", a torn line). A FIFO
    with no writer blocked the open for ever; it is refused before any open."""
    import os

    import pytest

    from clio_acp.agent.recordings import RecordingFormatError

    fifo = tmp_path / "output.jsonl"
    os.mkfifo(fifo)
    unblock = _unblock_later(fifo)  # a regression fails instead of hanging
    for fmt in ("auto", "openhands", "mini-swe-agent", "pma"):
        with pytest.raises(RecordingFormatError, match="not a regular file"):
            load_recordings(fifo, fmt)
    unblock.set()


def test_a_value_of_the_wrong_type_in_a_jsonl_row_is_named_by_its_line(tmp_path):
    """A pma step whose ``observations`` is a number, or an OpenHands instance whose
    run ``args`` is a string, failed as "not a valid … trajectory: 'int' object is not
    iterable" without saying which of the file's lines it was."""
    import pytest

    from clio_acp.agent.recordings import RecordingFormatError

    source = PMA / "regex-log" / "baseline-sonnet" / "trajectory_agent.steps.jsonl"
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    rows[4]["observations"] = 5
    pma = _variant(tmp_path, source, "".join(json.dumps(r) + "\n" for r in rows).encode())
    with pytest.raises(RecordingFormatError, match=re.escape(f"{pma}:5: not a pma agent step")):
        load_recordings(pma)
    record = _oh_record()
    broken = json.loads(json.dumps(record))
    run = next(e for e in broken["history"] if e.get("action") == "run")
    run["args"], run["tool_call_metadata"] = "ls", None
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(record) + "\n\n" + json.dumps(broken) + "\n", encoding="utf-8")
    with pytest.raises(
        RecordingFormatError, match=r"output\.jsonl:3: not a valid OpenHands record"
    ):
        load_recordings(path)


def test_raw_control_characters_inside_strings_read_as_their_escapes(tmp_path):
    """A writer that does not escape control characters leaves raw NUL or ESC bytes
    (terminal colours) inside output strings: strict JSON refused the whole file
    ("Invalid control character"). They read as the escaped characters would."""
    for source in _ONE_OF_EACH:
        data = source.read_bytes()
        (expected,) = load_recordings(source)
        marker = _unique_marker(data, expected)
        raw = _variant(tmp_path / "raw", source, data.replace(marker, marker + b"\x00\x1b[31m", 1))
        escaped = data.replace(marker, marker + b"\\u0000\\u001b[31m", 1)
        _same_content(load_recordings(raw), load_recordings(_variant(tmp_path, source, escaped)))
        (got,) = load_recordings(raw)
        _one_text_differs(got, expected, "\x00\x1b[31m")


def test_gzipped_recordings_read_as_the_plain_files(tmp_path):
    """Runs are often published compressed (``output.jsonl.gz``); a gzip file was
    "unknown trajectory format (not JSON)". A cut or corrupt stream is a read error
    naming the file."""
    import gzip

    import pytest

    from clio_acp.agent.recordings import RecordingFormatError

    for source in _ONE_OF_EACH:
        data = gzip.compress(source.read_bytes())
        path = _variant(tmp_path, source, data)
        path = path.rename(path.with_name(path.name + ".gz"))
        _same_content(load_recordings(path), load_recordings(source))
        _same_content(load_recordings(path, part=(0, 2)), load_recordings(source, part=(0, 2)))
        if source == OPENHANDS:  # an instance without an id is named by the file's stem
            record = {k: v for k, v in _oh_record().items() if k != "instance_id"}
            path.write_bytes(gzip.compress((json.dumps(record) + "\n").encode()))
            assert [r.name for r in load_recordings(path)] == ["output:1"]
        cut = path.with_name("cut-" + path.name)
        cut.write_bytes(data[: len(data) // 2])
        with pytest.raises(RecordingFormatError, match=re.escape(str(cut)) + ".*gzip|Compressed"):
            load_recordings(cut)


def test_a_pma_run_is_named_task_slash_run_however_its_path_is_typed(monkeypatch):
    """From inside the run's folder, ``trajectory_agent.steps.jsonl`` was named "/"
    (and "/baseline-sonnet" from the task folder): the name keys --score labels."""
    from pathlib import Path

    run = PMA / "regex-log" / "baseline-sonnet"
    for folder, typed in (
        (run, "trajectory_agent.steps.jsonl"),
        (run.parent, "baseline-sonnet/trajectory_agent.steps.jsonl"),
        (PMA, "regex-log/baseline-sonnet/trajectory_agent.steps.jsonl"),
    ):
        monkeypatch.chdir(folder)
        (recording,) = load_recordings(Path(typed))
        assert recording.name == "regex-log/baseline-sonnet", typed
