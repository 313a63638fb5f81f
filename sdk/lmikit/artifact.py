"""Deterministic .tar.gz packaging: the same input gives the same bytes (stable hashes).

>>> a = deterministic_tar({"b.txt": b"2", "a.txt": b"1"})
>>> a == deterministic_tar({"a.txt": b"1", "b.txt": b"2"})
True
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from collections.abc import Mapping
from pathlib import Path

from lmikit.errors import LmikitError

MAX_FILE_BYTES = 2 * 1024**3


def deterministic_tar(files: Mapping[str, bytes]) -> bytes:
    """A gzip'd tar of ``files`` (archive path -> bytes) with fixed order, times and owners."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


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
