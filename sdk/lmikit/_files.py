"""Read an input file that a user named: a regular file, never more than a byte limit.

A spec or a model's ``config.json`` is named by whoever runs lmikit, so the name may point at a
FIFO (opening it for reading waits for a writer forever), a device such as ``/dev/zero``
(endless), a directory, or a file far larger than any real one. This module looks before it
reads: it ``stat``s the path (following symlinks), refuses anything but a regular file, opens
without blocking, checks again on the open descriptor, and reads at most ``limit + 1`` bytes.
Standard library only.

>>> read_limited("/dev/zero", 1000)
Traceback (most recent call last):
...
lmikit._files.FileRefused: the file is not a regular file (it is a character device)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_BINARY", 0))


class FileRefused(Exception):
    """Why a file was not read, as a sentence naming it the way the caller did (``what``)."""


def read_limited(path: str | Path, limit: int, what: str = "the file") -> bytes:
    """The bytes of the regular file at ``path``; :class:`FileRefused` if it is anything else
    or longer than ``limit`` bytes. ``what`` names the file in the message."""
    try:
        before = Path(path).stat()
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise FileRefused(f"cannot read {what}: {_reason(exc)}") from exc
    _check(before, limit, what)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise FileRefused(f"cannot read {what}: {_reason(exc)}") from exc
    try:
        _check(os.fstat(fd), limit, what)  # the path may have been swapped since the stat
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise FileRefused(f"cannot read {what}: {_reason(exc)}") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileRefused(f"{what} is larger than {limit:,} bytes")
    return data


def _check(st: os.stat_result, limit: int, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "an unknown kind")
        raise FileRefused(f"{what} is not a regular file (it is {kind})")
    if st.st_size > limit:
        raise FileRefused(f"{what} is {st.st_size:,} bytes; the limit is {limit:,}")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
