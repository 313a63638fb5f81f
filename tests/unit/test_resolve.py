"""The resolve step: each derived decision is made once, from (spec, plan, image kind), and the
renderers read it instead of calling back into the catalog or the planner."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

import lmikit.catalog
import lmikit.planner
from lmikit import load_spec
from lmikit.accept._accept import TARGETS, RenderOptions, render_target
from lmikit.catalog import (
    IMAGE_KINDS,
    cache_metrics_absent_reason,
    get_instance,
    hub_gate,
    metrics_endpoint,
    on_demand_problem,
    option_rows,
    publishes_cache_metrics,
    usd_text,
)
from lmikit.errors import RenderError
from lmikit.planner import (
    estimate_startup,
    isolates_base,
    plan_spec,
    startup_problem,
    weights_source,
)
from lmikit.render import model_artifact_files, render_requests, weights_model_py
from lmikit.resolve import Resolved, plan_cost, resolve_spec
from tests.conftest import DEFAULT_SPEC, EXAMPLE_SPECS
from tests.unit.layer_walk import walk

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
CASES = [(path, kind) for path in EXAMPLE_SPECS for kind in IMAGE_KINDS]
# What a renderer once called back into; with a Resolved in hand it must call none of them.
CALLED_BACK = ("weights_source", "estimate_startup", "startup_problem", "isolates_base",
               "metrics_endpoint", "publishes_cache_metrics", "cache_metrics_absent_reason",
               "option_rows", "get_instance", "on_demand_problem", "hub_gate", "price_or_reason",
               "hourly_price", "usd_text", "usd_decimals", "resolve_spec", "plan_cost")


def _case_id(case: tuple[Path, str]) -> str:
    return f"{case[0].stem}-{case[1]}"


def _spec_and_plan(path: Path):  # type: ignore[no-untyped-def]
    spec = load_spec(path)
    return spec, plan_spec(spec, path.parent)


def test_resolved_is_frozen() -> None:
    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    resolved = resolve_spec(spec, plan)
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolved.weights_source = "s3"  # type: ignore[misc]
    assert isinstance(resolved.option_rows, tuple)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_each_decision_is_what_the_catalog_and_planner_decide(case) -> None:
    path, kind = case
    spec, plan = _spec_and_plan(path)
    r = resolve_spec(spec, plan, image_kind=kind)
    source = weights_source(spec)
    start = plan.startup or estimate_startup(plan.weight_bytes, source)
    detailed = spec.observability.detailed_metrics
    assert (r.image_kind, r.weights_source, r.startup) == (kind, source, start)
    assert r.startup_problem == startup_problem(start, spec.model.id, spec.model.hub_id)
    assert r.metrics_endpoint == metrics_endpoint(spec.observability.metrics_path, kind)
    assert r.publishes_cache_metrics == publishes_cache_metrics(kind, detailed)
    assert r.cache_metrics_absent_reason == cache_metrics_absent_reason(kind, detailed)
    assert r.option_rows == option_rows(spec.model.catalog_id,
                                        spec.engine.tensor_parallel_degree)
    assert r.isolates_base == isolates_base(spec, plan.uses_lmcache)
    assert r.instance == get_instance(spec.instance.type)
    assert r.on_demand_problem == on_demand_problem(spec.region, spec.instance.type)
    assert r.hub_gate == (None if spec.model.is_s3 else hub_gate(spec.model.id))
    assert r.sagemaker_copies_weights == (source == "s3-sagemaker")


def test_the_planned_cost_is_priced_as_the_caller_says() -> None:
    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    listed = resolve_spec(spec, plan)
    given = resolve_spec(spec, plan, hourly_price=12.5)
    assert listed.cost == plan_cost(spec, plan)
    assert given.cost == plan_cost(spec, plan, 12.5)
    assert given.cost.hourly_price_usd == 12.5 != listed.cost.hourly_price_usd
    assert given.cost.usd_per_1k_tokens is not None
    assert given.planned_cost_text == usd_text(given.cost.usd_per_1k_tokens)


def test_a_cost_without_a_price_is_not_printed_as_a_number() -> None:
    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    unpriced = spec.model_copy(update={"region": "ap-southeast-7"})
    resolved = resolve_spec(unpriced, plan)
    assert resolved.cost.usd_per_1k_tokens is None
    assert resolved.planned_cost_text == "n/a"


def _render_all(spec, plan, options: RenderOptions, targets: list[str],  # type: ignore[no-untyped-def]
                resolved: Resolved | None = None) -> dict[str, str]:
    """Each target's text, or the refusal it raises (a refusal must not change either)."""
    out = {}
    for target in targets:
        try:
            out[target] = render_target(target, spec, plan, options, IMAGE, resolved=resolved)
        except RenderError as exc:
            out[target] = f"refused: {exc}"
    return out


def _refuse_call_backs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every catalog or planner function a renderer once called back into raise, in
    every module that holds it (the renderers', the faces', the defining ones)."""

    def refuse(name: str):  # type: ignore[no-untyped-def]
        def called(*args: object, **kwargs: object) -> None:
            raise AssertionError(f"a renderer called {name} with a Resolved in hand")
        return called

    holders = [m for n, m in list(sys.modules.items())
               if n.startswith(("lmikit.render", "lmikit.catalog", "lmikit.planner",
                                "lmikit.resolve"))]
    holders += [lmikit.catalog, lmikit.planner]
    for module in holders:
        for name in CALLED_BACK:
            if callable(getattr(module, name, None)):
                monkeypatch.setattr(module, name, refuse(name))


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_renderers_given_a_resolved_call_nothing_back_and_render_the_same(case, monkeypatch,
                                                                           tmp_path) -> None:
    path, kind = case
    spec, plan = _spec_and_plan(path)
    options = RenderOptions(image=kind)
    # HyperPod's workers run the stock image: with lmikit's, it needs a second resolution
    targets = [t for t in TARGETS if kind == "stock" or t != "hyperpod"]
    plain = _render_all(spec, plan, options, targets)
    files = model_artifact_files(spec, plan, tmp_path, image=kind)
    prefix_file = weights_model_py(spec, plan)
    resolved = resolve_spec(spec, plan, image_kind=kind)

    _refuse_call_backs(monkeypatch)
    assert _render_all(spec, plan, options, targets, resolved) == plain
    assert model_artifact_files(spec, plan, tmp_path, image=kind, resolved=resolved) == files
    assert weights_model_py(spec, plan, resolved=resolved) == prefix_file


def test_the_refusal_catches_a_renderer_that_calls_back(monkeypatch) -> None:
    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    _refuse_call_backs(monkeypatch)
    with pytest.raises(AssertionError, match="called resolve_spec"):
        render_target("env", spec, plan)  # no Resolved: it must resolve, and that refuses


def test_a_renderer_reads_the_decision_it_is_given() -> None:
    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    resolved = resolve_spec(spec, plan)
    longer = dataclasses.replace(resolved, startup=dataclasses.replace(
        resolved.startup, health_check_timeout_s=resolved.startup.health_check_timeout_s + 60))
    kwargs = {"image_uri": "img:1", "execution_role_arn": "arn:aws:iam::1:role/r",
              "model_artifact_url": "s3://b/m.tar.gz"}
    variant = render_requests(spec, plan, resolved=longer, **kwargs
                              ).endpoint_config["ProductionVariants"][0]
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == \
        resolved.startup.health_check_timeout_s + 60


def test_a_resolved_for_another_image_is_refused() -> None:
    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    resolved = resolve_spec(spec, plan, image_kind="lmikit")
    with pytest.raises(ValueError, match="resolved for the 'lmikit' image, but 'stock'"):
        render_target("env", spec, plan, RenderOptions(image="stock"), resolved=resolved)


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_validate_never_climbs_from_a_renderer_into_the_catalog_or_planner(path) -> None:
    _, climbs = walk(path)
    back = {pair: names for pair, names in climbs.items()
            if pair[0].startswith("lmikit.render")
            and pair[1].startswith(("lmikit.catalog", "lmikit.planner"))}
    assert back == {}


def test_a_deployment_resolves_once_per_spec_plan_and_image_kind() -> None:
    from lmikit import Deployment

    spec, plan = _spec_and_plan(DEFAULT_SPEC)
    deployment = Deployment(spec, plan=plan, role_arn="arn:aws:iam::123456789012:role/r",
                            image_kind="stock")
    first = deployment.resolved
    assert deployment.resolved is first
    assert first == resolve_spec(spec, plan, image_kind="stock")
    deployment.image_kind = "lmikit"
    assert deployment.resolved == resolve_spec(spec, plan, image_kind="lmikit") != first
