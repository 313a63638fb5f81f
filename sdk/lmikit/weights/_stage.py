"""Copy a Hugging Face Hub snapshot to S3 as SageMaker's uncompressed model data.

Files are copied ``workers`` at a time, each streamed from the Hub into S3 with at most two
of its parts in memory (:mod:`lmikit.weights._upload`), so the peak stays near
``2 x workers x part_size`` whatever the model's size. A file already in S3 with the Hub's
size and checksum is skipped: a run that stopped resumes when it is run again. The manifest
is written last; one left by an earlier run is deleted before any file changes.
"""

from __future__ import annotations

import fnmatch
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from lmikit.aws import Clients, call, is_not_found, paginate
from lmikit.errors import AwsError, Interrupted
from lmikit.weights._destination import (
    Destination,
    WeightsError,
    parse_destination,
    path_problems,
)
from lmikit.weights._hub import Hub, HubFile, Snapshot, gated_without_token, require_hub
from lmikit.weights._manifest import (
    Manifest,
    StagedFile,
    bucket_region,
    delete_manifest,
    read_manifest,
    write_manifest,
)
from lmikit.weights._token import token_from_secret
from lmikit.weights._upload import (
    MAX_PART,
    MIN_PART,
    PART_SIZE,
    Stopped,
    Target,
    abort,
    copy_file,
    stored_sha256,
)

WORKERS = 8
MAX_WORKERS = 64
MODEL_PY = "model.py"  # LMI loads <model dir>/model.py (lmikit.render.weights_model_py)
MAX_MODEL_PY_BYTES = 4 * 1024**2


@dataclass(frozen=True)
class StageEvent:
    """What a run reports as it goes (from worker threads too):

    ``listed`` (``count`` files of ``size`` bytes to copy; ``message``: what will be done),
    ``cleaned``
    (``message``: what an earlier run left that was removed), ``skipped`` / ``copied`` /
    ``failed`` (one file; ``message`` says why it failed), ``bytes`` (``size`` more bytes of
    ``path`` are in S3) and ``manifest`` (written).
    """

    kind: str
    path: str = ""
    size: int = 0
    message: str = ""
    count: int = 0


@dataclass(frozen=True)
class StageResult:
    uri: str
    model_id: str
    revision: str
    commit: str
    copied: tuple[HubFile, ...]  # in a dry run: what would be copied
    skipped: tuple[HubFile, ...]  # already in S3 with the Hub's checksum
    bytes_copied: int
    seconds: float
    dry_run: bool
    extra_keys: tuple[str, ...]  # objects under the prefix that are not in the snapshot
    notes: tuple[str, ...]


def _selected(files: Iterable[HubFile], exclude: Iterable[str]) -> list[HubFile]:
    patterns = tuple(exclude)
    return [f for f in files if not any(fnmatch.fnmatchcase(f.path, p) for p in patterns)]


def _check_options(workers: int, part_size: int, token: str | None,
                   token_secret_arn: str | None) -> None:
    problems = []
    if not 1 <= workers <= MAX_WORKERS:
        problems.append(f"workers is {workers}; give 1 to {MAX_WORKERS}")
    if not MIN_PART <= part_size <= MAX_PART:
        problems.append(f"part_size is {part_size:,} bytes; S3 parts are {MIN_PART:,} to "
                        f"{MAX_PART:,} bytes")
    if token is not None and token_secret_arn is not None:
        problems.append("give a token or a token secret, not both")
    if problems:
        raise WeightsError("; ".join(problems))


def _failure_report(failures: dict[str, str], total: int) -> str:
    """One line per distinct reason, naming the files it stopped."""
    by_reason: dict[str, list[str]] = {}
    for path, reason in sorted(failures.items()):
        by_reason.setdefault(reason, []).append(path)
    lines = [f"{len(failures)} of {total} file(s) were not copied; no manifest was written. "
             "Run the same command again to copy what is missing:"]
    for reason, paths in by_reason.items():
        named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        lines.append(f"  - {reason}" + (f" ({named})" if reason.find(paths[0]) < 0 else ""))
    return "\n".join(lines)


class _Run:
    """One staging run's shared state: what is in S3 and how far the copy has got."""

    def __init__(self, s3: Any, destination: Destination, hub: Hub, snapshot: Snapshot,
                 on_event: Callable[[StageEvent], None]) -> None:
        self.s3 = s3
        self.destination = destination
        self.hub = hub
        self.snapshot = snapshot
        self.emit = on_event
        self.lock = threading.Lock()
        self.bytes_copied = 0

    def listing(self) -> dict[str, int]:
        rows = paginate(self.s3, "list_objects_v2", "Contents",
                        Bucket=self.destination.bucket, Prefix=self.destination.prefix)
        return {row["Key"]: int(row.get("Size", 0)) for row in rows}

    def head(self, key: str) -> dict[str, Any] | None:
        try:
            return call(self.s3, "head_object", Bucket=self.destination.bucket, Key=key)
        except AwsError as exc:
            if is_not_found(exc):
                return None
            raise

    def abort_unfinished(self, keys: set[str], target: Target) -> int:
        """Abort the multipart uploads to ``keys`` that a run which died left behind."""
        uploads = paginate(self.s3, "list_multipart_uploads", "Uploads",
                           Bucket=self.destination.bucket, Prefix=self.destination.prefix)
        left = [(u["Key"], u["UploadId"]) for u in uploads if u["Key"] in keys]
        for key, upload_id in left:
            abort(target, key, upload_id)
        return len(left)

    def on_bytes(self, path: str) -> Callable[[int], None]:
        def note(count: int) -> None:
            with self.lock:
                self.bytes_copied += count
            self.emit(StageEvent("bytes", path, count))
        return note

    def read_small(self, path: str, limit: int) -> bytes | None:
        """The object at ``path`` under the prefix if it exists and is at most ``limit``
        bytes (more reads as None: it cannot be the file asked for)."""
        try:
            answer = call(self.s3, "get_object", Bucket=self.destination.bucket,
                          Key=self.destination.key(path), Range=f"bytes=0-{limit}")
        except AwsError as exc:
            if is_not_found(exc):
                return None
            raise
        body = answer["Body"].read(limit + 1)
        return None if len(body) > limit else body

    def put_small(self, path: str, body: bytes, kms_key_id: str | None) -> StagedFile:
        import base64
        import hashlib

        digest = hashlib.sha256(body)
        extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_id} if kms_key_id \
            else {}
        call(self.s3, "put_object", Bucket=self.destination.bucket,
             Key=self.destination.key(path), Body=body,
             ChecksumSHA256=base64.b64encode(digest.digest()).decode(), **extra)
        return StagedFile(path, len(body), digest.hexdigest())

    def copy(self, target: Target, file: HubFile) -> str:
        with closing(self.hub.chunks(self.snapshot, file)) as chunks:
            return copy_file(target, self.destination.key(file.path), file, chunks,
                             self.on_bytes(file.path))


    def stored(self, files: list[HubFile], kms_key_id: str | None, workers: int
               ) -> tuple[dict[str, str | None], tuple[str, ...]]:
        """Each file's sha256 when S3 already holds it (else None), and the keys under the
        prefix that are neither a file of the snapshot nor the manifest."""
        listed = self.listing()
        candidates = [f for f in files if listed.get(self.destination.key(f.path)) == f.size]
        with ThreadPoolExecutor(workers) as pool:
            heads = dict(zip([f.path for f in candidates], pool.map(
                lambda f: self.head(self.destination.key(f.path)), candidates), strict=True))
        keys = {self.destination.key(f.path) for f in files} | {self.destination.manifest_key}
        return ({f.path: stored_sha256(heads.get(f.path), f, kms_key_id) for f in files},
                tuple(sorted(k for k in listed if k not in keys)))

    def copy_all(self, files: list[HubFile], staged: list[StagedFile],
                 kms_key_id: str | None, part_size: int, workers: int,
                 stop: threading.Event) -> dict[str, str]:
        """Copy ``files``, ``workers`` at a time, adding each to ``staged``; returns why each
        file that was not copied failed. Ctrl-C sets ``stop`` and waits for the workers."""
        failures: dict[str, str] = {}
        with ThreadPoolExecutor(workers, thread_name_prefix="lmikit-file") as file_pool, \
                ThreadPoolExecutor(workers, thread_name_prefix="lmikit-part") as part_pool:
            target = Target(self.s3, self.destination.bucket, kms_key_id, part_size, part_pool,
                            stop)
            aborted = self.abort_unfinished({self.destination.key(f.path) for f in files},
                                            target)
            if aborted:
                self.emit(StageEvent("cleaned", message=f"aborted {aborted} unfinished "
                                     "upload(s) an earlier run left"))
            futures = {file_pool.submit(self.copy, target, f): f for f in files}
            try:
                for future in as_completed(futures):
                    file = futures[future]
                    try:
                        staged.append(StagedFile(file.path, file.size, future.result()))
                        self.emit(StageEvent("copied", file.path, file.size))
                    except Stopped:
                        failures[file.path] = "stopped"
                    except (WeightsError, AwsError) as exc:
                        failures[file.path] = str(exc)
                        self.emit(StageEvent("failed", file.path, file.size, str(exc)))
            except KeyboardInterrupt:
                stop.set()
                wait(futures)
        return failures


def stage(model_id: str, destination: str, *, revision: str = "main",
          region: str | None = None, token: str | None = None,
          token_secret_arn: str | None = None, kms_key_id: str | None = None,
          workers: int = WORKERS, part_size: int = PART_SIZE, exclude: Iterable[str] = (),
          dry_run: bool = False, endpoint: str | None = None, session: Any = None,
          s3: Any = None, on_event: Callable[[StageEvent], None] | None = None,
          stop: threading.Event | None = None, model_py: bytes | None = None) -> StageResult:
    """Copy ``model_id`` at ``revision`` from the Hub to ``destination`` (``s3://bucket/
    prefix/``), then write the manifest. ``exclude``: glob patterns of repo paths to leave
    out (``"original/*"``). The token: ``token``, else the secret ``token_secret_arn``, else
    huggingface_hub's (``HF_TOKEN``). ``kms_key_id``: SSE-KMS for every object. ``region``:
    the bucket's region, which is checked (SageMaker reads model data from its own region).
    ``stop``: set it to stop the run as Ctrl-C does. ``model_py``: also write these bytes as
    the prefix's ``model.py`` (listed in the manifest), which LMI loads from the model dir:
    :func:`lmikit.render.weights_model_py` for a spec with LoRA, LMCache and
    ``security.network_isolation`` (CLI: ``--lora-isolation``).

    Raises :class:`WeightsError` (nothing to resume from is lost: re-running resumes) or
    :class:`lmikit.errors.Interrupted` on Ctrl-C.

    >>> stage("Qwen/Qwen2.5-7B-Instruct", "s3://my-models/qwen2.5-7b/")  # doctest: +SKIP
    """
    started = time.monotonic()
    emit = on_event or (lambda event: None)
    exclude = tuple(exclude)
    target_prefix = parse_destination(destination)
    _check_options(workers, part_size, token, token_secret_arn)
    require_hub()
    if s3 is None:
        clients = Clients(session=session, region=region)
        s3, region = clients.s3, clients.region
    found = bucket_region(s3, target_prefix.bucket)
    if region and found and found != region:
        raise WeightsError(f"bucket {target_prefix.bucket} is in {found}, not {region}: "
                           "SageMaker reads model data only from a bucket in the endpoint's "
                           f"region; give --region {found} or a bucket in {region}")
    if token_secret_arn:
        token = token_from_secret(token_secret_arn, session=session)
    hub = Hub(token, endpoint)
    snapshot = hub.snapshot(model_id, revision)
    files = _selected(snapshot.files, exclude)
    problems = [f"{f.path}: {p}" for f in files for p in path_problems(target_prefix, f.path)]
    if problems:
        raise WeightsError(f"{model_id}@{snapshot.commit} cannot be staged under "
                           f"{target_prefix.uri}: " + "; ".join(problems))
    if not files:
        raise WeightsError(f"{model_id}@{snapshot.commit} has no file left to stage "
                           f"(it lists {len(snapshot.files)}; --exclude left out the rest)")
    if model_py is not None and any(f.path == MODEL_PY for f in files):
        raise WeightsError(f"{model_id}@{snapshot.commit} has its own {MODEL_PY}, which LMI "
                           "would load as the model's code: lmikit cannot put its LoRA "
                           f"isolation {MODEL_PY} beside it. Exclude it (--exclude {MODEL_PY}) "
                           "if the deployment does not need it")
    notes = []
    if snapshot.gated and not hub.has_token():
        if not dry_run:
            raise WeightsError(gated_without_token(model_id, hub.page(model_id)))
        notes.append(gated_without_token(model_id, hub.page(model_id)))
    run = _Run(s3, target_prefix, hub, snapshot, emit)

    stored, extra = run.stored(files, kms_key_id, workers)
    write_model_py = model_py is not None and \
        run.read_small(MODEL_PY, MAX_MODEL_PY_BYTES) != model_py
    if model_py is not None:
        extra = tuple(k for k in extra if k != target_prefix.key(MODEL_PY))
        if write_model_py:
            notes.append(f"{MODEL_PY} (lmikit's LoRA isolation for the base model) "
                         f"{'would be' if dry_run else 'is'} written to {target_prefix.uri}")
    skipped = [f for f in files if stored[f.path]]
    to_copy = sorted((f for f in files if not stored[f.path]), key=lambda f: (-f.size, f.path))
    emit(StageEvent("listed", size=sum(f.size for f in to_copy), count=len(to_copy), message=(
        f"{model_id}@{snapshot.commit[:12]}: {len(files)} files, {len(to_copy)} to copy, "
        f"{len(skipped)} already in S3")))
    for f in sorted(skipped, key=lambda f: f.path):
        emit(StageEvent("skipped", f.path, f.size))

    def result(copied: int) -> StageResult:
        return StageResult(target_prefix.uri, model_id, revision, snapshot.commit,
                           tuple(to_copy), tuple(skipped), copied,
                           time.monotonic() - started, dry_run, extra, tuple(notes))

    if dry_run:
        return result(0)
    old = read_manifest(s3, target_prefix)
    staged = [StagedFile(f.path, f.size, str(stored[f.path])) for f in skipped]
    if old is not None and (to_copy or old.commit != snapshot.commit or write_model_py):
        delete_manifest(s3, target_prefix)
        emit(StageEvent("cleaned", message=f"removed the manifest of {old.model_id}@"
                        f"{old.commit[:12]} until this copy is complete"))
    stop = stop or threading.Event()
    failures = run.copy_all(to_copy, staged, kms_key_id, part_size, workers, stop)
    if stop.is_set():
        done = {f.path for f in staged}
        raise Interrupted(
            f"stopped with {len(done)} of {len(files)} files in S3 and no manifest written; "
            "run the same command again to copy the rest", state="partial",
            left=tuple(sorted(f.path for f in to_copy if f.path not in done))) from None
    if failures:
        raise WeightsError(_failure_report(failures, len(files)))
    if model_py is not None:
        staged.append(run.put_small(MODEL_PY, model_py, kms_key_id) if write_model_py else
                      StagedFile(MODEL_PY, len(model_py), _sha256(model_py)))
    manifest = Manifest(model_id, revision, snapshot.commit, tuple(staged), exclude)
    write_manifest(s3, target_prefix, manifest, kms_key_id)
    emit(StageEvent("manifest", target_prefix.manifest_key))
    return result(run.bytes_copied)


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
