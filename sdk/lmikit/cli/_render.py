"""``lmikit render``: print one rendered target for a spec."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from lmikit.accept import TARGETS
from lmikit.catalog import MAX_USD_PER_HOUR
from lmikit.cli._common import image_option, spec_argument

if TYPE_CHECKING:
    from lmikit.catalog import ImageKind


@click.command("render")
@spec_argument
@click.option("--target", "-t", type=click.Choice(TARGETS), required=True,
              help="What to render.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the rendered text to this file instead of stdout (missing folders "
              "are created).")
@click.option("--namespace", default="default", show_default=True,
              help="hyperpod: Kubernetes namespace of the manifest.")
@click.option("--vllm-image", default=None, metavar="IMAGE",
              help="hyperpod: vLLM worker image for manifests with the operator's KV cache or "
              "intelligent routing (pinned tag or digest; default: the AWS sample's vLLM "
              "0.11.1 image, or a newer known one when the model needs it; see "
              "docs/hyperpod.md).")
@click.option("--hourly-price", type=click.FloatRange(min=0, min_open=True,
                                                    max=MAX_USD_PER_HOUR), default=None,
              help="grafana: on-demand $/hour per instance for the cost panels (default: "
              "--prices, else lmikit's small us-east-1 table, where it has the instance "
              "type).")
@click.option("--prices", "prices_path", type=click.Path(dir_okay=False, path_type=Path),
              envvar="LMIKIT_PRICES", show_envvar=True,
              help="grafana: a price file from `lmikit prices fetch` (prices the spec's "
              "region).")
@image_option
def render_cmd(spec: Path, target: str, output: Path | None, namespace: str,
               vllm_image: str | None, hourly_price: float | None, prices_path: Path | None,
               image_kind: str) -> None:
    """Print the TARGET rendered from SPEC (what `lmikit validate --target TARGET` checks)."""
    from lmikit.accept import RenderOptions, accept_spec
    from lmikit.catalog import load_prices

    # only the dashboard has a price (LMIKIT_PRICES may name a file for every command)
    prices = load_prices(prices_path) if prices_path is not None and target == "grafana" \
        else None

    image: ImageKind = "lmikit" if image_kind == "lmikit" else "stock"
    accepted = accept_spec(spec, (target,),
                           RenderOptions(namespace, hourly_price, vllm_image, image, prices))
    text = accepted.output(target)
    for warning in accepted.warnings:
        click.echo(f"Warning: {warning}", err=True)
    if output is None:
        click.echo(text, nl=False)
        return
    write_output(output, text)


def write_output(output: Path, text: str) -> None:
    """Write ``text`` to ``output``, creating its missing folders (and saying so)."""
    folder = output.parent
    if folder.exists() and not folder.is_dir():
        raise click.FileError(str(output), f"{folder} is not a folder")
    try:
        if not folder.is_dir():
            folder.mkdir(parents=True)
            click.echo(f"Created {folder}/", err=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise click.FileError(str(output), exc.strerror or str(exc)) from exc
    click.echo(f"Wrote {output}", err=True)
