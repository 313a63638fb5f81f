"""The CloudWatch dashboard body: golden files, layout, and the PutDashboard request."""

from __future__ import annotations

import json
import re

import pytest

from lmikit.catalog._containers import ImageKind
from lmikit.render._cloudwatch import dashboard_body, dashboard_name, put_dashboard_kwargs

from ._metric_math import evaluate
from ._service_model import problems
from ._serving import ServingCopy, query_values
from .conftest import GOLDEN_SPECS, assert_golden, load_example


@pytest.mark.parametrize("stem", GOLDEN_SPECS)
def test_dashboard_body_matches_golden(stem: str) -> None:
    spec, plan = load_example(stem)
    text = json.dumps(dashboard_body(spec, plan, image="lmikit"), indent=2,
                      sort_keys=True) + "\n"
    assert_golden(f"cloudwatch-{stem}.json", text)


@pytest.mark.parametrize("image", ["stock", "lmikit"])
def test_put_dashboard_kwargs_match_service_model(example, image: ImageKind) -> None:
    spec, plan = example
    kwargs = put_dashboard_kwargs(spec, plan, image=image)
    assert problems("cloudwatch", "PutDashboard", kwargs) == []
    # The model documents (but does not encode) the name rule: max 255, [A-Za-z0-9_-].
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,255}", kwargs["DashboardName"])


@pytest.mark.parametrize("image", ["stock", "lmikit"])
def test_dashboard_body_widgets_fit_the_grid(example, image: ImageKind) -> None:
    spec, plan = example
    widgets = dashboard_body(spec, plan, image=image)["widgets"]
    assert 0 < len(widgets) <= 500
    assert all(0 <= w["x"] and w["x"] + w["width"] <= 24 for w in widgets)


def test_dashboard_body_is_deterministic() -> None:
    spec, plan = load_example("docqa-qwen7b")
    assert put_dashboard_kwargs(spec, plan) == put_dashboard_kwargs(spec, plan)


def test_dashboard_body_includes_client_ttft_only_when_opted_in() -> None:
    spec, plan = load_example("docqa-qwen7b")
    titles = [w["properties"].get("title") for w in dashboard_body(spec, plan)["widgets"]]
    assert "Client TTFT (seconds)" not in titles
    opted = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"client_ttft_metrics": True})})
    titles = [w["properties"].get("title") for w in dashboard_body(opted, plan)["widgets"]]
    assert "Client TTFT (seconds)" in titles


@pytest.mark.parametrize(("image", "detailed", "reason"), [
    ("lmikit", False, "observability.detailed_metrics is off"),
    ("stock", True, "stock LMI image publishes no vLLM or LMCache metrics"),
])
def test_dashboard_body_omits_container_panels_and_says_why(image: ImageKind, detailed: bool,
                                                            reason: str) -> None:
    """Panels on LMIKit/Container where nothing publishes it (the stock image has no EMF
    emitter; LMIKIT_EMF is rendered for lmikit's image only) would stay empty forever."""
    spec, plan = load_example("docqa-qwen7b")
    spec = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"detailed_metrics": detailed})})
    body = dashboard_body(spec, plan, image=image)
    assert not [w for w in body["widgets"] if w["type"] == "metric"
                and "LMIKit/Container" in json.dumps(w)]
    assert "lmcache_" not in json.dumps(body)
    summary = body["widgets"][0]["properties"]["markdown"]
    assert "No cache panels or cache alarms" in summary and reason in summary


def test_dashboard_body_defaults_to_the_stock_image() -> None:
    spec, plan = load_example("docqa-qwen7b")
    assert dashboard_body(spec, plan) == dashboard_body(spec, plan, image="stock")
    assert put_dashboard_kwargs(spec, plan, image="lmikit") != put_dashboard_kwargs(spec, plan)


def _container_titles(spec, plan) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    return {w["properties"]["title"]: w["properties"] for w in dashboard_body(
        spec, plan, image="lmikit")["widgets"]
        if w["type"] == "metric" and "LMIKit/Container" in json.dumps(w)}


def test_container_panels_are_metric_widgets_not_promql_text() -> None:
    spec, plan = load_example("rag-qwen72b-nvme")
    panels = _container_titles(spec, plan)
    assert {"KV cache hit tokens/s by tier", "Cache hit rate (prompt tokens, all copies)",
            "Server TTFT (seconds)", "LMCache tier usage (bytes, largest copy)",
            "LMCache CPU evictions/s", "LMCache retrieve"} <= set(panels)
    assert panels["KV cache hit tokens/s by tier"]["stacked"] is True
    ttft = [r[1] for r in panels["Server TTFT (seconds)"]["metrics"]]
    assert ttft == ["TimeToFirstTokenP50", "TimeToFirstTokenP90", "TimeToFirstTokenP99"]
    usage = panels["LMCache tier usage (bytes, largest copy)"]
    assert [r[1] for r in usage["metrics"]] == ["LMCacheCpuUsageBytes", "LMCacheDiskUsageBytes"]
    assert [a["label"] for a in usage["annotations"]["horizontal"]] == [
        "CPU tier size (copy)", "disk tier size (copy)"]
    # One PromQL text widget is left, for Query Studio.
    texts = [w for w in dashboard_body(spec, plan, image="lmikit")["widgets"]
             if w["type"] == "text" and "PromQL" in w["properties"]["markdown"]]
    assert len(texts) == 1


def test_container_panels_follow_the_plan_tier() -> None:
    spec, plan = load_example("chat-qwen1.5b-small")
    assert plan.tier == "none"
    panels = _container_titles(spec, plan)
    assert "LMCache" not in json.dumps(panels)  # no LMCache series without LMCache
    assert "Server TTFT (seconds)" in panels
    spec, plan = load_example("rag-qwen72b-nvme")
    spec = spec.model_copy(update={"observability": spec.observability.model_copy(
        update={"metric_publish_frequency_seconds": 300})})
    assert {p["period"] for p in _container_titles(spec, plan).values()} == {300}


def test_dashboard_name_is_derived_from_the_spec() -> None:
    spec, _ = load_example("docqa-qwen7b")
    assert dashboard_name(spec) == "docqa-qwen7b-lmikit"


def _lines_of(panel: dict, lines: list[dict[str, float]], period: int = 60
              ) -> dict[str, float | None]:
    """label -> value of every expression line of a panel, for one period of EMF lines."""
    rows = panel["metrics"]
    values = query_values([{"Id": r[-1]["id"], "MetricStat": {
        "Metric": {"MetricName": r[1]}, "Stat": r[-1]["stat"]}} for r in rows
        if isinstance(r[0], str)], lines)
    exprs = [r[0] for r in rows if isinstance(r[0], dict)]
    done: dict[str, float | None] = {}
    for e in exprs:  # an expression may name one listed before it
        done[e["id"]] = evaluate(e["expression"], {**values, **done}, period=period)
    return {e["label"]: done[e["id"]] for e in exprs}


@pytest.mark.parametrize(("request_", "want"), [
    ({"prompt": 10_000, "lmcache_hit": 9_984},
     {"prompt tokens from any tier": 0.9984, "LMCache (of tokens the GPU cache missed)": 0.9984,
      "GPU prefix cache": 0.0}),
    # every lookup misses: LMCache's own counters move by nothing, vLLM's count the miss
    ({"prompt": 10_000},
     {"prompt tokens from any tier": 0.0, "LMCache (of tokens the GPU cache missed)": 0.0,
      "GPU prefix cache": 0.0}),
    ({"prompt": 10_000, "gpu_hit": 4_000, "lmcache_hit": 3_000},
     {"prompt tokens from any tier": 0.7, "LMCache (of tokens the GPU cache missed)": 0.5,
      "GPU prefix cache": 0.4}),
])
def test_hit_rate_panel_counts_misses(request_: dict[str, int], want: dict[str, float]) -> None:
    """The hit-rate lines read vLLM's scheduler counters (a miss is counted), not LMCache's
    hit/requested tokens (LMCache 0.5.6 retrieves only what its lookup found, so that ratio
    reads ~1 whatever happens); token sums over every copy, no datapoint while idle."""
    spec, plan = load_example("docqa-qwen7b")
    panel = _container_titles(spec, plan)["Cache hit rate (prompt tokens, all copies)"]
    copy = ServingCopy()
    for _ in range(5):
        copy.request(**request_)
    assert _lines_of(panel, [copy.line()]) == pytest.approx(want)
    idle = _lines_of(panel, [copy.line()])
    assert set(idle.values()) == {None}


def _remote(spec, plan):  # type: ignore[no-untyped-def]
    from lmikit.planner._planner import plan_spec

    remote = spec.model_copy(update={"kv_cache": spec.kv_cache.model_copy(update={
        "mode": "remote", "remote_url": "redis://cache.internal:6379"})})
    return remote, plan_spec(remote)


@pytest.mark.parametrize("tier", ["cpu+disk", "remote"])
def test_hit_token_bands_add_up_to_prompt_tokens_with_tensor_parallelism(tier: str) -> None:
    """Every band counts a token once. vLLM's scheduler counts each request once; LMCache's
    num_hit_tokens is counted by every TP rank (each rank runs its own LMCacheEngine and
    PrometheusLogger, lmcache/v1/cache_engine.py), so it would stack TP times too high; the
    remote estimate sums the ranks' shards of the bytes read."""
    spec, plan = load_example("rag-qwen72b-nvme")
    if tier == "remote":
        spec, plan = _remote(spec, plan)
    assert plan.tp == 4 and plan.tier == tier
    panels = _container_titles(spec, plan)
    copy = ServingCopy(tp=plan.tp, kv_bytes_per_token=plan.kv_bytes_per_token)
    for _ in range(10):
        copy.request(16_000, gpu_hit=2_000, lmcache_hit=13_824,
                     remote_hit=4_096 if tier == "remote" else 0)
    line = copy.line()
    bands = _lines_of(panels["KV cache hit tokens/s by tier"], [line])
    prompt = _lines_of(panels["Tokens/s and requests/s"], [line])["prompt tokens/s"]
    assert prompt == pytest.approx(16_000 * 10 / 60)
    want = {"GPU prefix cache": 2_000, "LMCache CPU + disk": 13_824}
    if tier == "remote":
        want = {**want, "LMCache CPU + disk": 13_824 - 4_096, "LMCache remote (estimate)": 4_096}
    assert bands == pytest.approx({k: v * 10 / 60 for k, v in want.items()})
    assert sum(v or 0 for v in bands.values()) <= prompt
    assert line["LMCacheHitTokens"] == 4 * 13_824 * 10  # what the bands must not stack
