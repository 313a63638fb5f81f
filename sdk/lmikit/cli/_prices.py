"""``lmikit prices``: read current on-demand SageMaker hosting prices, and show what is used."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lmikit.catalog import API_REGIONS
from lmikit.cli._common import check_writable, echo_json

if TYPE_CHECKING:
    from lmikit.catalog import Fetched


@click.group("prices")
def prices_group() -> None:
    """On-demand prices behind simulate's and the dashboard's cost per 1K tokens.

    lmikit ships a small dated table (us-east-1, the types a public source lists). `fetch`
    reads AWS's own price list for any region into a price file; pass it to `simulate`,
    `render -t grafana` and `show` with --prices FILE.
    """


@prices_group.command("fetch")
@click.option("--region", "regions", multiple=True, metavar="REGION",
              help="Region to price (repeatable) [default: the AWS session's region].")
@click.option("--instance", "instances", multiple=True, metavar="TYPE",
              help="Instance type to price (repeatable) [default: every GPU type in lmikit's "
                   "catalog].")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the price file here (merged into it when it exists).")
@click.option("--api-region", type=click.Choice(API_REGIONS),
              default="us-east-1", show_default=True,
              help="Where to call the AWS Price List Query API (it answers for every region).")
@click.option("--json", "as_json", is_flag=True, help="Print the prices as JSON.")
def fetch_cmd(regions: tuple[str, ...], instances: tuple[str, ...], output: Path | None,
              api_region: str, as_json: bool) -> None:
    """Read on-demand $/hour for real-time endpoint instances from the AWS price list.

    Needs AWS credentials allowed pricing:GetProducts. Types a region does not offer for
    real-time endpoints are listed as missing; nothing is guessed.
    """
    import boto3

    from lmikit.catalog import fetch_hosting_prices, load_prices

    if output is not None:  # checked before asking AWS, not after
        check_writable(output, "--output")
    session = boto3.Session()
    if not regions:
        if not session.region_name:
            raise click.UsageError("no region: pass --region (repeatable) or set "
                                   "AWS_DEFAULT_REGION")
        regions = (session.region_name,)
    previous = load_prices(output) if output is not None and output.exists() else None
    got = _fetch(fetch_hosting_prices, regions, instances or None, session, api_region)
    table = got.table if previous is None else previous.merged(got.table)
    if output is not None:
        try:
            table.save(output)
        except OSError as exc:
            raise click.FileError(str(output), exc.strerror or str(exc)) from exc
    if as_json:
        data = got.table.to_dict()
        data["missing"] = got.missing
        data["conflicts"] = got.conflicts
        echo_json(data)
    else:
        _print_fetched(got, output)


def _fetch(fetch: Any, regions: tuple[str, ...], instances: tuple[str, ...] | None,
           session: Any, api_region: str) -> Fetched:
    """``fetch`` with a transient progress line on a terminal's stderr."""
    from lmikit.cli._common import progress_bar

    bar = progress_bar()
    if not bar.console.is_terminal:
        result: Fetched = fetch(regions, instances, session=session, api_region=api_region)
        return result
    task = bar.add_task("reading the AWS price list", total=None)

    def step(region: str, products: int) -> None:
        bar.update(task, description=f"{region}: {products:,} products read")

    with bar:
        result = fetch(regions, instances, session=session, api_region=api_region,
                       progress=step)
    return result


def _print_fetched(got: Fetched, output: Path | None) -> None:
    rows = [(region, instance, price.usd, price.as_of)
            for (region, instance), price in sorted(got.table.rows.items())]
    _table("On-demand prices, real-time endpoints (AWS price list)",
           ("Region", "Instance", "$/hour", "Published"), rows)
    for region, names in sorted(got.missing.items()):
        click.echo(f"Not offered for real-time endpoints in {region} (or not priced): "
                   f"{', '.join(names)}", err=True)
    for line in got.conflicts:
        click.echo(f"Left out, prices disagree: {line}", err=True)
    if output is not None:
        click.echo(f"Wrote {len(got.table.rows)} price(s) to {output}; use it with "
                   f"--prices {output}")


@prices_group.command("show")
@click.option("--prices", "prices_path", type=click.Path(dir_okay=False, path_type=Path),
              envvar="LMIKIT_PRICES", show_envvar=True,
              help="A price file from `lmikit prices fetch` (its rows come first).")
@click.option("--region", "regions", multiple=True, metavar="REGION",
              help="Show only this region (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_cmd(prices_path: Path | None, regions: tuple[str, ...], as_json: bool) -> None:
    """Every price lmikit would use, with its source and date."""
    from lmikit.catalog import check_regions, listed, load_prices

    check_regions(regions)
    table = None if prices_path is None else load_prices(prices_path)
    rows = listed(table, regions or None)
    if as_json:
        echo_json({"prices": [{"region": r, "instance_type": i, "usd_per_hour": p.usd,
                               "as_of": p.as_of, "source": p.source} for r, i, p in rows]})
        return
    _table("On-demand prices lmikit uses", ("Region", "Instance", "$/hour", "As of", "Source"),
           [(r, i, p.usd, p.as_of, p.source) for r, i, p in rows])
    if not rows:
        click.echo("No prices for " + ", ".join(regions) + "; read them with "
                   "`lmikit prices fetch --region REGION`.", err=True)


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    t = Table(title=title, title_justify="left")
    for col in columns:
        t.add_column(col, justify="right" if col == "$/hour" else "left",
                     overflow="fold")
    for row in rows:
        t.add_row(*(f"{v:,.4f}" if isinstance(v, float) else str(v) for v in row))
    console.print(t)
