"""Task files: key facts, distractor variants, the shipped task set (issue 15 item 3)."""

from __future__ import annotations

import re

import pytest

from clio_acp.eval.tasks import EvalTask, TaskError, load_task, load_tasks

TASK = {
    "id": "t",
    "keyFact": ["config\\.ini not found"],
    "turns": [{"prompt": "Run app.py; never edit app.py."}],
    "files": {"app.py": "print('Error: config.ini not found')\n", "notes.txt": "x"},
    "check": {"command": "grep -q 'config.ini not found' app.py"},
    "distractor": {
        "replace": {"config.ini not found": "cache is cold", "never edit": "always format"},
        "files": {"notes.txt": None, "extra.txt": "y"},
        "memory": [{"whenInputContains": "cold", "reply": "<operations>[]</operations>"}],
    },
    "scripted": {
        "turns": [{"steps": [{"run": "python3 app.py"}, {"say": "config.ini not found"}]}],
        "memory": [{"whenInputContains": "config.ini not found", "reply": "config.ini"}],
    },
}


def test_key_fact_needs_every_pattern_case_insensitively():
    task = EvalTask.model_validate({**TASK, "keyFact": ["config", "not found"]})
    assert task.key_fact_in("Memory: CONFIG.ini was Not Found twice")
    assert not task.key_fact_in("Memory: config.ini is fine")
    negative = EvalTask.model_validate({**TASK, "keyFact": []})
    assert negative.negative and not negative.key_fact_in("anything")


def test_the_distractor_variant_replaces_everything_but_id_key_fact_and_check():
    task = EvalTask.model_validate(TASK)
    variant = task.distractor_variant()
    assert variant is not None and variant.is_distractor and not task.is_distractor
    assert variant.id == "t" and variant.key_fact == task.key_fact
    assert variant.check.command == task.check.command  # the pass check is the same world
    assert variant.prompts == ["Run app.py; always format app.py."]
    assert variant.files == {"app.py": "print('Error: cache is cold')\n", "extra.txt": "y"}
    assert variant.scripted.turns[0].steps[1].say == "cache is cold"
    assert [r.when_input_contains for r in variant.scripted.memory] == ["cold"]
    assert task.files["notes.txt"] == "x"  # the original is untouched


def test_bad_key_facts_and_memory_settings_are_refused():
    with pytest.raises(ValueError, match="not a regex"):
        EvalTask.model_validate({**TASK, "keyFact": ["("]})
    with pytest.raises(ValueError, match="may not set target"):
        EvalTask.model_validate({**TASK, "memorySettings": {"target": "x"}})
    with pytest.raises(ValueError):
        EvalTask.model_validate({**TASK, "memorySettings": {"cadenceToolCalls": "often"}})
    with pytest.raises(ValueError, match="needs replace"):
        EvalTask.model_validate({**TASK, "distractor": {}})


def test_shipped_tasks_measure_content_in_every_category():
    tasks = load_tasks()
    assert len(tasks) >= 20
    assert all(t.distractor is not None and t.scripted is not None for t in tasks)
    llm_only = [t for t in tasks if t.expected_winners == ["llm"]]
    both = [t for t in tasks if set(t.expected_winners) == {"rules", "llm"}]
    negatives = [t for t in tasks if t.negative]
    assert len(both) >= 3 and len(negatives) >= 5
    kinds = {t.expected_signal for t in llm_only}
    # early diagnosis needed after compaction, a requirement without cue words, an
    # edit that silently fails to land
    assert {"post_compaction", "silent_edit"} <= kinds
    assert any(t.id.startswith("unkeyworded-requirement") for t in llm_only)
    assert any(t.id.startswith("early-diagnosis") for t in llm_only)
    for task in tasks:
        assert not task.negative or not task.expected_winners, task.id
        assert task.negative or task.expected_winners, task.id


def test_unkeyworded_requirements_carry_no_cue_the_rules_tier_reads():
    from clio_acp.memory.requirements import extract_requirements

    for task in load_tasks():
        if task.id.startswith("unkeyworded-requirement"):
            assert extract_requirements("\n".join(task.prompts)) == [], task.id


def test_key_facts_do_not_match_their_distractor_memory():
    for task in load_tasks():
        variant = task.distractor_variant()
        replies = " ".join(r.reply for r in variant.scripted.memory)
        assert not task.key_fact_in(replies), task.id
        for pattern in task.key_fact:
            assert not re.search(pattern, "run_command failed", re.IGNORECASE), task.id


def test_a_task_file_with_a_bad_distractor_names_the_field(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(
        "id: x\nturns: [{prompt: go}]\ncheck: {command: 'true'}\ndistractor: {replace: 3}\n"
    )
    with pytest.raises(TaskError, match="distractor"):
        load_task(path)
