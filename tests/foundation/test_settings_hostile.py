"""Settings never crash a process (issue 17): any bytes, any depth, any environment
overlay; the live store keeps the last good settings and its watcher survives."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clio_acp.settings import (
    ENV_OVERRIDES,
    SETTINGS_JSON_ENV,
    Settings,
    SettingsError,
    SettingsStore,
    load_settings,
)
from tests.support.waiting import wait_until

EXAMPLES = 200

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)
_yaml_pieces = st.sampled_from(
    ["chat", "context", "memory", "targets", "enabled", "url", "id", ":", " ", "\n", "  ",
     "- ", "[", "]", "{", "}", "&a ", "*a", "!!binary ", "!!python/object ", "'", '"', "#",
     "\t", "\xe9", "2026-02-30", "9" * 10, "\\", ",", "?", "|", ">", "%YAML 1.1\n", "---\n"]
)  # fmt: skip


def _load_or_error(path, **kwargs) -> None:
    try:
        assert isinstance(load_settings(path, **kwargs), Settings)
    except SettingsError as exc:
        assert str(exc)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(raw=st.binary(max_size=400))
def test_any_bytes_in_the_file_load_or_give_a_settings_error(tmp_path, raw: bytes) -> None:
    path = tmp_path / "settings.yaml"
    path.write_bytes(raw)
    _load_or_error(path)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=st.lists(_yaml_pieces, max_size=40).map("".join))
def test_yaml_shaped_text_loads_or_gives_a_settings_error(tmp_path, text: str) -> None:
    path = tmp_path / "settings.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    _load_or_error(path)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    overlay=_json,
    values=st.dictionaries(
        st.sampled_from(sorted(ENV_OVERRIDES)), st.text(string.printable, max_size=12)
    ),
)
def test_any_environment_overlay_loads_or_gives_a_settings_error(tmp_path, overlay, values) -> None:
    env = {SETTINGS_JSON_ENV: json.dumps(overlay), **values}
    _load_or_error(tmp_path / "missing.yaml", env=env)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(overrides=_json)
def test_any_editor_overrides_keep_a_valid_store(tmp_path, overrides) -> None:
    store = SettingsStore(tmp_path / "missing.yaml", env={})
    accepted = store.set_overrides(overrides)
    assert isinstance(store(), Settings)
    assert accepted is (store.error is None)


def test_depth_and_alias_bombs_are_refused_by_name(tmp_path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text("x: " + "[" * 5000 + "]" * 5000 + "\n")
    _load_or_error(path)
    path.write_text("chat:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60)))
    try:
        load_settings(path)
    except SettingsError as exc:
        assert "levels deep" in exc.problem
    rows = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    rows += [
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]"
        for i in range(8)
    ]
    path.write_text("\n".join(rows) + "\n")
    try:
        load_settings(path)
        raise AssertionError("an alias bomb must be refused")
    except SettingsError as exc:
        assert "values" in exc.problem


def test_latin1_byte_in_a_comment_names_the_line(tmp_path) -> None:
    path = tmp_path / "settings.yaml"
    path.write_bytes(b"chat:\n  # caf\xe9\n  target: x\n")
    try:
        load_settings(path)
        raise AssertionError("must be refused")
    except SettingsError as exc:
        assert exc.line == 2 and "UTF-8" in exc.problem


async def _until(condition) -> None:
    """Wait until ``condition()`` holds (a store attribute with no event of its own)."""
    await wait_until(condition)


async def test_watcher_survives_bad_saves_and_applies_a_later_fix(tmp_path) -> None:
    path = tmp_path / "cfg" / "settings.yaml"
    path.parent.mkdir()
    store = SettingsStore(path, env={})
    applied: asyncio.Queue[Settings] = asyncio.Queue()
    store.subscribe(applied.put_nowait)
    stop = asyncio.Event()
    watcher = asyncio.create_task(store.watch(stop, debounce_ms=30))
    good = "context:\n  memory:\n    enabled: false\n"
    async with asyncio.timeout(20):
        while applied.empty():  # until the watcher is up and has seen a save
            path.write_text(good)
            with contextlib.suppress(AssertionError):
                await wait_until(lambda: not applied.empty(), timeout_s=0.2)
    for bad in (b"chat:\n  # caf\xe9\n", ("x: " + "[" * 3000).encode(), b"\xff\xfe\x00"):
        path.write_bytes(bad)
        await _until(lambda: store.error is not None)
        assert store().context.memory.enabled is False  # last good stays
        path.write_text(good)
        await _until(lambda: store.error is None)
    path.write_text("context:\n  memory:\n    enabled: true\n")
    await _until(lambda: store().context.memory.enabled is True)
    assert not watcher.done()
    stop.set()
    await asyncio.wait_for(watcher, timeout=10)


def test_a_fifo_or_device_is_refused_without_blocking(tmp_path) -> None:
    fifo = tmp_path / "settings.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        try:
            load_settings(path)
            raise AssertionError("must be refused")
        except SettingsError as exc:
            assert exc.problem == "not a regular file"
