"""The argument models of the LSP face's ``workspace/executeCommand`` commands.

One pydantic model per command's argument object (camelCase keys, unknown keys
rejected), validated by ``server._args``. They live apart from ``server.py`` so that
answering ``initialize`` does not build them: building any pydantic model loads
pydantic's schema machinery, which costs about a fifth of a bare pygls server's start
(issue 18, ``bench/startup.py``); the first command that parses arguments imports this
module.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel


class _Args(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class _TextDocument(_Args):
    uri: str


class _Position(_Args):
    line: int = Field(ge=0)
    character: int = Field(default=0, ge=0)


class _Range(_Args):
    start: _Position
    end: _Position


class PromptArgs(_Args):
    text: str = Field(min_length=1)
    session_id: str | None = None
    text_document: _TextDocument | None = None
    """The active document; named in the prompt so the agent knows where the user is."""
    position: _Position | None = None
    """The cursor (LSP ``Position``, 0-based)."""
    selection: _Range | None = None
    """The selection (LSP ``Range``, 0-based), when it is not empty."""


class SessionArgs(_Args):
    session_id: str | None = None


class LoadArgs(_Args):
    session_id: str = Field(min_length=1)


class NewSessionArgs(_Args):
    cwd: str | None = None
    mode: str | None = None


class ListArgs(_Args):
    cwd: str | None = None
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=500)


class RecordArgs(_Args):
    record_id: str = Field(min_length=1)


class PromoteArgs(_Args):
    entry_id: str = Field(min_length=1)
    scope: Literal["repo", "global"] = "repo"
    acknowledge_global: bool = False
    session_id: str | None = None


class ShowArgs(_Args):
    proposals: list[str] | None = None


class ProposeEventArgs(_Args):
    event: str = Field(min_length=1)
    """``SEQ`` (an event of the session) or ``SESSION:SEQ``."""
    scope: Literal["repo", "global"] = "repo"
    acknowledge_global: bool = False
    content: str | None = None
    session_id: str | None = None

    @field_validator("event", mode="before")
    @classmethod
    def _seq_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class WorkspaceArgs(_Args):
    session_id: str | None = None
    key: str | None = None
    offset: int = Field(default=0, ge=0)
    cursor: str | None = None
    max_chars: int | None = Field(default=None, ge=1, le=32_768)
