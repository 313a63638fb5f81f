"""``lmikit doctor SPEC``: check a live deployment against its spec and plan."""

from __future__ import annotations

import re
from pathlib import Path

import click

from lmikit.cli._common import echo_json, load, spec_argument

_SINCE = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
EXIT_FAILED = 1
EXIT_NO_ACCESS = 3
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "wait": "cyan", "skip": "dim",
          "info": "blue"}


def parse_since(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h``, ``1d`` -> seconds (at least 60).

    >>> parse_since("30m"), parse_since("2h")
    (1800.0, 7200.0)
    """
    found = _SINCE.match(text.strip())
    if not found:
        raise click.BadParameter(f"{text!r} is not a duration; use e.g. 90s, 30m, 2h or 1d",
                                 param_hint="--since")
    seconds = float(found.group(1)) * _UNIT_S[found.group(2)]
    if not 60 <= seconds <= 15 * 86400:
        raise click.BadParameter(f"{text!r}: the window must be between 1m and 15d "
                                 "(CloudWatch keeps 1-minute data 15 days)",
                                 param_hint="--since")
    return seconds


@click.command("doctor")
@spec_argument
@click.option("--since", default="1h", show_default=True,
              help="Metrics window ending now: 90s, 30m, 2h, 1d.")
@click.option("--role-arn", default=None,
              help="Execution role to render with [default: the deployed endpoint config's].")
@click.option("--image-uri", default=None,
              help="Image to render with [default: the deployed base component's; pass the "
                   "one you deploy with to see image drift].")
@click.option("--bucket", default=None, help="Artifact bucket [default: the deployed one].")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor_cmd(spec: Path, since: str, role_arn: str | None, image_uri: str | None,
               bucket: str | None, as_json: bool) -> None:
    """Check the live deployment of SPEC: drift, health, whether the cache pays, TTFT.

    \b
    Exit codes:
      0  no check failed (a check may wait on a change in progress, or skip)
      1  a check failed: its fix says what to do
      2  the command line or SPEC is invalid
      3  doctor could not read the account (credentials, permissions, network,
         throttling): nothing was judged
    """
    from lmikit.accept import DEPLOY_TARGETS
    from lmikit.deploy import doctor
    from lmikit.errors import AwsError

    window = parse_since(since)
    loaded, _ = load(spec, DEPLOY_TARGETS)  # the SageMaker deployment; not HyperPod's manifest
    try:
        report = doctor(loaded, base_dir=spec.parent, role_arn=role_arn, image_uri=image_uri,
                        bucket=bucket, since_s=window)
    except AwsError as exc:
        click.echo(f"{exc.kind}: doctor could not check {loaded.name} in {loaded.region}, so "
                   f"nothing was judged: {exc}", err=True)
        raise click.exceptions.Exit(EXIT_NO_ACCESS) from exc
    if as_json:
        echo_json(report.to_dict())
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"lmikit doctor: {report.deployment} (last {since})")
        for column in ("check", "verdict", "what doctor found", "fix"):
            table.add_column(column, overflow="fold")
        for c in report.checks:
            table.add_row(c.name, f"[{_STYLE[c.verdict]}]{c.verdict}[/]", c.detail, c.fix)
        Console(width=160).print(table)
        if not report.healthy:
            click.echo("Something is wrong: see the failed checks and their fixes.")
        elif not report.settled:
            click.echo("Nothing failed, but SageMaker is still changing the deployment: run "
                       "lmikit doctor again once every resource is InService.")
        else:
            click.echo("Healthy.")
    if not report.healthy:
        raise click.exceptions.Exit(EXIT_FAILED)
