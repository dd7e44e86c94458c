from __future__ import annotations

import json

from clio_acp.paths import resolve_paths


def test_env_overrides_each_root(tmp_path):
    env = {
        f"CLIO_ACP_{k.upper()}_DIR": str(tmp_path / k) for k in ("data", "state", "config", "cache")
    }
    paths = resolve_paths(env)
    assert paths.data == tmp_path / "data"
    assert paths.records_file == tmp_path / "data" / "memory" / "records.json"
    assert paths.steps_file == tmp_path / "state" / "memory" / "steps.jsonl"
    assert paths.settings_file == tmp_path / "config" / "settings.yaml"


def test_empty_override_falls_back_to_platformdirs():
    paths = resolve_paths({"CLIO_ACP_DATA_DIR": ""})
    assert paths.data.is_absolute()
    assert "clio-acp" in str(paths.data)


def test_paths_json_command_prints_the_four_roots(invoke_cli, isolated_dirs):
    result = invoke_cli("paths", "--json")
    assert result.returncode == 0, result.stderr
    roots = json.loads(result.stdout)
    assert set(roots) == {"data", "state", "config", "cache"}
    assert roots["state"] == str(isolated_dirs["state"])


def test_no_command_is_a_usage_error(invoke_cli):
    result = invoke_cli()
    assert result.returncode == 2
    assert result.stdout == ""
