"""clio_acp: a coding-agent backend for editors with proactive task memory.

The package is layered (ARCHITECTURE.md): faces (``acp``, ``lsp``, ``cli``) on top,
then ``session``, ``agent``, ``memory`` and ``models``, with ``settings``, ``paths``
and ``context`` at the bottom. Imports point downward only.
"""

from __future__ import annotations

__version__ = "0.1.0"
