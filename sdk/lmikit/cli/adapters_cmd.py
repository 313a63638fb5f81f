"""``lmikit adapters``: register, list, update and remove LoRA adapters of an endpoint."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

endpoint_option = click.option("--endpoint", "-e", required=True,
                               help="Endpoint name (the spec's name).")
region_option = click.option("--region", envvar="AWS_DEFAULT_REGION",
                             help="AWS region [env AWS_DEFAULT_REGION].")
bucket_option = click.option("--bucket", envvar="LMIKIT_BUCKET",
                             help="S3 bucket for adapter artifacts [default: sagemaker-<region>-"
                             "<account>].")
kms_option = click.option("--kms-key", "kms_key_arn", help="KMS key ARN for the upload.")
wait_option = click.option("--wait/--no-wait", default=False, show_default=True,
                           help="Wait until the adapter component is InService.")
formatter_option = click.option("--formatter", "-f", type=click.Path(exists=True,
                                                                      dir_okay=False),
                                help="Python file with this adapter's formatters.")
include_option = click.option(
    "--include", "include", multiple=True, metavar="PATTERN",
    help="Package a file the default exclusions leave out (.env, *.key, .git, ...): a name or "
    "path pattern (fnmatch). Repeatable.")
POLL = float(os.environ.get("LMIKIT_POLL_SECONDS", "5"))


def upload_options(command: Callable[..., None]) -> Callable[..., None]:
    """NAME PATH and the options of a command that uploads an adapter (register, update)."""
    for decorate in reversed([
        click.argument("name"),
        click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path)),
        endpoint_option, formatter_option, include_option, wait_option, region_option,
        bucket_option, kms_option,
    ]):
        command = decorate(command)
    return command


def _registry(endpoint: str, region: str | None, bucket: str | None = None,
              kms_key_arn: str | None = None) -> Any:
    from lmikit.adapters import AdapterRegistry

    return AdapterRegistry(endpoint, region=region, bucket=bucket, kms_key_arn=kms_key_arn,
                           poll_seconds=POLL)


def _echo(info: Any) -> None:
    excluded = getattr(info, "excluded", ())
    if excluded:
        click.echo(f"Left out of {info.name}'s package: {', '.join(excluded)} (add --include "
                   "PATTERN to package one)", err=True)
    line = f"{info.name}: {info.component} {info.status}"
    if info.artifact_url:
        line += f" ({info.artifact_url})"
    if info.failure:
        line += f" - {info.failure}"
    click.echo(line)


@click.group("adapters")
def adapters_group() -> None:
    """Register and manage LoRA adapters (one adapter inference component each)."""


@adapters_group.command("register")
@upload_options
def register_cmd(name: str, path: Path, endpoint: str, formatter: str | None,
                 include: tuple[str, ...], wait: bool, region: str | None, bucket: str | None,
                 kms_key_arn: str | None) -> None:
    """Validate, upload and host the adapter in PATH as NAME."""
    info = _registry(endpoint, region, bucket, kms_key_arn).register(name, path, formatter,
                                                                     wait=wait, include=include)
    _echo(info)


@adapters_group.command("register-dir")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@endpoint_option
@wait_option
@region_option
@bucket_option
@kms_option
def register_dir_cmd(directory: Path, endpoint: str, wait: bool, region: str | None,
                     bucket: str | None, kms_key_arn: str | None) -> None:
    """Register every adapter directory inside DIRECTORY concurrently (name = dir name)."""
    items: list[tuple[str, str | Path, str | Path | None]] = [
        (d.name, d, None) for d in sorted(directory.iterdir())
        if d.is_dir() and not d.name.startswith(".")]
    if not items:
        raise click.UsageError(f"no adapter directories in {directory}")
    for info in _registry(endpoint, region, bucket, kms_key_arn).register_many(items,
                                                                              wait=wait):
        _echo(info)


@adapters_group.command("list")
@endpoint_option
@region_option
def list_cmd(endpoint: str, region: str | None) -> None:
    """List the endpoint's adapters and their states."""
    adapters = _registry(endpoint, region).list()
    if not adapters:
        click.echo(f"No adapters on {endpoint}.")
    for info in adapters:
        _echo(info)


@adapters_group.command("update")
@upload_options
def update_cmd(name: str, path: Path, endpoint: str, formatter: str | None,
               include: tuple[str, ...], wait: bool, region: str | None, bucket: str | None,
               kms_key_arn: str | None) -> None:
    """Point adapter NAME at new weights (or a new formatter) from PATH."""
    _echo(_registry(endpoint, region, bucket, kms_key_arn).update(name, path, formatter,
                                                                  wait=wait, include=include))


@adapters_group.command("remove")
@click.argument("name")
@endpoint_option
@wait_option
@region_option
def remove_cmd(name: str, endpoint: str, wait: bool, region: str | None) -> None:
    """Delete adapter NAME's component."""
    _registry(endpoint, region).remove(name, wait=wait)
    click.echo(f"Removed {name} from {endpoint}.")
