"""``lmikit advise``: the cheapest deployment that meets a latency target, for a workload."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lmikit.cli._charts import chart, check_plot_path
from lmikit.cli._common import calibrate_anyway_option, check_writable, echo_json
from lmikit.cli._simulate import (
    WORKLOAD_FLAGS,
    _finite,
    _workload,
    check_workload_flags,
    simulate_cmd,
)

if TYPE_CHECKING:
    from lmikit.advisor import Advice

# simulate's own options, shared: the workload and its flags, the seed and the prices
_SHARED = {"workload", "seed", "prices_path", *WORKLOAD_FLAGS}


@click.command("advise")
@click.argument("spec", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--model", "model_id", help="Model id (instead of SPEC).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True,
                                                         path_type=Path),
              help="The model's config.json, for a model not in lmikit's catalog (with "
                   "--model).")
@click.option("--slo", "slos", multiple=True, required=True,
              help="Objective, repeatable: ttft_p90_s=1.0, ttft_p50_s=0.5, "
                   "throughput_tokens_s>=9000. The first is the frontier's metric.")
@click.option("--region", help="Region to search and price [default: the spec's, else "
                               "us-east-1].")
@click.option("--instance-types", "instance_globs",
              help="Comma-separated globs of instance types, e.g. 'ml.g6e.*,ml.p4d.24xlarge' "
                   "[default: every catalog type sold on demand in the region].")
@click.option("--max-instances", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Most instances a candidate has.")
@click.option("--max-usd-hour", type=click.FloatRange(min=0, min_open=True), callback=_finite,
              help="Most a candidate may cost per hour, on demand.")
@click.option("--kv-cache", "modes", multiple=True,
              type=click.Choice(["off", "cpu", "cpu+disk", "remote"]),
              help="KV-cache modes to search; repeat [default: every one the spec can state].")
@click.option("--routing", "routings", multiple=True,
              type=click.Choice(["sticky_session", "prefix_aware", "least_outstanding",
                                 "random"]),  # kv_aware: refused on the LMI image
              help="Routing strategies to search; repeat [default: all].")
@click.option("--calibrate", "bench_path", type=click.Path(dir_okay=False, exists=True,
                                                           path_type=Path),
              help="A lmikit bench --output file: fit the coefficients to it, for the "
                   "candidates of the instance type and TP it was measured on (the others run "
                   "the uncalibrated engine).")
@calibrate_anyway_option
@click.option("--write", "write_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the answer as a spec (YAML) that lmikit validate accepts.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a chart of the frontier: cost per 1K tokens against the first "
                   "objective's metric (PNG, SVG, PDF).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.pass_context
def advise_cmd(ctx: click.Context, spec: Path | None, model_id: str | None,
               config_path: Path | None, slos: tuple[str, ...], region: str | None,
               instance_globs: str | None, max_instances: int, max_usd_hour: float | None,
               modes: tuple[str, ...], routings: tuple[str, ...], bench_path: Path | None,
               calibrate_anyway: bool, write_path: Path | None,
               plot_path: Path | None, as_json: bool, workload: str, seed: int,
               prices_path: Path | None, **flags: Any) -> None:
    """The cheapest deployment of SPEC (or --model) that meets every --slo on WORKLOAD.

    Searches instance type x tensor-parallel degree x copies per instance x instance count
    x KV-cache mode and size x routing, prunes what the planner refuses or a TTFT lower
    bound rules out, simulates the rest (a reduced request count first, the frontier at
    the full count), and prints the Pareto frontier of cost per 1K tokens against the
    first objective's metric, marking each candidate that meets every objective.
    """
    from lmikit.advisor import advise, parse_slos
    from lmikit.cli._common import calibrate

    if write_path is not None:
        check_writable(write_path, "--write")
    if plot_path is not None:
        check_plot_path(plot_path)
    check_workload_flags(ctx, workload, flags)
    if (spec is None) == (model_id is None):
        raise click.UsageError("give a SPEC file or --model, not both")
    if spec is not None and config_path is not None:
        raise click.UsageError("--config goes with --model; a SPEC names model.config_path")
    parse_slos(list(slos))  # a bad objective fails before anything is loaded
    prices = None
    if prices_path is not None:
        from lmikit.catalog import load_prices

        prices = load_prices(prices_path)
    chunk, window = _chunk_and_window(spec)
    work = _workload(workload, flags, chunk, seed, window)
    advice = advise(work, list(slos), spec=spec, model=model_id, config_path=config_path,
                    region=region,
                    instance_types=[g.strip() for g in instance_globs.split(",") if g.strip()]
                    if instance_globs else None,
                    max_instances=max_instances, max_usd_hour=max_usd_hour, prices=prices,
                    kv_caches=list(modes) or None, routings=list(routings) or None, seed=seed,
                    calibrate_with=bench_path, calibrate_anyway=calibrate_anyway,
                    fitter=calibrate)
    if write_path is not None and advice.best is not None:
        advice.write_spec(write_path)
        click.echo(f"Wrote {write_path}", err=True)
    if plot_path is not None:
        _plot(advice, plot_path)
    if as_json:
        echo_json(advice.to_dict())
    else:
        _print(advice)


for _param in simulate_cmd.params:  # the workload flags, as simulate takes them
    if _param.name in _SHARED:
        advise_cmd.params.append(_param)


def _chunk_and_window(spec: Path | None) -> tuple[int, int | None]:
    """The spec's LMCache chunk size and max_model_len (the workload is cut and bounded as
    the deployments will serve it); the defaults for --model."""
    if spec is None:
        return 256, None
    from lmikit.spec import load_spec

    loaded = load_spec(spec)
    return loaded.kv_cache.chunk_size, loaded.engine.max_model_len


def _print(advice: Advice) -> None:
    from rich.console import Console
    from rich.table import Table

    from lmikit.catalog import usd_text

    console = Console()
    if not console.is_terminal:
        console = Console(width=140)
    r = advice.result
    target = advice.slos[0]
    t = Table(title=f"lmikit advise: {advice.workload.name}, "
              f"{', '.join(s.text() for s in advice.slos)} — Pareto frontier "
              f"(cost per 1K tokens against {target.metric})", title_justify="left")
    for col in ("", "Instance", "TP", "Copies", "Count", "KV", "CPU GB", "Routing", "TTFT p50",
                "p90", "tok/s", "$/hour", "$/1K", "SLO"):
        t.add_column(col, justify="left" if col in ("Instance", "KV", "Routing") else "right")
    shown = list(r.pareto)
    if r.best is not None and r.best not in shown:
        shown.append(r.best)
    for e in shown:
        c, f = e.candidate, e.figures
        t.add_row("*" if e is r.best else "", c.instance_type, str(c.tp), str(c.copies),
                  str(c.instances), c.kv_cache, str(c.cpu_size_gb), c.routing,
                  f"{f.ttft_p50_s:.3f} s", f"{f.ttft_p90_s:.3f} s",
                  f"{f.throughput_tokens_s:,.0f}", f"${f.usd_per_hour:,.2f}",
                  usd_text(f.usd_per_1k_tokens), "yes" if e.meets_slo else "no")
    console.print(t)
    console.print(f"{r.considered:,} candidates considered, {r.pruned:,} pruned before "
                  f"simulating, {r.screened:,} screened at a reduced request count, "
                  f"{r.refined:,} run in full, in {advice.seconds:.1f} s", highlight=False)
    if r.best is None:
        console.print("No candidate was simulated.", highlight=False)
    elif advice.meets_slo:
        c = r.best.candidate
        console.print(f"Best (*): {c.instances} x {c.instance_type}, TP {c.tp}, {c.copies} "
                      f"copies each, kv_cache {c.kv_cache}, {c.routing}: "
                      f"{usd_text(r.best.figures.usd_per_1k_tokens)} per 1K tokens",
                      highlight=False)
    else:
        misses = "; ".join(f"{m} {v['value']:g} against {v['bound']:g} ({v['by']:.0%} off)"
                           for m, v in r.misses.items())
        console.print(f"No candidate meets every objective; the closest (*) misses {misses}",
                      highlight=False)
    for line in advice.calibration_lines():
        console.print(line, highlight=False)
    console.print(advice.trust_heading(), highlight=False)
    for line in advice.trust():
        console.print(f"  {line}", highlight=False)
    for note in advice.notes:
        console.print(f"Note: {note}", highlight=False)


def _plot(advice: Advice, path: Path) -> None:
    metric = advice.slos[0].metric
    r = advice.result
    with chart(path, "advise", "frontier") as ax:
        ax.scatter([e.figures.usd_per_1k_tokens for e in r.entries],
                   [e.figures.metric(metric) for e in r.entries], s=12, alpha=0.4,
                   label="simulated in full")
        front = r.pareto
        ax.plot([e.figures.usd_per_1k_tokens for e in front],
                [e.figures.metric(metric) for e in front], "o-", label="Pareto frontier")
        if r.best is not None:
            ax.plot([r.best.figures.usd_per_1k_tokens], [r.best.figures.metric(metric)], "r*",
                    markersize=14, label="answer")
        ax.axhline(advice.slos[0].bound, color="grey", linestyle="--", label="objective")
        ax.set_xlabel("USD per 1K tokens")
        ax.set_ylabel(metric)
        ax.set_title(f"lmikit advise: {advice.workload.name}")
