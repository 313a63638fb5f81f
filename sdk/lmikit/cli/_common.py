"""Helpers shared by the CLI commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))


def load(spec_path: Path) -> tuple[Any, Any]:
    """Load a spec and plan it; returns (spec, plan)."""
    from lmikit.loader import load_spec
    from lmikit.plan import plan_spec

    spec = load_spec(spec_path)
    return spec, plan_spec(spec, base_dir=spec_path.parent)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))
