"""Helpers shared by the CLI commands."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from lmikit.accept import TARGETS

# botocore: sagemaker's EndpointName, ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
SPEC_SUFFIXES = (".yaml", ".yml", ".json")

spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
targets_option = click.option(
    "--target", "-t", "targets", multiple=True, type=click.Choice(TARGETS),
    help="Check only this render target (repeatable) [default: every target].")
image_option = click.option(
    "--image", "image_kind", type=click.Choice(["stock", "lmikit"]), default="stock",
    show_default=True, help="env, serving-properties, sagemaker, cloudwatch, grafana: the image "
    "that runs the model (AWS's stock LMI image, which `lmikit deploy` runs, or lmikit's "
    "container/Dockerfile, which `cdk deploy` builds); the cache panels and alarms need "
    "lmikit's.")


class SizeGB(click.ParamType):
    """An LMCache tier size per worker as the spec's ``kv_cache.cpu_size_gb`` takes it:
    ``auto`` or a number of GB above 0."""

    name = "auto|GB"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float | str:
        import math

        if value == "auto" or isinstance(value, float):
            return value
        try:
            size = float(value)
        except (TypeError, ValueError):
            size = math.nan
        if not math.isfinite(size) or size <= 0:
            self.fail(f"{value!r} is not 'auto' or a size in GB (a number greater than 0)",
                      param, ctx)
        return size


def size_options(command: Any) -> Any:
    """``--cpu-size-gb`` and ``--disk-size-gb``: LMCache's tier sizes in the what-if form."""
    command = click.option(
        "--disk-size-gb", type=SizeGB(), default="auto", show_default=True,
        help="LMCache NVMe per worker for the cpu+disk tier, in GB, as the spec's "
             "kv_cache.disk_size_gb (what-if form; auto: what the NVMe can give).")(command)
    return click.option(
        "--cpu-size-gb", type=SizeGB(), default="auto", show_default=True,
        help="LMCache CPU RAM per worker, in GB, as the spec's kv_cache.cpu_size_gb "
             "(what-if form; auto: what the host can give).")(command)


def size_error(exc: Exception) -> click.BadParameter | None:
    """A planner refusal of an explicit --cpu-size-gb or --disk-size-gb, as the flag's
    error (None for any other refusal)."""
    text = str(exc)
    for name in ("cpu_size_gb", "disk_size_gb"):
        if text.startswith((f"{name} is ", f"kv_cache.{name} ")):
            return click.BadParameter(text, param_hint="--" + name.replace("_", "-"))
    return None


def load(spec_path: Path, targets: Iterable[str] = TARGETS, *, warn: bool = False,
         image: str = "stock") -> tuple[Any, Any]:
    """The one acceptance path (:func:`lmikit.accept.accept_spec`); returns (spec, plan).
    ``warn``: also print what the renderers say the deployment will lack, what the
    ``image`` leaves out, and a Hub gate lmikit cannot tell (validate)."""
    from lmikit.accept import RenderOptions, accept_spec

    accepted = accept_spec(spec_path, targets,
                           RenderOptions(image="lmikit" if image == "lmikit" else "stock"))
    for note in accepted.notes:
        click.echo(f"Note: {note}", err=True)
    for warning in accepted.warnings if warn else ():
        click.echo(f"Warning: {warning}", err=True)
    if warn and accepted.image_note:
        click.echo(f"Note: {accepted.image_note}", err=True)
    if warn and accepted.gate_note:
        click.echo(f"Note: {accepted.gate_note}", err=True)
    return accepted.spec, accepted.plan


@dataclass(frozen=True)
class Deployed:
    """The endpoint a command acts on: named, or read from a spec file (``spec``)."""

    name: str
    region: str | None  # None: boto3's configured region
    spec_path: Path | None = None
    spec: Any = None  # the loaded DeploymentSpec of spec_path


def spec_or_endpoint(target: str, region: str | None, spec: Any = None,
                     param_hint: str = "SPEC_OR_ENDPOINT") -> Deployed:
    """``target`` as a spec file (a path ending in .yaml, .yml or .json, or any file that
    exists), whose name and region are used, or as an endpoint name in ``region``. A spec's
    region wins over AWS_DEFAULT_REGION; a different ``--region`` on the command line is
    refused. ``spec``: the spec already loaded from ``target``."""
    path = Path(target)
    if path.suffix not in SPEC_SUFFIXES and not path.is_file():
        if not ENDPOINT_NAME.fullmatch(target):
            raise click.BadParameter(
                f"{target!r} is neither a spec file (no such file) nor an endpoint name "
                "(letters, digits and hyphens, at most 63 characters, starting and ending "
                "with a letter or digit)", param_hint=param_hint)
        return Deployed(target, region)
    if spec is None:
        from lmikit.spec import load_spec

        spec = load_spec(path)
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    typed = ctx is not None and ctx.get_parameter_source("region") \
        == ParameterSource.COMMANDLINE
    if typed and region and region != spec.region:
        raise click.UsageError(f"--region {region} is not the region of {target} "
                               f"({spec.region}); give one or the other")
    return Deployed(spec.name, spec.region, path, spec)


def refuse_beside_spec(ctx: click.Context, what_if: Iterable[str], model_given: bool) -> None:
    """Refuse the what-if form beside a SPEC, which states each of its settings itself:
    ``model_given`` (--model or --instance) or any option named in ``what_if`` (parameter
    names) given on the command line, each one named."""
    from click.core import ParameterSource

    flags = {p.name: p.opts[0] for p in ctx.command.params}
    given = [flags[name] for name in what_if
             if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
    if model_given or given:
        raise click.UsageError("give either SPEC or --model/--instance"
                               + "".join(f"/{g}" for g in given)
                               + ", not both: a SPEC sets these itself")


def check_writable(path: Path, param_hint: str) -> None:
    """Refuse, before any work, an output file that could not be written after it: a
    missing or read-only folder, or a read-only file (a folder given as the file is
    refused by the option's ``click.Path(dir_okay=False)``)."""
    import os

    folder = path.parent
    why = (f"folder {str(folder)!r} does not exist" if not folder.is_dir()
           else f"folder {str(folder)!r} is not writable" if not os.access(folder, os.W_OK)
           else "the file is not writable" if path.exists() and not os.access(path, os.W_OK)
           else "")
    if why:
        raise click.BadParameter(f"cannot write {str(path)!r}: {why}", param_hint=param_hint)


def calibrate_anyway_option(f: Any) -> Any:
    """``--calibrate-anyway``, as plan and simulate take it."""
    return click.option(
        "--calibrate-anyway", "calibrate_anyway", is_flag=True,
        help="Fit the --calibrate file even where its model, instance type, TP, kv_cache or "
             "adapter is unknown or not this deployment's (a note names each).")(f)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def progress_bar() -> Any:
    """The CLI's progress bar: on stderr, gone once its work ends (a ``rich`` Progress)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress("[progress.description]{task.description}", BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                    transient=True)


def calibrate(dep: Any, bench_path: Path, anyway: bool = False) -> Any:
    """Fit ``dep``'s coefficients to a bench file, with a progress bar on a terminal;
    ``anyway``: fit a file measured on another or an unknown deployment too."""
    from lmikit.sim import fit, load_bench

    bench = load_bench(bench_path)
    bar = progress_bar()
    if not bar.console.is_terminal:
        return fit(dep, bench, unverified=anyway)
    task = bar.add_task(f"fitting to {len(bench.records):,} measured requests", total=None)

    def step(done: int, at_most: int) -> None:
        bar.update(task, completed=done, total=at_most)

    with bar:
        return fit(dep, bench, progress=step, unverified=anyway)
