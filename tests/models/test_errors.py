"""The error classes the memory policy and the agent loop branch on (MEMORY_SPEC §3
step 7, §10 route safety)."""

from __future__ import annotations

from clio_acp.models.errors import (
    EndpointBusyError,
    MalformedStreamError,
    ModelClientError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)


def test_model_timeout_is_caught_as_builtin_timeout_error():
    assert isinstance(ModelTimeoutError("deadline", timeout_ms=5), TimeoutError)


def test_only_route_failures_are_fallback_eligible_client_errors():
    assert isinstance(ModelConnectionError("refused"), ModelClientError)
    assert isinstance(ModelHTTPError("bad", status=400), ModelClientError)
    for exc in (
        EndpointBusyError("busy", status=429),
        ModelTimeoutError("t"),
        MalformedStreamError("cut"),
    ):
        assert not isinstance(exc, ModelClientError)
