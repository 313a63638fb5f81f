"""``lmikit simulate``: what users will see, and what it costs, per routing x KV-cache mode."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from lmikit.catalog import MAX_USD_PER_HOUR
from lmikit.cli._charts import chart, check_plot_path
from lmikit.cli._common import (
    calibrate_anyway_option,
    echo_json,
    size_error,
    size_options,
)

if TYPE_CHECKING:
    from lmikit.catalog import PriceTable
    from lmikit.sim import Deployment, ScenarioResult, Workload

WORKLOADS = ("long-doc-qa", "multi-turn-chat", "rag", "trace")
ROUTINGS = ("sticky_session", "prefix_aware", "kv_aware", "least_outstanding", "random")
MODES = ("off", "cpu", "cpu+disk", "remote")
# lmikit.sim.STORES, kept here so that --help does not import the simulator
REMOTE_STORES = ("redis", "lm", "s3", "mooncake", "infinistore", "hyperpod")
# flag (click parameter name) -> workloads it applies to
WORKLOAD_FLAGS: dict[str, tuple[str, ...]] = {
    "documents": ("long-doc-qa",),
    "document_tokens": ("long-doc-qa",),
    "context_tokens": ("multi-turn-chat",),
    "turns": ("multi-turn-chat",),
    "think_time": ("multi-turn-chat",),
    "corpus_chunks": ("rag",),
    "chunk_tokens": ("rag",),
    "chunks_per_request": ("rag",),
    "zipf": ("rag",),
    "requests": ("multi-turn-chat", "rag"),
    "output_tokens": ("long-doc-qa", "multi-turn-chat", "rag"),
    "concurrency": ("long-doc-qa", "multi-turn-chat", "rag"),
    "trace": ("trace",),
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """click's FloatRange lets nan and inf through; a simulation cannot run on either."""
    import math

    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number")
    return value


@click.command("simulate")
@click.argument("spec", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--model", "model_id", help="Model id (what-if form, instead of SPEC).")
@click.option("--instance", "instance_type", help="Instance type, e.g. ml.p4de.24xlarge.")
@click.option("--tp", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Tensor parallel degree (GPUs per copy).")
@click.option("--region", default="us-east-1", show_default=True,
              help="Region whose price is used (what-if form; a SPEC names its own).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True,
                                                         path_type=Path),
              help="The model's config.json, for a model not in lmikit's catalog (what-if "
                   "form; a SPEC names its own model.config_path).")
@click.option("--copies", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Model copies sharing one instance, as plan's --copies (what-if form; a "
                   "SPEC sets instance.copies_per_instance): they split its host memory, and "
                   "cost counts whole instances.")
@size_options
@click.option("--remote-store", type=click.Choice(REMOTE_STORES), default="redis",
              show_default=True,
              help="The store --kv-cache remote reads, behind LMCache's CPU tier (what-if "
                   "form; a SPEC's kv_cache.remote_url names its own): hyperpod is SageMaker "
                   "HyperPod's managed tiered storage.")
@click.option("--instances", type=click.IntRange(1, 512), default=None,
              help="Model copies requests are routed across [default: the spec's "
                   "min_count x copies_per_instance, else --copies].")
@click.option("--workload", type=click.Choice(WORKLOADS), required=True, help="What users send.")
@click.option("--documents", type=click.IntRange(1), default=46, show_default=True,
              help="long-doc-qa: distinct documents.")
@click.option("--document-tokens", type=click.IntRange(1), default=10_000, show_default=True,
              help="long-doc-qa: tokens per document.")
@click.option("--context-tokens", type=click.IntRange(2), default=8_000, show_default=True,
              help="multi-turn-chat: the history a session reaches at its last turn.")
@click.option("--turns", type=click.IntRange(1), default=8, show_default=True,
              help="multi-turn-chat: turns per session.")
@click.option("--think-time", type=click.FloatRange(0), default=5.0, show_default=True,
              callback=_finite, help="multi-turn-chat: seconds a user waits between turns.")
@click.option("--corpus-chunks", type=click.IntRange(1), default=1_000, show_default=True,
              help="rag: chunks in the corpus.")
@click.option("--chunk-tokens", type=click.IntRange(1), default=512, show_default=True,
              help="rag: tokens per corpus chunk.")
@click.option("--chunks-per-request", type=click.IntRange(1), default=4, show_default=True,
              help="rag: chunks retrieved per request.")
@click.option("--zipf", type=click.FloatRange(0, 10), default=1.0, show_default=True,
              callback=_finite, help="rag: Zipf exponent of chunk popularity (0 = uniform).")
@click.option("--requests", type=click.IntRange(1), default=1_000, show_default=True,
              help="multi-turn-chat and rag: requests in all (multi-turn-chat rounds it up "
                   "to whole sessions of --turns).")
@click.option("--output-tokens", type=click.IntRange(1), default=100, show_default=True,
              help="Tokens generated per request.")
@click.option("--concurrency", type=click.IntRange(1), default=4, show_default=True,
              help="Users with a request in flight at once.")
@click.option("--trace", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="trace: JSON lines (arrival_s, prompt_token_ids or chunk_ids, "
                   "output_tokens, session_id).")
@click.option("--routing", "routings", multiple=True, type=click.Choice(ROUTINGS),
              help="Routing strategy; repeat to compare [default: the spec's, else "
                   "sticky_session].")
@click.option("--kv-cache", "modes", multiple=True, type=click.Choice(MODES),
              help="LMCache tiers; repeat to compare [default: the spec's planned tier, "
                   "else cpu, or off where the host has no room for LMCache].")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--calibrate", "bench_path", type=click.Path(dir_okay=False, exists=True,
                                                           path_type=Path),
              help="Fit the coefficients to this lmikit bench --output file first.")
@calibrate_anyway_option
@click.option("--hourly-price", type=click.FloatRange(min=0, min_open=True,
                                                    max=MAX_USD_PER_HOUR),
              callback=_finite, help="USD per instance-hour (default: --prices, else lmikit's "
                                     "dated price table).")
@click.option("--prices", "prices_path", type=click.Path(dir_okay=False, path_type=Path),
              envvar="LMIKIT_PRICES", show_envvar=True,
              help="A price file from `lmikit prices fetch`, consulted before lmikit's table.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a chart of the TTFT distribution per scenario (PNG, SVG, PDF).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def simulate_cmd(ctx: click.Context, spec: Path | None, model_id: str | None,
                 instance_type: str | None, tp: int, region: str,
                 config_path: Path | None, copies: int, cpu_size_gb: float | str,
                 disk_size_gb: float | str, remote_store: str, instances: int | None,
                 workload: str,
                 routings: tuple[str, ...], modes: tuple[str, ...], seed: int,
                 bench_path: Path | None, calibrate_anyway: bool, hourly_price: float | None,
                 prices_path: Path | None, plot_path: Path | None, as_json: bool,
                 **flags: Any) -> None:
    """Simulate WORKLOAD on SPEC (or --model/--instance) for every --routing x --kv-cache.

    Prints TTFT percentiles, total time, throughput, where prompt tokens came from (GPU
    prefix cache, LMCache CPU, disk, remote, or recomputed), utilization and cost per 1K
    tokens. A remote tier needs no URL to be simulated: it is modelled as a store that
    never evicts, read at the remote bandwidth coefficient.

    Every request's prompt plus --output-tokens must fit the model's max_model_len (the
    spec's, else the plan's), as vLLM refuses longer ones; a workload has at most 100,000
    requests and 5,000,000 prompt chunks (docs/planner.md, "Bounds").
    """
    if plot_path is not None:
        check_plot_path(plot_path)
    check_workload_flags(ctx, workload, flags)
    prices = None
    if prices_path is not None:
        from lmikit.catalog import load_prices

        prices = load_prices(prices_path)
    dep, default_routing, default_mode = _deployment(spec, model_id, instance_type, tp,
                                                     region, config_path, copies, instances,
                                                     ctx, cpu_size_gb, disk_size_gb,
                                                     remote_store)
    routings = routings or (default_routing,)
    modes = modes or (default_mode,)
    if disk_size_gb != "auto" and "cpu+disk" not in modes:
        raise click.BadParameter("sizes the disk tier of --kv-cache cpu+disk, which is not "
                                 f"simulated here (--kv-cache {' '.join(modes)})",
                                 param_hint="--disk-size-gb")
    for mode in modes:
        if problem := dep.mode_problem(mode):
            raise click.BadParameter(problem, param_hint="--kv-cache")
    calibration = None
    if bench_path is not None:
        from lmikit.cli._common import calibrate

        calibration = calibrate(dep, bench_path, calibrate_anyway)
        dep = dep.with_coefficients(calibration.coefficients)
    work = _workload(workload, flags, dep.chunk_size, seed, dep.max_model_len or None)
    results = _run(dep, work, list(dict.fromkeys(routings)), list(dict.fromkeys(modes)),
                   seed, hourly_price, prices)
    if plot_path is not None:
        _plot(results, plot_path, f"{work.name} on {dep.instances} x {dep.model_id} "
                                  f"({dep.instance_type})")
    if as_json:
        data: dict[str, Any] = {
            "results": [r.to_dict() for r in results],
            "deployment": {"model": dep.model_id, "instance": dep.instance_type, "tp": dep.tp,
                           "copies_per_instance": dep.copies_per_instance,
                           "instances": dep.instances, "chunk_size": dep.chunk_size,
                           "max_batch_size": dep.max_batch_size, "region": dep.region,
                           "gpu_kv_tokens": dep.gpu_tokens,
                           "tier_tokens": {m: {"cpu": dep.tier_tokens[m][0],
                                               "disk": dep.tier_tokens[m][1]}
                                           for m in dict.fromkeys(modes)},
                           "remote_store": dep.engine.remote_store},
            "workload": {"name": work.name, **work.params},
            "coefficients": dep.engine.coeff.to_dict(), "seed": seed}
        if calibration is not None:
            data["calibration"] = calibration.to_dict()
        data["notes"] = _notes(results, dep, work)
        echo_json(data)
    else:
        _print(results, dep, work, calibration)


def _deployment(spec: Path | None, model_id: str | None, instance_type: str | None, tp: int,
                region: str, config_path: Path | None, copies: int, instances: int | None,
                ctx: click.Context, cpu_size_gb: float | str = "auto",
                disk_size_gb: float | str = "auto",
                remote_store: str = "redis") -> tuple[Deployment, str, str]:
    from lmikit.errors import PlanError
    from lmikit.sim import deployment, deployment_from_spec

    if spec is not None:
        from lmikit.cli._common import load, refuse_beside_spec

        refuse_beside_spec(ctx, ("tp", "copies", "region", "config_path", "cpu_size_gb",
                                 "disk_size_gb", "remote_store"),
                           bool(model_id or instance_type))

        from lmikit.accept import DEPLOY_TARGETS

        loaded, plan = load(spec, DEPLOY_TARGETS)  # SageMaker's routing and endpoint
        dep = deployment_from_spec(loaded, spec.parent, instances=instances)
        mode = {"none": "off"}.get(plan.tier, plan.tier)
        return dep, loaded.routing.strategy, mode
    if not (model_id and instance_type):
        raise click.UsageError("give a SPEC file, or both --model and --instance")
    from lmikit.catalog import REGION_RE

    if not REGION_RE.match(region):
        raise click.BadParameter(f"{region!r} is not an AWS region name such as us-east-1",
                                 param_hint="--region")
    try:
        dep = deployment(model_id, instance_type, tp=tp, copies=copies,
                         instances=instances or copies, region=region,
                         config_path=str(config_path) if config_path is not None else None,
                         cpu_size_gb=cpu_size_gb, disk_size_gb=disk_size_gb,
                         remote_store=remote_store)
    except PlanError as exc:
        flag = size_error(exc)
        if flag is None:
            raise
        raise flag from None
    if "cpu" in dep.tier_tokens:
        return dep, "sticky_session", "cpu"
    if ctx.get_parameter_source("modes") != ParameterSource.COMMANDLINE:
        click.echo(f"Note: simulating --kv-cache off, as the planner refuses LMCache's CPU "
                   f"tier on {dep.instance_type} ({dep.unplannable['cpu']})", err=True)
    return dep, "sticky_session", "off"


def check_workload_flags(ctx: click.Context, workload: str, flags: dict[str, Any]) -> None:
    """Refuse a workload flag given for a workload that does not take it, and a trace
    workload without its file."""
    for name, applies in WORKLOAD_FLAGS.items():
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE \
                and workload not in applies:
            raise click.BadParameter(f"applies to --workload {' or '.join(applies)}, not "
                                     f"{workload}", param_hint=_flag(name))
    if workload == "trace" and flags["trace"] is None:
        raise click.BadParameter("--workload trace needs a trace file", param_hint="--trace")


def _workload(name: str, f: dict[str, Any], chunk: int, seed: int,
              window: int | None) -> Workload:
    from lmikit.sim import load_trace, long_doc_qa, multi_turn_chat, rag

    if name == "long-doc-qa":
        return long_doc_qa(f["documents"], f["document_tokens"], f["output_tokens"],
                           f["concurrency"], chunk_size=chunk, context_window=window)
    if name == "multi-turn-chat":
        return multi_turn_chat(f["context_tokens"], f["turns"], f["output_tokens"],
                               f["concurrency"], requests=f["requests"],
                               think_time_s=f["think_time"], chunk_size=chunk,
                               context_window=window)
    if name == "rag":
        return rag(f["corpus_chunks"], f["chunk_tokens"], f["chunks_per_request"], f["zipf"],
                   f["output_tokens"], f["concurrency"], requests=f["requests"], seed=seed,
                   chunk_size=chunk, context_window=window)
    return load_trace(f["trace"], chunk_size=chunk, context_window=window)


def _run(dep: Deployment, work: Workload, routings: list[str], modes: list[str], seed: int,
         hourly_price: float | None, prices: PriceTable | None) -> list[ScenarioResult]:
    """Every scenario, with a progress bar on a terminal's stderr (transient)."""
    from lmikit.cli._common import progress_bar
    from lmikit.sim import simulate

    bar = progress_bar()
    if not bar.console.is_terminal:
        return simulate(dep, work, routings, modes, seed=seed, hourly_price_usd=hourly_price,
                        prices=prices)
    task = bar.add_task("simulating", total=len(routings) * len(modes))

    def step(done: int, total: int, routing: str, mode: str) -> None:
        bar.update(task, completed=done,
                   description=f"{routing} x {mode} ({len(work.requests):,} requests)")

    with bar:
        return simulate(dep, work, routings, modes, seed=seed, hourly_price_usd=hourly_price,
                        prices=prices, progress=step)


def _secs(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def _notes(results: list[ScenarioResult], dep: Deployment, work: Workload) -> list[str]:
    """What the table cannot say by itself: what the engine only bounds, then the caches."""
    from lmikit.sim import engine_notes, reading_notes

    return engine_notes(dep) + reading_notes(results, dep, work)


def _print(results: list[ScenarioResult], dep: Deployment, work: Workload,
           calibration: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from lmikit.catalog import usd_text

    console = Console()
    if not console.is_terminal:  # a pipe or file: do not squeeze the table to 80 columns
        console = Console(width=130)
    t = Table(title=f"lmikit simulate: {work.name} on {dep.instances} x {dep.model_id} "
              f"({dep.instance_type}, TP {dep.tp})", title_justify="left")
    for col in ("Routing", "KV", "TTFT p50", "p90", "p99", "Total", "tok/s",
                "Hit % gpu/cpu/disk/rem", "Miss", "Util", "$/1K"):
        t.add_column(col, justify="left" if col in ("Routing", "KV") else "right")
    for r in results:
        h = r.hit_rate
        util = sum(r.utilization) / len(r.utilization)
        t.add_row(r.routing, r.kv_cache, _secs(r.ttft_p50_s), _secs(r.ttft_p90_s),
                  _secs(r.ttft_p99_s), _secs(r.total_time_s),
                  f"{r.throughput_tokens_s:,.0f}",
                  "/".join(f"{h[k] * 100:.0f}" for k in ("gpu", "cpu", "disk", "remote")),
                  f"{h['miss']:.0%}", f"{util:.0%}",
                  "-" if r.usd_per_1k_tokens is None else usd_text(r.usd_per_1k_tokens))
    console.print(t)
    console.print(f"Price: {results[0].price_source}", highlight=False)
    for note in _notes(results, dep, work):
        console.print(f"Note: {note}", highlight=False)
    if calibration is not None:
        for line in calibration.summary():
            console.print(line, highlight=False)


def tick_label(seconds: float, minor: bool = False) -> str:
    """A log-scale TTFT tick as people read it: "50 ms", "200 ms", "3 s"; a minor tick is
    labelled only at 2x and 5x of its decade, so labels do not crowd.

    >>> [tick_label(x) for x in (0.001, 0.05, 0.2, 1.0, 30.0)]
    ['1 ms', '50 ms', '200 ms', '1 s', '30 s']
    >>> tick_label(0.3, minor=True), tick_label(0.5, minor=True)
    ('', '500 ms')
    """
    if seconds <= 0:
        return ""
    if minor:
        lead = seconds / 10 ** math.floor(math.log10(seconds) + 1e-9)
        if round(lead) not in (2, 5) or abs(lead - round(lead)) > 1e-6:
            return ""
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    return f"{seconds:.3g} s"


def cdf_steps(ttfts: list[float]) -> tuple[list[float], list[float]]:
    """The points of a TTFT distribution's step plot (sorted TTFTs, share of requests at or
    under each), from 0 at the first TTFT, so even one request draws a step.

    >>> cdf_steps([0.2, 0.5])
    ([0.2, 0.2, 0.5], [0.0, 0.5, 1.0])
    >>> cdf_steps([0.047])
    ([0.047, 0.047], [0.0, 1.0])
    """
    if not ttfts:
        return [], []
    n = len(ttfts)
    return [ttfts[0], *ttfts], [0.0, *[(i + 1) / n for i in range(n)]]


def _plot(results: list[ScenarioResult], path: Path, title: str) -> None:
    with chart(path, "simulate", "TTFT distribution") as ax:
        from matplotlib.ticker import FuncFormatter

        for r in results:
            ax.step(*cdf_steps(r.ttfts_s), where="post", label=f"{r.routing} / {r.kv_cache}")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: tick_label(x)))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: tick_label(x, minor=True)))
        ax.set_xlabel("TTFT")
        ax.set_ylabel("share of requests")
        ax.set_title(title)
