"""Property: whatever frames arrive, ``clio-acp lsp`` stays up and answers every request
(issue 17; the 10,000-input run is ``bench/hostile_inputs.py``)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hostile import assert_answers_after_hostile_batch, lsp_message, start_peer

EXAMPLES = 40
_ids = itertools.count(1)
_probes = itertools.count(1)


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    server = start_peer("lsp", tmp_path_factory.mktemp("lsp-wire"))
    yield server
    server.close()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=False), count=st.integers(1, 25))
def test_any_frames_leave_the_server_answering_every_request(peer, rng, count) -> None:
    assert_answers_after_hostile_batch(peer, rng, count, _ids, f"probe-{next(_probes)}")


def test_notification_sent_as_a_request_is_answered(peer) -> None:
    # Regression: `initialized` with an id structured as a notification; no reply ever.
    assert peer.send(lsp_message({"jsonrpc": "2.0", "id": "n1", "method": "initialized",
                                  "params": {}}))  # fmt: skip
    assert peer.wait_for({"n1"}, 30) == set()


def test_message_shaped_object_inside_params_does_not_lose_the_request(peer) -> None:
    # Regression: json.loads' object_hook raised on the inner object; the request was lost.
    inner = {"jsonrpc": 0, "method": ["x"], "cwd": 1}
    message = {"jsonrpc": "2.0", "id": "n2", "method": "clio/memory", "params": {"x": inner}}
    assert peer.send(lsp_message(message))
    assert peer.wait_for({"n2"}, 30) == set()
