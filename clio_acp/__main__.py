"""``python -m clio_acp`` runs the same CLI as the ``clio-acp`` console script."""

from __future__ import annotations

from clio_acp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
