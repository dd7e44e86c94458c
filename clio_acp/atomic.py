"""Atomic file writes (ARCHITECTURE.md invariant 8): the one helper every durable file
goes through.

A write goes to a temporary file in the destination's own folder (so the rename never
crosses a file system), is flushed and fsynced, renamed over the destination with
``os.replace`` and then the folder is fsynced, so that after a crash the path holds
either the old bytes or the new ones, never a mix and never nothing. Serializing
writers across processes is the caller's business (``filelock`` around the call).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    *,
    binary: bool = False,
    errors: str = "strict",
    temp_prefix: str | None = None,
) -> Iterator[IO[Any]]:
    """Open a temporary file that replaces ``path`` when the ``with`` block exits.

    Text mode writes UTF-8 with ``\\n`` line ends (``errors`` as for ``open``, e.g.
    ``"surrogateescape"`` to carry undecodable bytes through unchanged); ``binary=True``
    yields a bytes handle. The temporary file is ``<temp_prefix><random>.tmp`` in the
    same folder (default prefix ``.<name>.``, hidden). When the block raises, the
    destination is untouched and the temporary file removed. Raises ``OSError`` when
    the folder does not exist or cannot be written. Blocking I/O: async callers use
    ``asyncio.to_thread``.
    """
    path = Path(path)
    directory = path.parent
    prefix = temp_prefix if temp_prefix is not None else f".{path.name}."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        if binary:
            handle: IO[Any] = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding="utf-8", errors=errors, newline="\n")
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(directory)


def write_atomic(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    errors: str = "strict",
    temp_prefix: str | None = None,
) -> None:
    """Replace the contents of ``path`` with ``data`` (``str`` as UTF-8, or ``bytes``)
    atomically; see ``atomic_open`` for the steps, ``errors`` and the temp name.

    Raises ``OSError`` when the folder does not exist or cannot be written (the
    destination is then untouched) and ``UnicodeEncodeError`` for text that
    ``errors`` cannot encode.
    """
    if isinstance(data, bytes):
        with atomic_open(path, binary=True, temp_prefix=temp_prefix) as out:
            out.write(data)
    else:
        with atomic_open(path, errors=errors, temp_prefix=temp_prefix) as out:
            out.write(data)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename inside ``directory`` durable (POSIX ``fsync`` of the folder).

    Best effort: platforms or file systems that cannot open or fsync a folder
    (Windows, some network mounts) are skipped silently.
    """
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
