"""``lmikit validate`` and ``lmikit schema``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from lmikit.cli._common import spec_argument


@click.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of the deployment spec."""
    from lmikit.schema import spec_json_schema

    click.echo(json.dumps(spec_json_schema(), indent=2, sort_keys=True))


@click.command("validate")
@spec_argument
@click.option("--no-plan", is_flag=True, help="Check the schema and model only, not the plan.")
def validate_cmd(spec: Path, no_plan: bool) -> None:
    """Check SPEC with the JSON Schema and the spec model (and that it can be planned)."""
    from lmikit.schema import validate_file

    loaded = validate_file(spec)
    if not no_plan:
        from lmikit.plan import plan_spec

        result = plan_spec(loaded, base_dir=spec.parent)
        click.echo(f"{spec}: valid ({loaded.model.id} on {loaded.instance.type}, tier "
                   f"{result.tier})")
    else:
        click.echo(f"{spec}: valid")
