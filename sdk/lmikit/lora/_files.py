"""Which files of an adapter directory are packaged: a walk that never opens what it should not.

An adapter directory is named by whoever runs lmikit and may hold anything: a FIFO (opening it
waits forever), a device, a socket, a symlink or hard link to a file elsewhere (``~/.aws``,
``/etc``), a ``.git`` folder, keys and tokens. The walk ``lstat``s every entry and never
follows a link before checking where it leads:

- regular files are packaged, opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again on the
  open descriptor (same file, still regular);
- a symlink to a regular file INSIDE the directory is followed and its target's bytes are
  packaged under the link's name (a Hugging Face ``local_dir`` download may link files to each
  other); a symlink to anything outside the directory, to a directory, or that dangles is
  refused;
- a regular file with hard links outside the directory (more links than names found in it)
  is refused;
- FIFOs, sockets and devices are refused without being opened;
- names that are secrets or clutter (:data:`DEFAULT_EXCLUDES`) are left out and listed,
  unless an ``include`` pattern names them.

Standard library only.

>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "adapter_config.json").write_text("{}")
>>> _ = (d / ".env").write_text("TOKEN=x")
>>> found = scan_adapter_dir(d)
>>> [f.name for f in found.files], found.excluded
(['adapter_config.json'], ('.env',))
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

# Left out of every adapter package unless `include` names them: secrets (keys, tokens,
# credentials, cloud and SSH configs), version control and Python/OS clutter. Patterns match
# one path component (a file or a folder, whose contents are then skipped) with fnmatch.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git", ".hg", ".svn", ".gitignore", ".gitattributes",
    ".env", ".env.*", "*.env",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".ssh",
    ".aws", "credentials", ".netrc", ".npmrc", ".pypirc", ".docker", ".kube",
    ".huggingface", ".cache",
    "__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store", "Thumbs.db",
)
MAX_FILES = 10_000  # entries of every kind a walk meets before it stops
MAX_DEPTH = 32
MAX_FILE_BYTES = 2 * 1024**3
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


@dataclass(frozen=True)
class AdapterFile:
    """A regular file to package: its archive name, where its bytes are, and what it was."""

    name: str
    path: Path  # the file itself, or a symlink's target inside the directory
    size: int
    device: int
    inode: int

    def open(self) -> BinaryIO:
        """Open for reading without following a link or waiting on a FIFO; the descriptor
        must still be the regular file the walk found (else OSError)."""
        fd = os.open(self.path, _OPEN_FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (self.device,
                                                                          self.inode):
                raise OSError(f"{self.name!r} was replaced while it was being packaged")
            if st.st_size != self.size:
                raise OSError(f"{self.name!r} changed size while it was being packaged")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise

    def read(self, limit: int) -> bytes:
        """At most ``limit`` bytes from the start of the file."""
        with self.open() as handle:
            return handle.read(limit)


@dataclass(frozen=True)
class AdapterFiles:
    """What the walk found: files to package, what was left out, and what was refused."""

    files: tuple[AdapterFile, ...] = ()
    excluded: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    followed_links: tuple[str, ...] = field(default=())

    def get(self, name: str) -> AdapterFile | None:
        return next((f for f in self.files if f.name == name), None)


def excluded_by(name: str, rel: str, include: Iterable[str]) -> str | None:
    """The default pattern that leaves out path component ``name`` (at ``rel``), or None when
    none does or an ``include`` pattern names it (matched against the name and the path)."""
    rule = next((p for p in DEFAULT_EXCLUDES if fnmatch.fnmatchcase(name, p)), None)
    if rule is None:
        return None
    if any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(rel, p.rstrip("/"))
           for p in include):
        return None
    return rule


def scan_adapter_dir(root: str | Path, include: Iterable[str] = ()) -> AdapterFiles:
    """Walk ``root`` (see the module's rules); never opens a file."""
    base = Path(root)
    include = tuple(include)
    try:
        real_root = Path(os.path.realpath(base))
        st = base.stat()
    except (OSError, ValueError) as exc:
        return AdapterFiles(problems=(f"cannot read the adapter directory: {_reason(exc)}",))
    if not stat.S_ISDIR(st.st_mode):
        return AdapterFiles(problems=("the adapter source is not a directory",))
    walk = _Walk(base, real_root, include)
    try:
        walk.visit(base, "", 0)
    except _WalkEnd:
        pass
    walk.check_hard_links()
    files = tuple(sorted(walk.files, key=lambda f: f.name))
    return AdapterFiles(files, tuple(walk.excluded), tuple(walk.problems),
                        tuple(walk.followed))


class _WalkEnd(Exception):
    """The walk met MAX_FILES entries: it stops everywhere, not only in that folder."""


class _Walk:
    def __init__(self, base: Path, real_root: Path, include: tuple[str, ...]) -> None:
        self.base, self.real_root, self.include = base, real_root, include
        self.files: list[AdapterFile] = []
        self.excluded: list[str] = []
        self.problems: list[str] = []
        self.followed: list[str] = []
        self.names: dict[tuple[int, int], int] = {}  # (dev, ino) -> names found inside
        self.links: dict[tuple[int, int], int] = {}  # (dev, ino) -> st_nlink
        self.names_of: dict[tuple[int, int], str] = {}
        self.seen = 0  # entries met so far

    def visit(self, folder: Path, prefix: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.problems.append(f"{prefix or '.'}: folders nest deeper than {MAX_DEPTH} levels")
            return
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.problems.append(f"{prefix or '.'}: cannot list the folder: {_reason(exc)}")
            return
        for entry in entries:
            self.seen += 1
            if self.seen > MAX_FILES:  # files, folders, links, refusals: a bounded walk
                self.problems.append(f"more than {MAX_FILES:,} entries; an adapter has a few "
                                     "files (the walk stopped there)")
                raise _WalkEnd
            rel = f"{prefix}{entry.name}"
            if excluded_by(entry.name, rel, self.include):
                self.excluded.append(rel + ("/" if entry.is_dir(follow_symlinks=False) else ""))
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                self.problems.append(f"{rel}: cannot read it: {_reason(exc)}")
                continue
            if stat.S_ISDIR(st.st_mode):
                self.visit(Path(entry.path), rel + "/", depth + 1)
            elif stat.S_ISLNK(st.st_mode):
                self._link(Path(entry.path), rel)
            elif stat.S_ISREG(st.st_mode):
                self._regular(Path(entry.path), rel, st)
            else:
                kind = next((n for test, n in _KINDS if test(st.st_mode)), "not a regular file")
                self.problems.append(f"{rel}: is {kind}; an adapter holds regular files only")

    def _link(self, path: Path, rel: str) -> None:
        target = Path(os.path.realpath(path))
        if target != self.real_root and self.real_root not in target.parents:
            self.problems.append(f"{rel}: is a symlink to {str(target)!r}, outside the adapter "
                                 "directory; copy the file in (a Hugging Face download: use "
                                 "local_dir)")
            return
        inner = target.relative_to(self.real_root).as_posix()
        parts = inner.split("/")
        if any(excluded_by(p, "/".join(parts[:i + 1]), self.include)
               for i, p in enumerate(parts)):
            self.excluded.append(f"{rel} (a symlink to {inner})")
            return
        try:
            st = target.lstat()
        except OSError as exc:
            self.problems.append(f"{rel}: is a symlink that cannot be followed: "
                                 f"{_reason(exc)}")
            return
        if not stat.S_ISREG(st.st_mode):
            self.problems.append(f"{rel}: is a symlink to something that is not a regular file "
                                 "(links to files inside the directory are followed; links to "
                                 "folders are not)")
            return
        self.followed.append(rel)
        self._regular(target, rel, st, counted=False)

    def _regular(self, path: Path, rel: str, st: os.stat_result, counted: bool = True) -> None:
        if st.st_size > MAX_FILE_BYTES:
            self.problems.append(f"{rel}: is {st.st_size:,} bytes; the limit is "
                                 f"{MAX_FILE_BYTES:,}")
            return
        key = (st.st_dev, st.st_ino)
        if counted:
            self.names[key] = self.names.get(key, 0) + 1
            self.links[key] = st.st_nlink
            self.names_of.setdefault(key, rel)
        self.files.append(AdapterFile(rel, path, st.st_size, st.st_dev, st.st_ino))

    def check_hard_links(self) -> None:
        for key, links in self.links.items():
            inside = self.names[key]
            if links > inside:
                self.problems.append(
                    f"{self.names_of[key]}: has {links - inside} hard link(s) outside the "
                    "adapter directory; copy the file instead of linking it")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)
