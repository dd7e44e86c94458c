"""Each default is stated once, in ``clio_acp.settings``, and every module that needs
it uses that constant (MEMORY_SPEC §11.3: two defaults once disagreed). Changing a
constant in settings.py must change every use; a module that restates a literal
fails here."""

from __future__ import annotations

import dataclasses
import inspect

from clio_acp import settings as s
from clio_acp.agent.turn import ContextRules, TurnLimits
from clio_acp.cli import build_parser
from clio_acp.context.compaction import should_compact
from clio_acp.context.spill import needs_spill
from clio_acp.memory.gates import GateInput
from clio_acp.memory.policy import TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS, PolicyInput
from clio_acp.models.targets import Target
from clio_acp.session.manager import SessionManager


def _default(func, name: str):
    return inspect.signature(func).parameters[name].default


def _field_default(cls, name: str):
    return {f.name: f.default for f in dataclasses.fields(cls)}[name]


def test_settings_fields_use_the_constants():
    context = s.Settings().context
    assert context.compaction_trigger_ratio == s.COMPACTION_TRIGGER_RATIO_DEFAULT == 0.8
    assert context.compaction_retain_ratio == s.COMPACTION_RETAIN_RATIO_DEFAULT == 0.5
    assert context.spill_threshold_bytes == s.SPILL_THRESHOLD_BYTES_DEFAULT == 8192
    assert context.memory.timeout_ms == s.MEMORY_TIMEOUT_MS_DEFAULT == 60_000
    assert context.memory.max_output_tokens == s.MEMORY_MAX_OUTPUT_TOKENS_DEFAULT == 2000
    target = s.TargetSettings(id="t", runtime="openai", url="http://127.0.0.1:1/v1")
    assert target.request_timeout_ms == s.REQUEST_TIMEOUT_MS_DEFAULT == 300_000


def test_the_agent_loop_uses_the_settings_defaults():
    rules = ContextRules()
    assert rules.trigger_ratio == s.COMPACTION_TRIGGER_RATIO_DEFAULT
    assert rules.retain_ratio == s.COMPACTION_RETAIN_RATIO_DEFAULT
    assert rules.spill_threshold_bytes == s.SPILL_THRESHOLD_BYTES_DEFAULT
    assert TurnLimits().max_turn_requests == s.MAX_TURN_REQUESTS_DEFAULT == 50


def test_context_helpers_use_the_settings_defaults():
    assert _default(should_compact, "trigger_ratio") == s.COMPACTION_TRIGGER_RATIO_DEFAULT
    assert _default(needs_spill, "threshold_bytes") == s.SPILL_THRESHOLD_BYTES_DEFAULT
    at_threshold = "x" * s.SPILL_THRESHOLD_BYTES_DEFAULT
    assert not needs_spill(at_threshold) and needs_spill(at_threshold + "x")


def test_session_manager_and_cli_use_the_turn_request_default():
    assert _default(SessionManager.__init__, "max_turn_requests") == s.MAX_TURN_REQUESTS_DEFAULT
    args = build_parser("run").parse_args(["run", "hello"])
    assert args.max_requests == s.MAX_TURN_REQUESTS_DEFAULT


def test_memory_policy_uses_the_memory_defaults():
    assert TASK_MEMORY_POLICY_DEFAULT_TIMEOUT_MS == s.MEMORY_TIMEOUT_MS_DEFAULT
    assert _field_default(PolicyInput, "max_tokens") == s.MEMORY_MAX_OUTPUT_TOKENS_DEFAULT
    assert _field_default(GateInput, "max_tokens") == s.MEMORY_MAX_OUTPUT_TOKENS_DEFAULT


def test_model_targets_use_the_request_timeout_default():
    assert _field_default(Target, "request_timeout_ms") == s.REQUEST_TIMEOUT_MS_DEFAULT


def test_the_chat_model_window_defaults_to_the_settings_constant():
    from clio_acp.agent.model_port import resolve_chat_model
    from clio_acp.paths import resolve_paths

    model = resolve_chat_model(s.Settings(), paths=resolve_paths())
    assert model.context_window == s.CONTEXT_WINDOW_DEFAULT == 32_768
