"""The Grafana dashboard: golden files, loads back through the SDK's models, cost estimate."""

from __future__ import annotations

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel

from lmikit.catalog._containers import ImageKind
from lmikit.catalog._prices import PRICES
from lmikit.render._grafana import grafana_dashboard, render_grafana_json
from lmikit.render._promql import container_queries, selector, series_in
from lmikit.resolve import plan_cost

from .conftest import GOLDEN_SPECS, assert_golden, load_example


@pytest.mark.parametrize("stem", GOLDEN_SPECS)
def test_grafana_dashboard_matches_golden(stem: str) -> None:
    spec, plan = load_example(stem)
    assert_golden(f"grafana-{stem}.json", render_grafana_json(spec, plan, image="lmikit"))


@pytest.mark.parametrize("image", ["stock", "lmikit"])
def test_grafana_dashboard_loads_back_through_sdk_models(example, image: ImageKind) -> None:
    spec, plan = example
    data = grafana_dashboard(spec, plan, image=image)
    model = Dashboard.from_json(data)
    assert model.uid == f"lmikit-{spec.name}"
    assert all(isinstance(p, Panel | RowPanel) for p in model.panels)
    container = {"Hit tokens/s by tier", "Hit rate", "Server TTFT histogram"}
    titles = {p.title for p in model.panels}
    assert "Model latency" in titles
    assert (container <= titles) is (image == "lmikit")


def test_grafana_on_the_stock_image_says_why_it_has_no_container_panels() -> None:
    """AWS's stock image serves only DJL's /server/metrics: no vLLM or LMCache series reach
    PromQL, so their panels (and the live cost, from vLLM's tokens/s) would stay empty."""
    spec, plan = load_example("docqa-qwen7b")
    board = grafana_dashboard(spec, plan, hourly_price_usd=2.0)
    assert not [t for p in board["panels"] for t in p.get("targets", [])
                if t["datasource"]["uid"] == "${prometheus}"]
    (note,) = [p for p in board["panels"] if p["title"] == "No container metrics"]
    assert "stock LMI image publishes no vLLM or LMCache metrics" in note["options"]["content"]
    assert grafana_dashboard(spec, plan) == grafana_dashboard(spec, plan, image="stock")


def test_grafana_dashboard_has_datasource_variables() -> None:
    spec, plan = load_example("docqa-qwen7b")
    model = Dashboard.from_json(grafana_dashboard(spec, plan, image="lmikit"))
    variables = {v.name: v for v in model.templating.list_val}
    assert variables["cloudwatch"].query == "cloudwatch"
    assert variables["prometheus"].query == "prometheus"
    targets = [t for p in grafana_dashboard(spec, plan, image="lmikit")["panels"]
               for t in p.get("targets", [])]
    assert {t["datasource"]["uid"] for t in targets} == {"${cloudwatch}", "${prometheus}"}


def test_plan_cost_uses_table_price_with_source() -> None:
    spec, plan = load_example("docqa-qwen7b")
    spec = spec.model_copy(update={"instance": spec.instance.model_copy(
        update={"type": "ml.g5.2xlarge"})})
    plan = plan.__class__(**{**plan.__dict__, "instance_type": "ml.g5.2xlarge"})
    cost = plan_cost(spec, plan)
    listed = PRICES[("us-east-1", "ml.g5.2xlarge")]  # the example's region
    price, source = listed.usd, listed.source
    assert (cost.hourly_price_usd, cost.price_source) == (price, source)
    assert cost.usd_per_1k_tokens == pytest.approx(
        price / cost.tokens_per_hour_per_instance * 1000, rel=1e-3)


def test_plan_cost_without_known_price_says_so() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")  # ml.p4de.24xlarge in us-west-2
    cost = plan_cost(spec, plan)
    assert cost.usd_per_1k_tokens is None
    assert "no list price" in cost.price_source


def test_given_price_adds_live_cost_panel() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")  # no listed price
    titles = [p["title"] for p in grafana_dashboard(spec, plan, hourly_price_usd=3.0,
                                                    image="lmikit")["panels"]]
    assert "Cost per 1K tokens (live estimate)" in titles
    titles = [p["title"] for p in grafana_dashboard(spec, plan, image="lmikit")["panels"]]
    assert "Cost per 1K tokens (live estimate)" not in titles


def test_live_cost_panel_prints_the_plans_estimate_to_three_significant_figures() -> None:
    spec, plan = load_example("docqa-qwen7b")  # listed price; about $0.00007 per 1K tokens
    board = grafana_dashboard(spec, plan, image="lmikit")
    live = next(p for p in board["panels"] if p["title"] == "Cost per 1K tokens (live estimate)")
    text = next(p for p in board["panels"]
                if p["title"] == "Cost per 1K tokens from the plan (estimate)")
    planned = text["options"]["content"].split("**")[1].split(" per 1K")[0]  # "$0.0000xyz"
    estimate = float(planned.lstrip("$"))
    assert estimate < 1e-3  # five decimals would show one significant figure
    shown = f"{estimate:.{live['fieldConfig']['defaults']['decimals']}f}"
    assert len(shown.lstrip("0.")) == 3  # three significant figures
    assert "$" + shown == planned


def test_promql_hit_token_bands_count_each_request_once() -> None:
    """LMCache's num_hit_tokens is counted by every tensor-parallel rank, so summing it over
    series gives TP times the tokens; vLLM's external_prefix_cache_hits is counted once per
    request by the scheduler."""
    q = container_queries(selector("rag"), kv_bytes_per_token=327_680)
    for key in ("hit_tokens_local", "hit_tokens_remote"):
        assert "lmcache_num_hit_tokens_total" not in series_in(q[key].expr)
    assert "vllm_external_prefix_cache_hits_total" in series_in(q["hit_tokens_local"].expr)


def test_promql_all_tier_hit_rate_is_over_every_prompt_token() -> None:
    """vllm:prefix_cache_queries stays 0 with prefix caching off (KVCacheManager.
    get_computed_blocks returns before it records stats), so the all-tier hit rate divides by
    vllm:prompt_tokens, which counts each request's prompt once at its first token
    (vllm/v1/metrics/stats.py, IterationStats.update_from_output)."""
    q = container_queries(selector("rag"), kv_bytes_per_token=327_680)
    series = series_in(q["prefix_hit_rate"].expr)
    assert "vllm_prefix_cache_queries_total" not in series
    assert "vllm_prompt_tokens_total" in series
    assert q["prefix_hit_rate"].expr.endswith(
        "/ sum(rate(vllm_prompt_tokens_total{'aws.sagemaker.endpoint.name'=\"rag\"}[5m]))")


def _panel(board: dict, title: str) -> dict:
    return next(p for p in board["panels"] if p["title"] == title)


def test_cache_tier_usage_is_one_copy_not_the_fleet() -> None:
    """Each copy's TP ranks report one series each (LMCache labels: model_name, worker_id,
    role, served_model_name); the panel is per copy like its planned sizes, so it takes the
    largest report per rank and sums the ranks. sum() over the series added every copy."""
    spec, plan = load_example("rag-qwen72b-nvme")  # 2 copies per instance, TP 4
    panel = _panel(grafana_dashboard(spec, plan, image="lmikit"),
                   "Cache tier usage (largest copy)")
    exprs = [t["expr"] for t in panel["targets"]]
    assert exprs and all(e.startswith("sum(max by (worker_id) (lmcache_local_") for e in exprs)
    assert "Planned per copy" in panel["description"]


def test_ttft_heatmap_reads_prometheus_buckets_as_a_heatmap() -> None:
    """Grafana's Prometheus query editor: format Heatmap "converts cumulative histograms to
    regular ones and sorts series by the bucket bound"; without it the cumulative le series
    are drawn as they are. The buckets are already a histogram: no calculation in the panel."""
    spec, plan = load_example("docqa-qwen7b")
    panel = _panel(grafana_dashboard(spec, plan, image="lmikit"), "Server TTFT histogram")
    (target,) = panel["targets"]
    assert target["format"] == "heatmap" and "_bucket" in target["expr"]
    assert panel["options"]["calculate"] is False


def test_no_panel_plots_the_remote_usage_lmcache_never_reports() -> None:
    """LMCache 0.5.6 defines LMCStatsMonitor.update_remote_cache_usage but never calls it, so
    lmcache:remote_cache_usage is always 0: no panel, query or EMF metric reads it."""
    from lmikit import metric_catalog as mc
    from lmikit.render._cloudwatch import dashboard_body, referenced_metrics

    spec, plan = load_example("rag-qwen72b-nvme")
    board = grafana_dashboard(spec, plan, image="lmikit")
    exprs = [t.get("expr", "") for p in board["panels"] for t in p.get("targets", [])]
    assert exprs and not [e for e in exprs if "remote_cache_usage" in e]
    body = dashboard_body(spec, plan, image="lmikit")
    assert "LMCacheRemoteUsageBytes" not in {m for _, m, _ in referenced_metrics(body)}
    assert not [m for m in mc.CONTAINER_EMF_METRICS if m.source == "lmcache:remote_cache_usage"]


def test_lmcache_never_updates_remote_cache_usage() -> None:
    """The fact the rule above rests on, read from the installed LMCache (the test set-up
    installs lmcache 0.5.6 without its dependencies)."""
    import importlib.util
    import re
    from pathlib import Path

    found = importlib.util.find_spec("lmcache")
    if found is None or not found.submodule_search_locations:
        pytest.skip("lmcache is not installed")
    root = Path(next(iter(found.submodule_search_locations)))
    calls = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if re.search(r"(?<!def )update_remote_cache_usage\(", p.read_text("utf-8"))]
    assert calls == []
