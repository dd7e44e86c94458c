"""Evaluation: the A/B harness of ``clio-acp eval ab`` (MEMORY_SPEC §9) and the
replay report helpers of ``clio-acp replay --html / --compare-pma`` (issue 10).

Floor: above the session core (``clio_acp.session``) and the replay
(``clio_acp.agent.replay``); below the CLI. Submodules: ``report`` (arithmetic and
verdict), ``tasks`` (task files), ``scripted_agent`` (the built-in deterministic
model), ``harness`` (the matrix and the session runner), ``replay_html`` and ``pma``.
"""
