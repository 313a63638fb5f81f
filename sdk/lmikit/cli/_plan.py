"""``lmikit plan``: the capacity plan for a spec, or a what-if without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from lmikit.cli._common import (
    calibrate_anyway_option,
    echo_json,
    refuse_beside_spec,
    size_error,
    size_options,
    targets_option,
)

# what the what-if form takes and a SPEC states itself
WHAT_IF_ONLY = ("tp", "copies", "context_tokens", "request_tokens", "config_path",
                "cpu_size_gb", "disk_size_gb")


@click.command("plan")
@click.argument("spec", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--model", "model_id", help="Model id (what-if form, instead of SPEC).")
@click.option("--instance", "instance_type", help="Instance type, e.g. ml.p4de.24xlarge.")
@click.option("--tp", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Tensor parallel degree (GPUs per copy).")
@click.option("--copies", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Model copies sharing one instance.")
@click.option("--context", "context_tokens", type=click.IntRange(0), default=0,
              show_default=True, help="Reused working set in tokens one copy keeps hot.")
@click.option("--request-tokens", type=click.IntRange(1), default=10_000, show_default=True,
              help="Prompt length of a typical request.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True,
                                                         path_type=Path),
              help="The model's config.json, for a model not in lmikit's catalog (what-if "
                   "form; a SPEC names its own model.config_path).")
@size_options
@click.option("--calibrate", "bench_path", type=click.Path(dir_okay=False, exists=True,
                                                           path_type=Path),
              help="Predict TTFT with coefficients fitted to this lmikit bench --output file.")
@calibrate_anyway_option
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@targets_option
@click.pass_context
def plan_cmd(ctx: click.Context, spec: Path | None, model_id: str | None,
             instance_type: str | None, tp: int, copies: int, context_tokens: int,
             request_tokens: int, config_path: Path | None, cpu_size_gb: float | str,
             disk_size_gb: float | str, bench_path: Path | None,
             calibrate_anyway: bool, as_json: bool, targets: tuple[str, ...]) -> None:
    """Size the KV cache tiers for SPEC (or --model/--instance) and predict TTFT.

    A SPEC is accepted as `lmikit validate` accepts it: it must also render to every target
    (or each --target).
    """
    from lmikit.errors import PlanError
    from lmikit.planner import plan

    loaded = None
    sizes = {"cpu_size_gb": cpu_size_gb, "disk_size_gb": disk_size_gb}
    config = str(config_path) if config_path is not None else None
    if spec is not None:
        refuse_beside_spec(ctx, WHAT_IF_ONLY, bool(model_id or instance_type))
        from lmikit.accept import DEPLOY_TARGETS
        from lmikit.cli._common import load

        # the SageMaker deployment unless --target names others (HyperPod's refusals: validate)
        loaded, result = load(spec, targets or DEPLOY_TARGETS)
    else:
        if not (model_id and instance_type):
            raise click.UsageError("give a SPEC file, or both --model and --instance")
        if targets:
            raise click.UsageError("--target applies to a SPEC, not to --model/--instance")
        try:
            result = plan(model_id, instance_type, tp=tp, copies=copies,
                          context_tokens=context_tokens, request_tokens=request_tokens,
                          config_path=config, **sizes)
        except PlanError as exc:
            flag = size_error(exc)
            if flag is None:
                raise
            raise flag from None
    calibration = None
    if bench_path is not None:
        result, calibration = _calibrated(result, loaded, spec, bench_path,
                                          context_tokens, request_tokens, config,
                                          calibrate_anyway, sizes)
    if as_json:
        data = result.to_dict()
        if calibration is not None:
            data["calibration"] = calibration.to_dict()
        echo_json(data)
    else:
        print_plan(result)
        if calibration is not None:
            click.echo("\n".join(calibration.summary()))


def _calibrated(result: Any, loaded: Any, spec: Path | None, bench_path: Path,
                context_tokens: int, request_tokens: int,
                config: str | None, anyway: bool = False,
                sizes: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The plan again, its TTFT block costed with coefficients fitted to a bench file."""
    from functools import partial

    from lmikit.cli._common import calibrate
    from lmikit.planner import Costs, plan, plan_spec
    from lmikit.sim import deployment, deployment_from_spec

    if loaded is not None and spec is not None:
        dep = deployment_from_spec(loaded, spec.parent)
        replan = partial(plan_spec, loaded, spec.parent)
    else:
        dep = deployment(result.model_id, result.instance_type, tp=result.tp,
                         copies=result.copies, config_path=config,
                         cpu_size_gb=(sizes or {}).get("cpu_size_gb", "auto"))
        replan = partial(plan, result.model_id, result.instance_type, tp=result.tp,
                         copies=result.copies, context_tokens=context_tokens,
                         request_tokens=request_tokens, config_path=config, **(sizes or {}))
    calibration = calibrate(dep, bench_path, anyway)
    return replan(costs=Costs(calibration.coefficients, bench_path.name,
                              tuple(calibration.fitted))), calibration


def _tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 1_000:
        return f"{n / 1e3:.0f}K"
    return str(n)


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def print_plan(p: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"lmikit plan: {p.model_id} on {p.instance_type} "
              f"(TP {p.tp}, {p.copies} cop{'y' if p.copies == 1 else 'ies'}/instance)",
              show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    lm = p.lmcache
    t.add_row("KV per token", f"{p.kv_bytes_per_token:,} B ({p.kv_bytes_per_token / 1024:g} KiB)")
    t.add_row("Weights", f"{p.weight_bytes / 2**30:.1f} GiB")
    t.add_row("GPU KV capacity / copy", f"{_tokens(p.gpu_kv_capacity_tokens)} tokens")
    t.add_row("Working set", f"{_tokens(p.working_set_tokens)} tokens")
    t.add_row("Tier", f"[bold green]{p.tier}[/]")
    if p.tier != "none":
        t.add_row("LMCache per worker", f"chunk {lm['chunk_size']}, CPU "
                  f"{lm['max_local_cpu_size_gb']} GB, disk {lm['max_local_disk_size_gb']} GB"
                  + (f" at {lm['local_disk']}" if lm["local_disk"] else "")
                  + (f", remote {lm['remote_url']}" if lm["remote_url"] else "")
                  + f" ({lm['workers']} workers)")
        t.add_row("Tier capacity / copy", f"CPU {_tokens(p.cpu_capacity_tokens)}, disk "
                  f"{_tokens(p.disk_capacity_tokens)} tokens")
    t.add_row("Max model len", f"{p.max_model_len:,}")
    t.add_row("Component memory", f"{p.min_memory_mb:,} MB, {p.cpu_cores:g} vCPU per copy")
    if p.volume is not None:
        t.add_row("Volume", f"{p.volume.kind} {p.volume.size_gb:g} GB, weights "
                  f"{p.volume.weights_gb:g} GB")
    if p.startup is not None:
        st = p.startup
        t.add_row("Expected start", f"{st.expected_s / 60:.0f} min ({st.source}: download "
                  f"{(st.sagemaker_download_s + st.container_download_s) / 60:.0f} min, load "
                  f"{st.load_s / 60:.0f} min, warm-up {st.warmup_s / 60:.0f} min)")
        t.add_row("Start-up timeouts", f"download {st.download_timeout_s} s, health check "
                  f"{st.health_check_timeout_s} s, LMI model loading "
                  f"{st.model_loading_timeout_s} s" + (" (capped)" if st.capped else ""))
    pr = p.predicted
    t.add_row("TTFT on a miss", _secs(pr.ttft_miss_s))
    for tier in ("gpu", "cpu", "disk", "remote"):
        if tier not in pr.ttft_hit_s:  # remote: only where the plan has a remote tier
            continue
        hit, speed = pr.ttft_hit_s.get(tier), pr.speedup.get(tier)
        t.add_row(f"TTFT on a {tier} hit", f"{_secs(hit)}" + (f"  ({speed:.1f}x)" if speed else ""))
    console.print(t)
    console.print("[bold]Assumptions[/]")
    for a in p.assumptions:
        console.print(f"  - {a}", highlight=False)
    for w in p.warnings:
        console.print(f"[yellow]Warning:[/] {w}", highlight=False)
