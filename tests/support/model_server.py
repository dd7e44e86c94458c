"""The scripted model server for tests: a re-export of ``clio_acp.models.scripted``
(product code since issue 10, where ``clio-acp eval ab --scripted`` uses it).

Standalone mode still works: ``python -m tests.support.model_server --script …``.
"""

from __future__ import annotations

import sys

from clio_acp.models.scripted import (
    DEFAULT_MODEL,
    TARGET_ID,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    ToolCall,
    busy,
    main,
    running_server,
    usage,
)

__all__ = [
    "DEFAULT_MODEL",
    "TARGET_ID",
    "RecordedRequest",
    "Reply",
    "ScriptedModelServer",
    "ToolCall",
    "busy",
    "main",
    "running_server",
    "usage",
]

if __name__ == "__main__":
    sys.exit(main())
