"""``clio-acp memory …``: the memory command group.

Verbs live in their own modules (``memory_parse``: the operator's envelope debugger;
the durable-record verbs: list, approve, reject, prune, promote). This module only
creates the group and asks each verb module to register itself.
"""

from __future__ import annotations

import argparse

from clio_acp.cli import memory_parse, memory_propose, memory_records

# One line per verb module; keep alphabetical to make merges trivial.
_VERB_MODULES: list = [
    memory_parse,
    memory_propose,
    memory_records,
]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``clio-acp memory VERB`` group to ``subparsers``; each verb module registers
    itself below it (no verb: help, exit 2)."""
    parser = subparsers.add_parser(
        "memory", help="task memory: parse envelopes, list/approve/reject durable records"
    )
    verbs = parser.add_subparsers(dest="memory_verb", metavar="VERB")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
    for module in _VERB_MODULES:
        module.register(verbs)
