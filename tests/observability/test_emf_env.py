"""LMIKIT_EMF: rendered with detailed metrics into the SageMaker container Environment of
lmikit's image (the stock image has no emitter), read by the container's own parser, and left
out of the HyperPod manifest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lmikit import metric_catalog as mc
from lmikit.planner._startup import weights_source
from lmikit.render._env import (
    CFN_ENVIRONMENT_MAX,
    container_environment,
    lmi_environment,
    serving_properties,
)
from lmikit.render._hyperpod import hyperpod_manifest
from lmikit.render._sagemaker import base_component_name

from .conftest import load_example

CONTAINER = Path(__file__).resolve().parents[2] / "container"


def _observability(spec, **changes):  # type: ignore[no-untyped-def]
    return spec.model_copy(update={"observability": spec.observability.model_copy(
        update=changes)})


def test_emf_config_names_endpoint_base_component_and_interval(example) -> None:
    spec, plan = example
    env = container_environment(spec, plan, image="lmikit")
    assert len(env) <= CFN_ENVIRONMENT_MAX
    if not spec.observability.detailed_metrics:
        assert mc.EMF_CONFIG_ENV not in env
        return
    cfg = json.loads(env[mc.EMF_CONFIG_ENV])
    assert cfg == {"namespace": mc.CONTAINER_NAMESPACE,
                   "dimensions": {"EndpointName": spec.name,
                                  "InferenceComponentName": base_component_name(spec)},
                   "interval_s": max(60, spec.observability.metric_publish_frequency_seconds)}
    assert list(cfg["dimensions"]) == list(mc.CONTAINER_DIMENSIONS)


def test_emf_config_absent_without_detailed_metrics() -> None:
    spec, plan = load_example("docqa-qwen7b")
    assert mc.EMF_CONFIG_ENV in container_environment(spec, plan, image="lmikit")
    off = _observability(spec, detailed_metrics=False)
    assert mc.EMF_CONFIG_ENV not in container_environment(off, plan, image="lmikit")


def test_emf_config_is_sagemaker_only(example) -> None:
    """Not in the generic LMI environment (HyperPod, serving.properties, CDK's count)."""
    spec, plan = example
    assert mc.EMF_CONFIG_ENV not in lmi_environment(spec, plan, image="lmikit")
    if weights_source(spec) != "s3-sagemaker":
        assert mc.EMF_CONFIG_ENV not in serving_properties(spec, plan, image="lmikit")


def test_emf_config_never_on_the_stock_image(example) -> None:
    """The stock image has no emitter: rendering LMIKIT_EMF for it would promise metrics."""
    spec, plan = example
    assert mc.EMF_CONFIG_ENV not in container_environment(spec, plan, image="stock")


@pytest.mark.parametrize(("frequency", "interval"), [(10, 60), (60, 60), (300, 300)])
def test_emf_interval_never_below_60_s(frequency: int, interval: int) -> None:
    spec, plan = load_example("docqa-qwen7b")
    env = container_environment(
        _observability(spec, metric_publish_frequency_seconds=frequency), plan,
        image="lmikit")
    assert json.loads(env[mc.EMF_CONFIG_ENV])["interval_s"] == interval


def test_container_parses_what_the_sdk_renders(example) -> None:
    """No drift: the emitter's own parser accepts the rendered value with the shared table."""
    spec, plan = example
    raw = container_environment(spec, plan, image="lmikit").get(mc.EMF_CONFIG_ENV)
    if raw is None:
        return
    if str(CONTAINER) not in sys.path:
        sys.path.insert(0, str(CONTAINER))
    from lmikit_runtime.emf import load_table, parse_config

    config = parse_config(raw, load_table())
    assert config.namespace == mc.CONTAINER_NAMESPACE and config.interval_s >= 60


def test_hyperpod_manifest_leaves_emf_out(example) -> None:
    spec, plan = example
    manifest = hyperpod_manifest(spec, plan, image_uri="img:1")
    names = {e["name"] for e in manifest["spec"]["worker"]["environmentVariables"]}
    assert mc.EMF_CONFIG_ENV not in names
