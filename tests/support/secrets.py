"""The synthetic secret corpus (tests/data/secrets/corpus.json) and a leak check for sinks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CORPUS_FILE = Path(__file__).resolve().parents[1] / "data" / "secrets" / "corpus.json"


@dataclass(frozen=True)
class SecretSample:
    format: str
    text: str
    secret: str


@cache
def corpus() -> tuple[SecretSample, ...]:
    rows = json.loads(CORPUS_FILE.read_text(encoding="utf-8"))["formats"]
    return tuple(SecretSample(r["format"], r["text"], r["secret"]) for r in rows)


def secret_fragments(secret: str) -> list[str]:
    """The secret and, for long ones, every 12-character window at a 4-char stride:
    a sink that kept part of a token leaks too."""
    if len(secret) < 16:
        return [secret]
    return [secret] + [secret[i : i + 12] for i in range(0, len(secret) - 11, 4)]


def leaked(haystack: str, samples: tuple[SecretSample, ...] | None = None) -> list[str]:
    """Format names whose secret (or a fragment of it) occurs in ``haystack``."""
    found = []
    for sample in samples if samples is not None else corpus():
        if any(fragment in haystack for fragment in secret_fragments(sample.secret)):
            found.append(sample.format)
    return found
