"""Helpers shared by the CLI commands."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from lmikit.accept import TARGETS

spec_argument = click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
targets_option = click.option(
    "--target", "-t", "targets", multiple=True, type=click.Choice(TARGETS),
    help="Check only this render target (repeatable) [default: every target].")


def load(spec_path: Path, targets: Iterable[str] = TARGETS) -> tuple[Any, Any]:
    """The one acceptance path (:func:`lmikit.accept.accept_spec`); returns (spec, plan)."""
    from lmikit.accept import accept_spec

    accepted = accept_spec(spec_path, targets)
    for note in accepted.notes:
        click.echo(f"Note: {note}", err=True)
    return accepted.spec, accepted.plan


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))
