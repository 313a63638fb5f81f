"""``lmikit render``: print one rendered target for a spec."""

from __future__ import annotations

from pathlib import Path

import click

from lmikit.cli._common import echo_json, load, spec_argument

TARGETS = ["lmcache", "env"]


@click.command("render")
@spec_argument
@click.option("--target", "-t", type=click.Choice(TARGETS), required=True,
              help="What to render.")
def render_cmd(spec: Path, target: str) -> None:
    """Print the TARGET rendered from SPEC."""
    loaded, plan = load(spec)
    if target == "lmcache":
        from lmikit.render.lmcache import render_lmcache_yaml

        click.echo(render_lmcache_yaml(plan), nl=False)
    elif target == "env":
        from lmikit.render.env import lmi_environment

        echo_json(lmi_environment(loaded, plan))
