"""LoRA adapters: check a directory and package it as a deterministic, content-addressed .tar.gz.

:func:`check_adapter` reads only what it must, a bounded amount: the directory's entries
(``lstat``), ``adapter_config.json``, the safetensors header and the formatter. It finds every
problem before it reports (:class:`~lmikit.errors.AdapterError` with ``problems``), and it is
what ``lmikit validate`` runs for each of a spec's adapters. :func:`package_adapter` runs the
same checks, then streams the archive to a temporary file while it hashes it
(:class:`lmikit.artifact.ArtifactFile`), so memory stays flat whatever the adapter's size.

What goes in (see :mod:`lmikit.lora._files`): regular files, and symlinks to regular files
inside the directory (packaged as copies); FIFOs, devices, sockets, links to anything outside
and hard links shared with files outside are refused. Secrets and clutter (``.git/``, ``.env``,
keys, ``.aws/``, ``credentials``, ``__pycache__``, ...) are left out and listed in
``excluded`` unless an ``include`` pattern names them.

>>> import pathlib, tempfile
>>> from lmikit.testing import write_lora_adapter
>>> d = write_lora_adapter(pathlib.Path(tempfile.mkdtemp()) / "legal")
>>> _ = (d / ".env").write_text("HF_TOKEN=secret")
>>> package = package_adapter(d, model_id="Qwen/Qwen2.5-7B-Instruct", max_rank=16)
>>> package.files, package.excluded
(['adapter_config.json', 'adapter_model.safetensors'], ('.env',))
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lmikit.artifact import CHUNK_BYTES, ArtifactFile, TarMember
from lmikit.errors import AdapterError, CatalogError, LmikitError
from lmikit.lora import _weights as lora_weights
from lmikit.lora._files import AdapterFile, AdapterFiles, scan_adapter_dir
from lmikit.lora._isolation import TAG_DIGEST_HEX, adapter_cache_tag_from_digests

if TYPE_CHECKING:
    from lmikit.catalog import ConfigShape
    from lmikit.planner import Plan
    from lmikit.spec import AdapterSpec, DeploymentSpec

WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
CONFIG_FILE = "adapter_config.json"
MAX_CONFIG_BYTES = 1024**2
SOURCE, FORMATTER_FIELD = "source", "formatter"  # which spec field a problem belongs to


@dataclass(frozen=True)
class AdapterCheck:
    """An adapter directory that passed every check, and what will be packaged."""

    root: Path
    rank: int | None
    base_model: str | None
    formatters: list[str]
    members: tuple[AdapterFile, ...]  # the directory's files that go in (model.py aside)
    files: list[str]  # archive names, model.py included when one is added
    excluded: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    model_py_from: Path | None = None  # the formatter file model.py is built from
    builds_model_py: bool = False  # model.py is generated (a formatter given, or a cache tag)


@dataclass(frozen=True)
class AdapterPackage:
    """A validated adapter, packaged: the .tar.gz (in a temporary file) and what is in it.

    ``data`` reads the whole archive into memory; an upload can stream ``chunks()``.
    """

    artifact: ArtifactFile
    rank: int | None
    base_model: str | None
    formatters: list[str]
    files: list[str]
    cache_tag: str | None = None
    excluded: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def sha256(self) -> str:
        return self.artifact.sha256

    @property
    def size(self) -> int:
        return self.artifact.size

    @property
    def data(self) -> bytes:
        return self.artifact.read()

    def chunks(self, size: int = CHUNK_BYTES) -> Iterable[bytes]:
        return self.artifact.chunks(size)

    def open(self) -> BinaryIO:
        """A reader over the archive from its start, so an upload streams it."""
        return self.artifact.open()

    def close(self) -> None:
        self.artifact.close()

    def __enter__(self) -> AdapterPackage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_formatter_file(path: str | Path) -> list[str]:
    """Names of the formatter functions a file defines; raises AdapterError if none/invalid."""
    from lmikit.formatters import validate_formatter_file

    return list(validate_formatter_file(path))


def _same_model(a: str, b: str) -> bool:
    x, y = a.strip().rstrip("/").lower(), b.strip().rstrip("/").lower()
    return x == y or x.endswith("/" + y) or y.endswith("/" + x)


def catalog_shape(model_id: str | None) -> ConfigShape | None:
    if not model_id:
        return None
    from lmikit.catalog import catalog_entry, config_shape

    try:
        entry = catalog_entry(model_id)
    except CatalogError:
        return None
    return config_shape(entry["config"], f"model {model_id!r}")


def check_adapter(path: str | Path, *, formatter: str | Path | None = None,
                  model_id: str | None = None, max_rank: int | None = None,
                  cache_tag_name: str | None = None, include: Iterable[str] = (),
                  base_shape: ConfigShape | None = None) -> AdapterCheck:
    """Every check :func:`package_adapter` runs, reading a bounded amount and writing nothing.

    ``base_shape`` is the base model's shape for the weight checks (default: lmikit's catalog
    entry for ``model_id``, when it has one). Raises :class:`AdapterError` whose ``problems``
    are ``(field, message)`` pairs, field ``"source"`` or ``"formatter"``.
    """
    root = Path(path)
    found = scan_adapter_dir(root, include)
    problems = [(SOURCE, p) for p in found.problems]
    notes: list[str] = [f"{n}: a symlink, packaged as a copy of its target"
                        for n in found.followed_links]
    config = _read_config(found, problems)
    base = config.get("base_model_name_or_path")
    other_base = False  # trained for another model: its widths would only repeat that
    if config and model_id:
        if not isinstance(base, str) or not base:
            problems.append((SOURCE, f"{CONFIG_FILE} has no base_model_name_or_path; cannot "
                             f"check that the adapter was trained for {model_id}"))
        elif not _same_model(base, model_id):
            other_base = True
            problems.append((SOURCE, f"the adapter was trained for {base[:200]!r}, but the "
                             f"endpoint serves {model_id!r}"))
    lora = None
    if config:
        lora, config_problems = lora_weights.lora_config(config)
        problems += [(SOURCE, p) for p in config_problems]
    rank = lora.rank if lora else None
    if lora and max_rank is not None and max(lora.ranks) > max_rank:
        problems.append((SOURCE, f"LoRA rank {max(lora.ranks)} exceeds the endpoint's max LoRA "
                         f"rank {max_rank} (OPTION_MAX_LORA_RANK); give the adapter's rank in "
                         "the spec (adapters[].rank) or engine.lora.max_rank and redeploy, or "
                         "retrain with a smaller rank"))
    if lora and lora.note:
        notes.append(lora.note)
    shape = None if other_base else base_shape or catalog_shape(model_id)
    notes += _check_weights(found, lora, shape, problems)
    formatters, own = _check_formatters(root, found, formatter, problems)
    if cache_tag_name is not None and not problems:
        # the real tag digests every file; any valid tag shows the model.py builds
        try:
            _tagged_model_py(own, f"{cache_tag_name}.{'0' * TAG_DIGEST_HEX}")
        except AdapterError as exc:
            problems.append((FORMATTER_FIELD if formatter is not None else SOURCE, str(exc)))
    if problems:
        raise AdapterError(f"adapter {str(root)!r} is not valid:\n"
                           + "\n".join(f"  - {p}" for _, p in problems), problems)
    builds = formatter is not None or cache_tag_name is not None
    members = tuple(f for f in found.files if not (builds and f.name == "model.py"))
    names = sorted({m.name for m in members} | ({"model.py"} if builds else set()))
    return AdapterCheck(root, rank, base if isinstance(base, str) else None, formatters,
                        members, names, found.excluded, tuple(notes), own, builds)


def _read_config(found: AdapterFiles, problems: list[tuple[str, str]]) -> dict[str, Any]:
    entry = found.get(CONFIG_FILE)
    if entry is None:
        if not any("not a directory" in p or "cannot read the adapter" in p
                   for p in found.problems):
            problems.append((SOURCE, f"{CONFIG_FILE} is missing (is this a PEFT LoRA adapter "
                             "directory?)"))
        return {}
    if entry.size > MAX_CONFIG_BYTES:
        problems.append((SOURCE, f"{CONFIG_FILE} is {entry.size:,} bytes; the limit is "
                         f"{MAX_CONFIG_BYTES:,}"))
        return {}
    try:
        loaded = json.loads(entry.read(MAX_CONFIG_BYTES).decode("utf-8"))
    except OSError as exc:
        problems.append((SOURCE, f"cannot read {CONFIG_FILE}: {exc}"))
        return {}
    except (ValueError, RecursionError) as exc:
        problems.append((SOURCE, f"{CONFIG_FILE} is not valid JSON: {str(exc)[:200]}"))
        return {}
    if not isinstance(loaded, dict) or not loaded:
        problems.append((SOURCE, f"{CONFIG_FILE} must be a JSON object with the LoRA "
                         "settings (r, lora_alpha, target_modules, base_model_name_or_path)"))
        return {}
    return loaded


def _check_weights(found: AdapterFiles, lora: lora_weights.LoraConfig | None,
                   shape: ConfigShape | None, problems: list[tuple[str, str]]) -> list[str]:
    safetensors = found.get(WEIGHT_FILES[0])
    if safetensors is None:
        if found.get(WEIGHT_FILES[1]) is not None:
            return [f"{WEIGHT_FILES[1]} was not inspected (a pickle; lmikit reads only "
                    "safetensors headers): prefer adapter_model.safetensors"]
        if not any("not a directory" in p or "cannot read the adapter" in p
                   for p in found.problems):
            problems.append((SOURCE, f"no adapter weights: expected "
                             f"{' or '.join(WEIGHT_FILES)}"))
        return []
    name = safetensors.name
    try:
        prefix = safetensors.read(8)
        n = lora_weights.header_length(prefix, safetensors.size)
        tensors = lora_weights.parse_header(safetensors.read(8 + n), safetensors.size)
    except lora_weights.HeaderError as exc:
        problems.append((SOURCE, f"{name} is not a valid safetensors file: {exc}"))
        return []
    except OSError as exc:
        problems.append((SOURCE, f"cannot read {name}: {exc}"))
        return []
    if lora is not None:
        problems += [(SOURCE, p) for p in lora_weights.check_tensors(name, tensors, lora, shape)]
    return []


def _check_formatters(root: Path, found: AdapterFiles, formatter: str | Path | None,
                      problems: list[tuple[str, str]]) -> tuple[list[str], Path | None]:
    if formatter is not None:
        try:
            return check_formatter_file(formatter), Path(formatter)
        except AdapterError as exc:
            problems.append((FORMATTER_FIELD, str(exc)))
            return [], Path(formatter)
    if found.get("model.py") is not None:
        try:
            return check_formatter_file(root / "model.py"), root / "model.py"
        except AdapterError as exc:
            problems.append((SOURCE, str(exc)))
    return [], None


def _tagged_model_py(own: Path | None, tag: str | None) -> bytes:
    from lmikit.formatters import build_model_py

    if tag is None:
        assert own is not None
        return build_model_py(own).encode()
    return build_model_py(*([own] if own else []), adapter_tag=tag).encode()


def package_adapter(path: str | Path, *, formatter: str | Path | None = None,
                    model_id: str | None = None, max_rank: int | None = None,
                    cache_tag_name: str | None = None, include: Iterable[str] = (),
                    base_shape: ConfigShape | None = None,
                    temp_dir: str | Path | None = None) -> AdapterPackage:
    """Check an adapter directory (:func:`check_adapter`) and package it.

    ``cache_tag_name`` (the adapter's name, given while LMCache is on) adds a ``model.py``
    whose input handling tags every request with that name and a digest of the adapter's
    files, after the adapter's own input formatter if it has one. The archive goes to an
    anonymous temporary file (in ``temp_dir``) and is hashed as it is written.
    """
    check = check_adapter(path, formatter=formatter, model_id=model_id, max_rank=max_rank,
                          cache_tag_name=cache_tag_name, include=include, base_shape=base_shape)
    tag = None
    digests: dict[str, bytes] = {}
    try:
        if cache_tag_name is not None:
            digests = {m.name: _digest(m) for m in check.members}
            tag = adapter_cache_tag_from_digests(cache_tag_name, digests)
        members = [_member(m, digests.get(m.name)) for m in check.members]
        if check.builds_model_py:
            members.append(TarMember.from_bytes("model.py",
                                                _tagged_model_py(check.model_py_from, tag)))
        artifact = ArtifactFile.build(members, temp_dir)
    except OSError as exc:
        raise AdapterError(f"adapter {str(check.root)!r}: cannot package it: {exc}",
                           [(SOURCE, str(exc))]) from exc
    except LmikitError as exc:
        raise AdapterError(f"adapter {str(check.root)!r}: {exc}", [(SOURCE, str(exc))]) from exc
    return AdapterPackage(artifact, check.rank, check.base_model, check.formatters, check.files,
                          tag, check.excluded, check.notes)


def _digest(entry: AdapterFile) -> bytes:
    digest = hashlib.sha256()
    with entry.open() as handle:
        while piece := handle.read(CHUNK_BYTES):
            digest.update(piece)
    return digest.digest()


class _Verified:
    """A member's reader that checks, at its end, that the bytes are the ones the cache tag
    digested (the file did not change between the two reads)."""

    def __init__(self, entry: AdapterFile, digest: bytes) -> None:
        self.entry, self.want = entry, digest
        self.handle: BinaryIO = entry.open()
        self.hash = hashlib.sha256()
        self.left = entry.size

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.hash.update(data)
        self.left -= len(data)
        if (self.left <= 0 or not data) and self.hash.digest() != self.want:
            raise OSError(f"{self.entry.name!r} changed while it was being packaged")
        return data

    def close(self) -> None:
        self.handle.close()


def _member(entry: AdapterFile, digest: bytes | None) -> TarMember:
    if digest is None:
        return TarMember(entry.name, entry.size, entry.open)
    return TarMember(entry.name, entry.size,
                     lambda: _Verified(entry, digest))  # type: ignore[return-value,arg-type]


def _spec_inputs(spec: DeploymentSpec, plan: Plan, adapter: AdapterSpec,
                 base_dir: str | Path) -> dict[str, Any]:
    from lmikit.render import lmi_environment

    base = Path(base_dir)
    env = lmi_environment(spec, plan)
    shape = None
    if spec.model.config_path:
        from lmikit.catalog import config_shape, read_config_file

        config_path = Path(spec.model.config_path)
        raw = read_config_file(config_path if config_path.is_absolute() else base / config_path)
        nested = raw.get("config")
        shape = config_shape(nested if isinstance(nested, dict) else raw,
                             f"model config {str(config_path)!r}")
    return {"formatter": base / adapter.formatter if adapter.formatter else None,
            "model_id": spec.model.id,
            "max_rank": int(env.get("OPTION_MAX_LORA_RANK", "0")) or None,
            "cache_tag_name": adapter.name if plan.uses_lmcache else None,
            "base_shape": shape}


def spec_adapter_dir(adapter: AdapterSpec, base_dir: str | Path = ".") -> Path:
    """The folder a spec's local adapter names (``adapters[].source``, relative to the spec),
    which must lie inside the spec's folder, the one root a spec's adapters may come from
    (as a Docker build's files come from its context). Judged on the names alone, before
    anything is read: ``..`` climbing out, an absolute path elsewhere, or the spec's folder
    itself are refused without walking them. A symlink inside the folder may lead anywhere:
    someone put it there."""
    base = Path(os.path.normpath(Path(base_dir).absolute()))  # ".." by name, links kept
    folder = Path(os.path.normpath(base / adapter.source))
    if folder == base:
        why = "is the spec's own folder, not an adapter's"
    elif base not in folder.parents:
        why = f"leads to {folder}, outside the spec's folder {base}"
    else:
        return Path(base_dir) / adapter.source
    raise AdapterError(
        f"adapter {adapter.name!r}: {adapter.source!r} {why}",
        [(SOURCE, f"{why}; a spec's adapter folders lie inside the folder that holds the spec: "
                  "move the adapter there (or a symlink to it), or give an s3:// URI")])


def check_spec_adapter(spec: DeploymentSpec, plan: Plan, adapter: AdapterSpec,
                       base_dir: str | Path = ".") -> AdapterCheck:
    """:func:`check_adapter` with the inputs :func:`package_spec_adapter` uses."""
    return check_adapter(spec_adapter_dir(adapter, base_dir),
                         **_spec_inputs(spec, plan, adapter, base_dir))


def package_spec_adapter(spec: DeploymentSpec, plan: Plan, adapter: AdapterSpec,
                         base_dir: str | Path = ".") -> AdapterPackage:
    """Package one of the spec's local adapters, as ``lmikit deploy`` and the CDK
    ``LoraAdapter`` both do (same checks, same bytes): rank within the endpoint's
    OPTION_MAX_LORA_RANK, and a cache tag while the plan uses LMCache."""
    return package_adapter(spec_adapter_dir(adapter, base_dir),
                           **_spec_inputs(spec, plan, adapter, base_dir))
