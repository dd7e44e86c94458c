"""argparse ``type=`` converters shared by the commands."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1 (a count, a limit). Raises ``argparse.ArgumentTypeError`` (a
    usage error, exit 2) for anything else."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
