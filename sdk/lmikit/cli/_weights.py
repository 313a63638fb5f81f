"""``lmikit weights``: stage a Hub snapshot in S3 for SageMaker, and check a staged prefix.

Progress goes to stderr: a rich bar on a terminal; a line per file (with the run's bytes and
rate so far) and a line a minute otherwise. The summary goes to stdout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import click

HEARTBEAT_S = 60.0  # without a terminal: a progress line at least this often


def _size(count: float) -> str:
    from rich.filesize import decimal

    return str(decimal(int(count)))


def _rate(count: float, seconds: float) -> str:
    return f"{_size(count / seconds)}/s" if seconds > 0 else "-"


class StageProgress:
    """Renders :class:`lmikit.weights.StageEvent` s (called from worker threads)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.clock = clock
        self.started = clock()
        self.last_line = self.started
        self.lock = threading.Lock()
        self.total = self.done = 0
        self.files = self.finished = 0
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def _line(self, text: str) -> None:
        if self.bar is not None:
            self.bar.console.print(text, highlight=False)
        else:
            click.echo(text, err=True)

    def _so_far(self) -> str:
        seconds = self.clock() - self.started
        return (f"{self.finished}/{self.files} files, {_size(self.done)} of "
                f"{_size(self.total)}, {_rate(self.done, seconds)}")

    def __call__(self, event: Any) -> None:
        with self.lock:
            getattr(self, f"_on_{event.kind}", lambda e: None)(event)

    def _on_listed(self, event: Any) -> None:
        self.total = event.size
        self.files = event.count
        self._line(event.message)
        if self.console.is_terminal and self.total:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self.bar = Progress("[progress.description]{task.description}", BarColumn(),
                                DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                                console=self.console, transient=True)
            self.bar.start()
            self.tasks[""] = self.bar.add_task("all files", total=self.total)

    def _on_skipped(self, event: Any) -> None:
        self._line(f"skipped {event.path} ({_size(event.size)}): in S3 with the Hub's "
                   "checksum")

    def _on_cleaned(self, event: Any) -> None:
        self._line(event.message)

    def _on_bytes(self, event: Any) -> None:
        self.done += event.size
        if self.bar is not None:
            self.bar.advance(self.tasks[""], event.size)
        elif self.clock() - self.last_line >= HEARTBEAT_S:
            self.last_line = self.clock()
            self._line(f"... {self._so_far()}")

    def _on_copied(self, event: Any) -> None:
        self.finished += 1
        self.last_line = self.clock()
        self._line(f"copied {event.path} ({_size(event.size)}); {self._so_far()}")

    def _on_failed(self, event: Any) -> None:
        self._line(f"failed {event.path}: {event.message.splitlines()[0]}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


@click.group("weights")
def weights_group() -> None:
    """Stage model weights in S3, so a large model starts from S3 instead of the Hub."""


@weights_group.command("stage")
@click.argument("model_id")
@click.argument("destination")
@click.option("--revision", default="main", show_default=True,
              help="Branch, tag or commit sha of the Hub repo.")
@click.option("--region", help="The bucket's region, which must be the endpoint's "
              "(SageMaker reads model data from its own region) [default: boto3's].")
@click.option("--token-secret", "token_secret", metavar="ARN",
              help="Secrets Manager secret holding the Hub token for a gated repo (plain "
              "text, or JSON with HF_TOKEN) [default: HF_TOKEN, or `hf auth login`'s].")
@click.option("--kms-key-id", metavar="KEY", help="KMS key (id, ARN or alias) every object "
              "is encrypted with (SSE-KMS) [default: the bucket's default encryption].")
@click.option("--workers", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Files copied at once; memory peaks near 2 x workers x 16 MiB.")
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="Leave out repo paths matching GLOB, e.g. 'original/*' (repeatable).")
@click.option("--lora-isolation", is_flag=True,
              help="Also write lmikit's model.py for the base model, which keeps LoRA "
              "adapters from sharing LMCache's cache (needed by a spec with LoRA, a KV cache "
              "tier and security.network_isolation; `lmikit deploy` checks for it).")
@click.option("--dry-run", is_flag=True, help="Say what would be copied; write nothing.")
def stage_cmd(model_id: str, destination: str, revision: str, region: str | None,
              token_secret: str | None, kms_key_id: str | None, workers: int,
              exclude: tuple[str, ...], lora_isolation: bool, dry_run: bool) -> None:
    """Copy MODEL_ID from the Hugging Face Hub to DESTINATION (s3://BUCKET/PREFIX/) as
    SageMaker's uncompressed model data, file by file, streamed and checked against the
    Hub's checksums, then write lmikit-manifest.json. Run it again to resume: files already
    in S3 with the Hub's checksum are skipped."""
    import os

    from lmikit.weights import stage

    model_py = None
    if lora_isolation:
        from lmikit.render import base_isolation_model_py

        model_py = base_isolation_model_py()
    progress = StageProgress()
    try:
        result = stage(model_id, destination, revision=revision, region=region,
                       token_secret_arn=token_secret, kms_key_id=kms_key_id, workers=workers,
                       exclude=exclude, dry_run=dry_run,
                       endpoint=os.environ.get("HF_ENDPOINT"), on_event=progress,
                       model_py=model_py)
    finally:
        progress.close()
    for note in result.notes:
        click.echo(f"Note: {note}", err=True)
    if result.extra_keys:
        click.echo(f"Note: {len(result.extra_keys)} object(s) under {result.uri} are not part "
                   f"of this snapshot (e.g. {result.extra_keys[0]}); SageMaker copies them to "
                   "/opt/ml/model too. Delete them if they do not belong.", err=True)
    what = f"{model_id}@{result.commit[:12]}"
    copied = sum(f.size for f in result.copied)
    if dry_run:
        click.echo(f"Would copy {len(result.copied)} file(s) ({_size(copied)}) of {what} to "
                   f"{result.uri}; {len(result.skipped)} already there.")
        for file in result.copied:
            click.echo(f"  {file.path}  {_size(file.size)}")
        return
    copied_text = (f"{len(result.copied)} file(s) copied ({_size(result.bytes_copied)} in "
                   f"{result.seconds:.0f} s, {_rate(result.bytes_copied, result.seconds)})"
                   if result.copied else "nothing to copy")
    click.echo(f"Staged {what} in {result.uri}: {copied_text}, {len(result.skipped)} file(s) "
               "already there; manifest written.")
    click.echo(f"Use it in a spec as   model.id: {result.uri}")
    click.echo(f"                      model.hub_id: {model_id}")


@weights_group.command("check")
@click.argument("uri")
@click.option("--model-id", help="The model the prefix must hold.")
@click.option("--revision", help="The revision (as staged, or its commit sha) it must hold.")
@click.option("--region", help="The endpoint's region; the bucket must be in it "
              "[default: boto3's].")
def check_cmd(uri: str, model_id: str | None, revision: str | None,
              region: str | None) -> None:
    """Check that URI holds a finished copy made by `lmikit weights stage`."""
    from lmikit.aws import Clients
    from lmikit.weights import check_staged

    clients = Clients(region=region)
    staged = check_staged(uri, model_id=model_id, revision=revision, region=clients.region,
                          s3=clients.s3)
    manifest = staged.manifest
    click.echo(f"{staged.uri}: {manifest.model_id}@{manifest.commit[:12]} (revision "
               f"{manifest.revision}), {len(manifest.files)} files, "
               f"{_size(manifest.total_bytes)}: complete.")
    if staged.extra_keys:
        click.echo(f"Note: {len(staged.extra_keys)} object(s) under it are not in the "
                   f"manifest (e.g. {staged.extra_keys[0]}); SageMaker copies them too.",
                   err=True)
