"""Task memory: the session task bank, envelope parser, policy step, rules tier,
middleware, telemetry, durable store, promotion, handoff and redaction.

Contract: ``shared/design/MEMORY_SPEC.md``. This package must not import a face,
pygls or the ACP SDK, and must work with no network and no model.
"""
