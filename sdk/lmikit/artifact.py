"""Deterministic .tar.gz packaging: the same input gives the same bytes (stable hashes).

The archive is written as a stream (:func:`write_deterministic_tar`): members are copied from
their sources a buffer at a time, and :class:`ArtifactFile` keeps the compressed bytes in an
anonymous temporary file while it hashes them, so packaging a multi-gigabyte adapter holds a
few megabytes in memory, not the adapter. :func:`deterministic_tar` is the same writer over
bytes held in memory; both give identical bytes for identical files.

>>> a = deterministic_tar({"b.txt": b"2", "a.txt": b"1"})
>>> a == deterministic_tar({"a.txt": b"1", "b.txt": b"2"})
True
>>> with ArtifactFile.build([TarMember.from_bytes("a.txt", b"1"),
...                          TarMember.from_bytes("b.txt", b"2")]) as art:
...     art.read() == a and art.sha256 == sha256_hex(a)
True
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import tempfile
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, BinaryIO, cast

from lmikit.errors import LmikitError

MAX_FILE_BYTES = 2 * 1024**3
COMPRESS_LEVEL = 6
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class TarMember:
    """One archive member: its name, its size and how to open its bytes (called once)."""

    name: str
    size: int
    open: Callable[[], BinaryIO]

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> TarMember:
        return cls(name, len(data), lambda: io.BytesIO(data))


def write_deterministic_tar(members: Iterable[TarMember], out: IO[bytes]) -> None:
    """Write a gzip'd tar of ``members`` to ``out`` with fixed order, times and owners.

    Members are sorted by name; each is copied in buffer-sized pieces. A member whose source
    yields fewer bytes than its ``size`` raises :class:`LmikitError` (it changed while being
    packaged).
    """
    # filename="" keeps the output's name (a temporary file's, say) out of the gzip header
    with gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0,
                       compresslevel=COMPRESS_LEVEL) as gz, \
            tarfile.TarFile(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT,
                            copybufsize=CHUNK_BYTES) as tar:
        for member in sorted(members, key=lambda m: m.name):
            info = tarfile.TarInfo(member.name)
            info.size = member.size
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            source = member.open()
            try:
                tar.addfile(info, source)
            except OSError as exc:  # tarfile: "unexpected end of data"
                raise LmikitError(f"{member.name!r} changed while it was being packaged "
                                  f"({exc}); package it again") from exc
            finally:
                source.close()


def deterministic_tar(files: Mapping[str, bytes]) -> bytes:
    """A gzip'd tar of ``files`` (archive path -> bytes) with fixed order, times and owners."""
    out = io.BytesIO()
    write_deterministic_tar((TarMember.from_bytes(n, d) for n, d in files.items()), out)
    return out.getvalue()


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``sink``."""

    def __init__(self, sink: IO[bytes]) -> None:
        self.sink = sink
        self.digest = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        view = memoryview(data)
        self.digest.update(view)
        self.sink.write(view)
        self.size += len(view)
        return len(view)


class ArtifactFile:
    """A deterministic .tar.gz held in an anonymous temporary file, with its sha256.

    Built in one pass (:meth:`build`): the archive is compressed and hashed as it is written,
    so the key of a content-addressed upload is known before the upload starts, and the
    upload can stream :meth:`chunks`. Close it (or use ``with``) to free the disk space at
    once; it is freed when the object is garbage-collected otherwise.
    """

    def __init__(self, handle: IO[bytes], sha256: str, size: int) -> None:
        self._handle = handle
        self.sha256 = sha256
        self.size = size
        # closed (and its disk space freed) when the object goes, if no one closed it
        self._finalizer = weakref.finalize(self, handle.close)

    @classmethod
    def build(cls, members: Iterable[TarMember], directory: str | Path | None = None
              ) -> ArtifactFile:
        handle = tempfile.TemporaryFile(prefix="lmikit-artifact-", dir=directory)
        try:
            hashing = _Hashing(handle)
            write_deterministic_tar(members, cast(IO[bytes], hashing))
            handle.flush()
        except BaseException:
            handle.close()
            raise
        return cls(handle, hashing.digest.hexdigest(), hashing.size)

    def chunks(self, size: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The archive's bytes, ``size`` at a time."""
        self._handle.seek(0)
        while True:
            piece = self._handle.read(size)
            if not piece:
                return
            yield piece

    def read(self) -> bytes:
        """The whole archive in memory (small artifacts, tests)."""
        return b"".join(self.chunks())

    def open(self) -> BinaryIO:
        """A reader over the archive from its start; closing it leaves the archive open (an
        upload that is tried again reads it again)."""
        self._handle.seek(0)
        return os.fdopen(os.dup(self._handle.fileno()), "rb")

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> ArtifactFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def directory_files(root: str | Path, prefix: str = "") -> dict[str, bytes]:
    """Every regular file below ``root`` as archive path -> bytes (symlinks refused)."""
    base = Path(root)
    if not base.is_dir():
        raise LmikitError(f"{str(base)!r} is not a directory")
    files: dict[str, bytes] = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.is_symlink():
            raise LmikitError(f"{rel!r} in {str(base)!r} is a symlink; package real files only")
        if path.is_dir() or "__pycache__" in path.parts or path.name == ".DS_Store":
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            raise LmikitError(f"{rel!r} is larger than {MAX_FILE_BYTES} bytes")
        files[f"{prefix}{rel}"] = path.read_bytes()
    return files


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
