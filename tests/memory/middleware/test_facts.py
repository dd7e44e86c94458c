"""Per-call facts of the rules tier and their shared cache (issue 18 part 3).

A cached ``CallFacts`` must say exactly what facts computed afresh from the call
say, for every call of the shared recordings and for generated shell commands; a
call's facts must not follow later changes of the caller's arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clio_acp.agent.recordings import load_recordings
from clio_acp.memory import calls
from clio_acp.memory.middleware import facts as facts_module
from clio_acp.memory.middleware.facts import CallFacts, call_facts, call_paths, clear_facts_cache
from tests.conftest import SHARED

TRAJ = SHARED / "trajectories"
ROOT = Path("/work/repo")
FIELDS = ("fingerprint", "state_changing", "command", "shell", "call", "paths", "revert", "writes")


def _fresh(name, args, kind, root):
    """The facts as the definitions in ``memory.calls`` give them, nothing cached."""
    canonical = calls.canonical_call(name, args)
    changing = calls.is_state_changing(name, args, kind)
    return {
        "fingerprint": calls.operation_fingerprint(canonical),
        "state_changing": changing,
        "command": calls.typed_command(name, args),
        "shell": calls.shell_command_of(name, args),
        "call": calls.call_description(canonical),
        "paths": call_paths(args, root),
        "revert": changing and calls.is_revert(name, args),
        "writes": calls.changed_paths(name, args, kind) if changing else (),
    }


def _as_dict(facts: CallFacts) -> dict:
    return {name: getattr(facts, name) for name in FIELDS}


def _recorded_calls():
    files = [
        *sorted((TRAJ / "mini-swe-agent-gemini3-swebv").glob("*.traj.json")),
        TRAJ / "openhands-swebl-gpt5" / "output.jsonl",
        *sorted((TRAJ / "pma-tb2").glob("*/*/trajectory_agent.steps.jsonl")),
    ]
    return [c for f in files for r in load_recordings(f) for c in r.calls]


def test_cached_facts_equal_fresh_facts_on_every_recorded_call():
    recorded = _recorded_calls()
    assert len(recorded) > 1000
    clear_facts_cache()
    calls.clear_caches()
    # Twice through: the second pass reads every call from the cache.
    for _ in range(2):
        for call in recorded:
            name = call.tool_name.strip()
            got = call_facts(name, call.args, call.kind, ROOT)
            assert _as_dict(got) == _fresh(name, call.args, call.kind, ROOT), call.args


def test_a_later_call_with_the_same_arguments_shares_the_facts():
    clear_facts_cache()
    one = call_facts("bash", {"command": "pytest -x"}, None, None)
    two = call_facts("bash", {"command": "pytest -x"}, None, None)
    other_root = call_facts("bash", {"command": "pytest -x"}, None, ROOT)
    assert one is two
    assert other_root is not one


def test_the_cache_is_bounded_and_keeps_the_recently_used(monkeypatch):
    monkeypatch.setattr(facts_module, "FACTS_CACHE_ENTRIES", 3)
    clear_facts_cache()
    first = call_facts("bash", {"command": "ls 0"}, None, None)
    for i in range(1, 3):
        call_facts("bash", {"command": f"ls {i}"}, None, None)
    assert call_facts("bash", {"command": "ls 0"}, None, None) is first  # now the newest
    call_facts("bash", {"command": "ls 3"}, None, None)  # evicts "ls 1", the oldest
    assert len(facts_module._CACHE) == 3
    assert call_facts("bash", {"command": "ls 0"}, None, None) is first
    assert call_facts("bash", {"command": "ls 1"}, None, None) is not None
    assert len(facts_module._CACHE) == 3


def test_facts_do_not_follow_later_changes_of_the_arguments():
    clear_facts_cache()
    args = {"command": "sed -i s/a/b/ x.py"}
    facts = call_facts("bash", args, None, None)
    args["command"] = "cat x.py"  # the caller reuses its dict
    assert facts.state_changing and facts.writes == ("x.py",)
    nested = {"command": ["sed", "-i", "s/a/b/", "y.py"]}
    facts = call_facts("bash", nested, None, None)
    nested["command"][-1] = "z.py"
    assert facts.writes == ("y.py",)


def test_unrepresentable_arguments_are_never_shared():
    clear_facts_cache()
    one = call_facts("bash", {"command": "ls", "n": float("nan")}, None, None)
    two = call_facts("bash", {"command": "rm x", "n": float("nan")}, None, None)
    assert one.canonical == two.canonical
    assert not one.state_changing and two.state_changing


_WORDS = st.sampled_from(
    [
        "sed", "-i", "s/a/b/", "x.py", ">", ">>", "/dev/null", "|", "&&", ";", "git", "checkout",
        "--", "python", "-c", "'open(\"f\",\"w\")'", "rm", "-rf", "build", "tee", "cat", "<<EOF",
        "\nbody > f\nEOF\n", "pip", "install", "FOO=1", "sudo", "timeout", "30", '"a b"', "'",
        "perl", "-pi", "cp", "a", "b", "mv", "tar", "xzf", "touch", "\\\n", "(", ")", "echo",
    ]
)  # fmt: skip


@settings(max_examples=300)
@given(st.lists(_WORDS, max_size=14).map(" ".join), st.sampled_from(["bash", "shell", "read"]))
def test_cached_facts_equal_fresh_facts_on_generated_commands(command, tool):
    args = {"command": command}
    first = call_facts(tool, args, None, None)
    again = call_facts(tool, dict(args), None, None)
    fresh = _fresh(tool, args, None, None)
    assert _as_dict(first) == fresh
    assert _as_dict(again) == fresh


@pytest.mark.parametrize("kind", [None, "edit", "read"])
def test_file_tools_facts_follow_kind_and_root(kind):
    args = {"path": "src/a.py", "content": "x"}
    facts = call_facts("write_file", args, kind, ROOT)
    assert _as_dict(facts) == _fresh("write_file", args, kind, ROOT)
    assert facts.paths == (str(ROOT / "src/a.py"),)


# -- session 6 (shell6): flatness asked once ---------------------------------------------

_ODD_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities are not flat
    st.sampled_from([0, 1, 0.0, -0.0, 1.0, True, False, "", 'é\n"\\']),
    st.text(max_size=8),
)
_ARGS = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=4), _ODD_SCALARS, max_size=4),
    st.dictionaries(st.text(max_size=3), st.lists(_ODD_SCALARS, max_size=2), max_size=2),
    st.dictionaries(st.integers(), _ODD_SCALARS, max_size=2),
    st.lists(_ODD_SCALARS, max_size=2),
    st.text(max_size=4),
)


@given(st.sampled_from(["bash", " t ", "edit"]), _ARGS)
def test_facts_canonical_text_and_fingerprint_equal_the_definitions(name, args):
    clear_facts_cache()
    facts = call_facts(name, args, None, None)
    canonical = calls.canonical_call(name, args)
    assert facts.canonical == canonical
    assert facts.fingerprint == calls.operation_fingerprint(canonical)
    flat = calls.flat_json_object(args)
    assert calls.canonical_call(name, args, flat) == canonical
    assert _as_dict(CallFacts(name, canonical, args, None, None, flat)) == _as_dict(facts)
