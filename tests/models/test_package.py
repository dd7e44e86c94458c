"""``clio_acp.models`` is lazy: the memory domain imports ``models.errors`` without
loading httpx or the client (ARCHITECTURE.md module map, "models/ (lazy __init__)")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import subprocess_env

_IMPORT_MEMORY = """
import importlib, pkgutil, sys
import clio_acp.memory as memory
for info in pkgutil.walk_packages(memory.__path__, "clio_acp.memory."):
    importlib.import_module(info.name)
import clio_acp.models.errors
print(",".join(sorted(m for m in ("httpx", "clio_acp.models.client") if m in sys.modules)))
"""


def test_importing_the_memory_domain_loads_no_httpx():
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_MEMORY],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == ""


def test_package_names_resolve_on_first_access():
    import clio_acp.models as models
    from clio_acp.models.client import ModelClient
    from clio_acp.models.routing import Router

    assert models.ModelClient is ModelClient
    assert models.Router is Router
    assert set(models.__all__) <= set(dir(models))


def test_unknown_package_name_is_an_attribute_error():
    import clio_acp.models as models

    with pytest.raises(AttributeError, match="no_such_name"):
        models.no_such_name  # noqa: B018
