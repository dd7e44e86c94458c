"""The model CLI commands, run in process (``invoke_cli``): targets [--probe], models,
settings, doctor, local status (issue 5 item 5)."""

from __future__ import annotations

import json


def test_targets_probe_reports_reachability_models_and_capacity(model_server, invoke_cli):
    model_server.models = ["qwen3-4b", "smol"]
    model_server.props = {"total_slots": 4}
    model_server.install_settings(max_concurrent_requests=None)
    result = invoke_cli("targets", "--probe", "--json")
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["targets"]
    assert row["id"] == "scripted" and row["reachable"] is True
    assert row["models"] == ["qwen3-4b", "smol"]
    assert row["discoveredSlots"] == 4 and row["capacity"] == 4
    assert row["capacitySource"] == "discovered"
    assert "chat(scripted-model)" in row["roles"]


def test_targets_probe_of_a_dead_target_exits_1(invoke_cli, isolated_dirs):
    (isolated_dirs["config"] / "settings.yaml").write_text(
        "targets:\n  - id: dead\n    runtime: ollama\n    url: http://127.0.0.1:9/v1\n"
    )
    result = invoke_cli("targets", "--probe")
    assert result.returncode == 1
    assert "UNREACHABLE" in result.stdout


def test_models_lists_a_targets_models(model_server, invoke_cli):
    model_server.models = ["m1", "m2"]
    model_server.install_settings()
    result = invoke_cli("models", "--target", "scripted")
    assert result.returncode == 0 and result.stdout.split() == ["m1", "m2"]
    assert invoke_cli("models", "--target", "nope").returncode == 2


def test_settings_path_and_show(invoke_cli, isolated_dirs):
    path = invoke_cli("settings", "path").stdout.strip()
    assert path == str(isolated_dirs["config"] / "settings.yaml")
    (isolated_dirs["config"] / "settings.yaml").write_text(
        "context:\n  memory:\n    trajectorySteps: 3\n"
    )
    shown = json.loads(invoke_cli("settings", "show", "--json").stdout)
    assert shown["settings"]["context"]["memory"]["trajectorySteps"] == 3


def test_settings_show_names_key_and_line_of_a_bad_file_and_exits_1(invoke_cli, isolated_dirs):
    (isolated_dirs["config"] / "settings.yaml").write_text("chat:\n  target: a\n  modle: x\n")
    result = invoke_cli("settings", "show")
    assert result.returncode == 1
    assert "line 3" in result.stderr and "chat.modle" in result.stderr


def test_environment_overrides_reach_settings_show(invoke_cli):
    result = invoke_cli("settings", "show", "--json", env={"CLIO_ACP_MEMORY_ENABLED": "false"})
    assert json.loads(result.stdout)["settings"]["context"]["memory"]["enabled"] is False


def test_doctor_reports_versions_paths_routes_and_embedded_status(
    model_server, invoke_cli, isolated_dirs
):
    model_server.install_settings()
    report = json.loads(invoke_cli("doctor", "--json").stdout)
    assert report["packages"]["httpx"]
    assert report["paths"]["config"] == str(isolated_dirs["config"])
    assert report["routes"]["chat"] == {"target": "scripted", "model": "scripted-model"}
    assert report["targets"][0]["id"] == "scripted"
    assert set(report["embedded"]) >= {"installed", "model", "server"}
    assert "probe" not in report["targets"][0]  # offline by default
    text = invoke_cli("doctor").stdout
    assert "route chat: scripted / scripted-model" in text


def test_doctor_says_the_llm_tier_is_opt_in(model_server, invoke_cli, isolated_dirs):
    model_server.install_settings(memory=False)
    report = json.loads(invoke_cli("doctor", "--json").stdout)
    assert report["routes"]["memory"] is None and report["memoryTier"] == "rules"
    text = invoke_cli("doctor").stdout
    assert "LLM tier off (opt-in: set context.memory.target)" in text
    assert "route memory: unset (opt-in" in text
    model_server.install_settings(memory=True)
    report = json.loads(invoke_cli("doctor", "--json").stdout)
    assert report["memoryTier"] == "llm"
    assert report["routes"]["memory"]["target"] == "scripted"


def test_local_status_reports_a_missing_model(invoke_cli, isolated_dirs):
    result = invoke_cli("local", "status", "--json")
    assert result.returncode == 1
    status = json.loads(result.stdout)
    assert status["installed"] is False and status["modelInstalled"] is False
    assert status["model"].startswith(str(isolated_dirs["data"]))
