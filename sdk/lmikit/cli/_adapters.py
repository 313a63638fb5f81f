"""``lmikit adapters``: register, list, update, remove and adopt LoRA adapters of an endpoint.

The deployment is named by ``--spec SPEC`` (its name, region and KMS key) or by
``--endpoint NAME`` (in ``--region``); the artifact bucket is the one the deployed endpoint
records, unless ``--bucket`` says otherwise. Every command says which region it acts in.
What ``register`` creates is kept by ``lmikit deploy`` until ``adopt`` hands it to the spec.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

spec_option = click.option("--spec", "spec_path", type=click.Path(dir_okay=False,
                                                                   path_type=Path),
                           help="The deployment's spec file (name, region, KMS key).")
endpoint_option = click.option("--endpoint", "-e",
                               help="Endpoint name (the spec's name), or a spec file, if --spec "
                               "is not given.")
region_option = click.option("--region", envvar="AWS_DEFAULT_REGION",
                             help="AWS region with --endpoint [env AWS_DEFAULT_REGION].")
bucket_option = click.option("--bucket", envvar="LMIKIT_BUCKET",
                             help="S3 bucket for adapter artifacts [default: the endpoint's "
                             "(tag lmikit:bucket), else sagemaker-<region>-<account>].")
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
MANAGERS = {"spec": "managed by the spec", "adapters": "registered with lmikit adapters"}


def target_options(command: Callable[..., None]) -> Callable[..., None]:
    """--spec, --endpoint, --region: which deployment a command acts on."""
    for decorate in reversed([spec_option, endpoint_option, region_option]):
        command = decorate(command)
    return command


def upload_options(command: Callable[..., None]) -> Callable[..., None]:
    """NAME PATH and the options of a command that uploads an adapter (register, update)."""
    decorators: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
        click.argument("name"),
        click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path)),
        target_options, formatter_option, include_option, wait_option, bucket_option, kms_option,
    ]
    for decorate in reversed(decorators):
        command = decorate(command)
    return command


def _registry(spec_path: Path | None, endpoint: str | None, region: str | None,
              bucket: str | None = None, kms_key_arn: str | None = None) -> Any:
    from lmikit.lora import AdapterRegistry

    options: dict[str, Any] = {"bucket": bucket, "poll_seconds": POLL,
                               "progress": _progress}
    if kms_key_arn:
        options["kms_key_arn"] = kms_key_arn
    if spec_path is not None:
        from lmikit.spec import load_spec

        spec = load_spec(spec_path)
        if endpoint and endpoint != spec.name:
            raise click.UsageError(f"--endpoint {endpoint} is not {spec_path}'s endpoint "
                                   f"({spec.name}); give one or the other")
        registry = AdapterRegistry.for_spec(spec, **options)
    elif endpoint:
        from lmikit.cli._common import spec_or_endpoint

        deployed = spec_or_endpoint(endpoint, region, param_hint="--endpoint")
        registry = AdapterRegistry.for_spec(deployed.spec, **options) if deployed.spec \
            else AdapterRegistry(endpoint, region=region, **options)
    else:
        raise click.UsageError("name the deployment: --spec SPEC or --endpoint NAME")
    click.echo(f"lmikit adapters: {registry.where()}", err=True)
    return registry


def _progress(event: Any) -> None:
    """One stderr line per upload step (every 5% of an artifact) and component status."""
    if event.kind == "artifact":
        click.echo(f"  upload {event.detail}: {event.status}", err=True)
    elif event.status not in ("unchanged",):
        click.echo(f"  {event.action} {event.name}: {event.status}", err=True)


def _echo(info: Any) -> None:
    line = f"{info.name}: {info.component} {info.status}, {MANAGERS[info.managed_by]}"
    if info.artifact_url:
        line += f" ({info.artifact_url})"
    if info.failure:
        line += f" - {info.failure}"
    click.echo(line)
    excluded = getattr(info, "excluded", ())
    if excluded:
        click.echo(f"Left out of {info.name}'s package: {', '.join(excluded)} (add --include "
                   "PATTERN to package one)", err=True)


@click.group("adapters")
def adapters_group() -> None:
    """Register and manage LoRA adapters (one adapter inference component each)."""


@adapters_group.command("register")
@upload_options
def register_cmd(name: str, path: Path, spec_path: Path | None, endpoint: str | None,
                 region: str | None, formatter: str | None, include: tuple[str, ...],
                 wait: bool, bucket: str | None, kms_key_arn: str | None) -> None:
    """Validate, upload and host the adapter in PATH as NAME."""
    registry = _registry(spec_path, endpoint, region, bucket, kms_key_arn)
    _echo(registry.register(name, path, formatter, wait=wait, include=include))


@adapters_group.command("register-dir")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@target_options
@wait_option
@bucket_option
@kms_option
def register_dir_cmd(directory: Path, spec_path: Path | None, endpoint: str | None,
                     region: str | None, wait: bool, bucket: str | None,
                     kms_key_arn: str | None) -> None:
    """Register every adapter directory inside DIRECTORY concurrently (name = dir name)."""
    items: list[tuple[str, str | Path, str | Path | None]] = [
        (d.name, d, None) for d in sorted(directory.iterdir())
        if d.is_dir() and not d.name.startswith(".")]
    if not items:
        raise click.UsageError(f"no adapter directories in {directory}")
    registry = _registry(spec_path, endpoint, region, bucket, kms_key_arn)
    for info in registry.register_many(items, wait=wait):
        _echo(info)


@adapters_group.command("list")
@target_options
def list_cmd(spec_path: Path | None, endpoint: str | None, region: str | None) -> None:
    """List the endpoint's adapters and their states."""
    registry = _registry(spec_path, endpoint, region)
    adapters = registry.list()
    if not adapters:
        click.echo(f"No adapters on {registry.endpoint}.")
    for info in adapters:
        _echo(info)


@adapters_group.command("update")
@upload_options
def update_cmd(name: str, path: Path, spec_path: Path | None, endpoint: str | None,
               region: str | None, formatter: str | None, include: tuple[str, ...],
               wait: bool, bucket: str | None, kms_key_arn: str | None) -> None:
    """Point adapter NAME at new weights (or a new formatter) from PATH."""
    registry = _registry(spec_path, endpoint, region, bucket, kms_key_arn)
    info = registry.update(name, path, formatter, wait=wait, include=include)
    _echo(info)
    if info.managed_by == "spec":
        click.echo(f"Note: the spec manages {name}: the next `lmikit deploy` puts it back on "
                   "the spec's source; change the source in the spec to keep this one.",
                   err=True)


@adapters_group.command("remove")
@click.argument("name")
@target_options
@click.option("--wait/--no-wait", default=False, show_default=True,
              help="Wait until the adapter component is deleted.")
def remove_cmd(name: str, spec_path: Path | None, endpoint: str | None, region: str | None,
               wait: bool) -> None:
    """Delete adapter NAME's component (only an adapter of this deployment)."""
    registry = _registry(spec_path, endpoint, region)
    removed = registry.remove(name, wait=wait)
    click.echo(f"Removed {name} from {registry.endpoint}.")
    if removed.managed_by == "spec":
        click.echo(f"Note: the spec manages {name}: the next `lmikit deploy` creates it again "
                   "unless you take it out of the spec's adapters.", err=True)


@adapters_group.command("adopt")
@click.argument("name")
@click.option("--spec", "spec_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The deployment's spec file; its adapters list must name NAME.")
def adopt_cmd(name: str, spec_path: Path) -> None:
    """Put adapter NAME, registered with `lmikit adapters`, under the spec.

    Add NAME to the spec's adapters first. From then on `lmikit deploy SPEC` manages it
    (updating it to the spec's source where that differs); before, deploy keeps it."""
    from lmikit.spec import load_spec

    spec = load_spec(spec_path)
    registry = _registry(spec_path, None, None)
    info = registry.adopt(name, spec)
    _echo(info)
    click.echo(f"{name} is managed by {spec_path} now: `lmikit deploy {spec_path}` updates it "
               f"to the spec's source where that differs (`--dry-run` shows whether it does).")
