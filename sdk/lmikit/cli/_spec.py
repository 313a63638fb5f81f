"""``lmikit validate`` and ``lmikit schema``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from lmikit.cli._common import image_option, spec_argument, targets_option


@click.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of the deployment spec."""
    from lmikit.spec import spec_json_schema

    click.echo(json.dumps(spec_json_schema(), indent=2, sort_keys=True))


@click.command("validate")
@spec_argument
@targets_option
@image_option
def validate_cmd(spec: Path, targets: tuple[str, ...], image_kind: str) -> None:
    """Check that SPEC loads, plans and renders to every target (or each --target).

    It runs what `lmikit render`, `plan` and `deploy` run, so it refuses whatever they refuse.
    """
    from lmikit.accept import TARGETS
    from lmikit.cli._common import load

    chosen = targets or TARGETS
    loaded, plan = load(spec, chosen, warn=True, image=image_kind)
    click.echo(f"{spec}: valid ({loaded.model.id} on {loaded.instance.type}, tier {plan.tier}; "
               f"renders {', '.join(chosen)})")
