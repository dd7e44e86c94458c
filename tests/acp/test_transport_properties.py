"""Property: whatever lines arrive, ``clio-acp acp`` stays up and answers every request
(issue 17; the 10,000-input run is ``bench/hostile_inputs.py``)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hostile import assert_answers_after_hostile_batch, probe, start_peer

EXAMPLES = 40
_ids = itertools.count(1)
_probes = itertools.count(1)


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    server = start_peer("acp", tmp_path_factory.mktemp("acp-wire"))
    yield server
    server.close()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False), count=st.integers(1, 25))
def test_any_lines_leave_the_agent_answering_every_request(peer, rng, count) -> None:
    assert_answers_after_hostile_batch(peer, rng, count, _ids, f"probe-{next(_probes)}")


def test_deep_json_line_is_a_parse_error_not_a_crash(peer) -> None:
    # Regression: RecursionError from json.loads used to end the receive loop.
    assert peer.send(b"[" * 20000 + b"]" * 20000 + b"\n")
    assert probe(peer, "after-deep")
    assert peer.alive()


def test_lone_surrogate_echoed_in_an_error_is_still_sent(peer) -> None:
    # Regression: an error echoing "\ud800" from the params failed to encode; no reply.
    line = json.dumps({"jsonrpc": "2.0", "id": "sur", "method": "session/load",
                       "params": {"sessionId": "\ud800", "cwd": "/tmp", "mcpServers": []}})  # fmt: skip
    assert peer.send(line.encode() + b"\n")
    assert peer.wait_for({"sur"}, 30) == set()
