"""What a tool call returns: the model-visible text, display extras for the faces, and
the canonical disposition (ok/error, exit code, digest, output hash) that the memory
middleware reads (MEMORY_SPEC §4, §11 item 10)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

DIGEST_MAX_CHARS = 240
"""A disposition digest is cut to this many characters (``…`` included)."""
_PROBLEM_RE = re.compile(
    r"error|failed|failure|cannot|unable|expected|refused|denied|missing|not found|"
    r"timed out|timeout|fatal",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ToolDisposition:
    """The canonical outcome of one tool call, read by the memory middleware (§4).

    ``ok`` false means ``metadata.resultKind == "error"``. ``digest`` is one line that
    names the problem (errors) or ``"ok"``; ``output_sha`` is the first 16 hex chars of
    the sha256 of the full output. ``exit_code`` is set for commands only.
    """

    ok: bool
    digest: str
    exit_code: int | None = None
    output_sha: str = ""

    @property
    def result_kind(self) -> Literal["ok", "error"]:
        """``"ok"`` or ``"error"`` (MEMORY_SPEC §4 ``metadata.resultKind``)."""
        return "ok" if self.ok else "error"

    def to_dict(self) -> dict[str, Any]:
        """``{resultKind, exitCode, digest, outputSha}`` as journaled and handed to the memory
        middleware."""
        return {
            "resultKind": self.result_kind,
            "exitCode": self.exit_code,
            "digest": self.digest,
            "outputSha": self.output_sha,
        }


@dataclass
class ToolResult:
    """What a tool returns: the text for the model plus display extras for the faces."""

    output: str
    disposition: ToolDisposition
    diff: str | None = None
    path: str | None = None
    old_text: str | None = None
    new_text: str | None = None


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def ok_result(output: str, *, exit_code: int | None = None, **extras: Any) -> ToolResult:
    """A successful result: digest ``"ok"``; ``extras`` are ``ToolResult`` display
    fields (``diff``, ``path``, ``old_text``, ``new_text``)."""
    return ToolResult(
        output=output,
        disposition=ToolDisposition(True, "ok", exit_code, _sha16(output)),
        **extras,
    )


def error_result(
    message: str, *, exit_code: int | None = None, output: str | None = None
) -> ToolResult:
    """A failed result: ``message`` (whitespace folded, cut to ``DIGEST_MAX_CHARS``) is
    the digest; the model sees ``output`` when given, else ``"Error: <message>"``."""
    text = output if output is not None else f"Error: {message}"
    return ToolResult(
        output=text,
        disposition=ToolDisposition(False, _cap(message), exit_code, _sha16(text)),
    )


def _cap(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DIGEST_MAX_CHARS else text[: DIGEST_MAX_CHARS - 1] + "…"


def problem_line(*texts: str) -> str:
    """The first non-empty line naming a problem across ``texts``, else the last
    non-empty line of the first text that has one (MEMORY_SPEC §11 item 10)."""
    for text in texts:
        for line in text.splitlines():
            if line.strip() and _PROBLEM_RE.search(line):
                return line.strip()
    for text in texts:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""
