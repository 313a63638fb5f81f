"""The SageMaker endpoint the HyperPod operator creates from lmikit's manifest is the
operator's: lmikit's SageMaker deploy, destroy and gc of the same spec (or of a spec named
like that endpoint) neither adopt nor delete it.

The operator's code is not public; what it does with the manifest is read from the CRD:
``endpointName`` is the "Name used for Sagemaker Endpoint", and ``spec.tags`` are "added to
the Sagemaker Endpoint". The operator is played here by creating that endpoint, with those
tags, in the strict fake SageMaker, as the operator would in the same account and region."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lmikit.errors import DeployError
from lmikit.planner._planner import plan_spec
from lmikit.render._hyperpod import hyperpod_manifest
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec_text
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import IMAGE, SPEC_YAML, deployment, live


def _operator_endpoint(session: Any, fake: FakeSageMaker, spec: DeploymentSpec,
                       donor: Any) -> str:
    """Create what the operator creates for ``spec``'s manifest: an endpoint named
    ``endpointName`` whose config and endpoint carry the manifest's ``spec.tags``."""
    body = hyperpod_manifest(spec, plan_spec(spec), image_uri=IMAGE)["spec"]
    name = body["endpointName"]
    tags = [{"Key": t["name"], "Value": t["value"]} for t in body["tags"]]
    config = donor.desired().requests.endpoint_config
    sm = session.client("sagemaker")
    sm.create_endpoint_config(**{**config, "EndpointConfigName": f"{name}-config", "Tags": tags})
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config", Tags=tags)
    fake.settle()
    return str(name)


def test_sagemaker_deploy_and_destroy_leave_the_operators_endpoint(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: DeploymentSpec,
        tmp_path: Path) -> None:
    d = deployment(spec, session, clock, tmp_path)
    theirs = _operator_endpoint(session, fake, spec, d)
    d.deploy()
    assert set(live(fake)["endpoint"]) == {spec.name, theirs}
    d.gc()
    d.destroy()
    left = live(fake)
    assert left["endpoint"] == {theirs: "InService"}
    assert set(left["endpoint-config"]) == {f"{theirs}-config"}
    assert "inference-component" not in left


def test_a_deployment_named_like_the_operators_endpoint_cannot_take_it(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, spec: DeploymentSpec,
        tmp_path: Path) -> None:
    theirs = _operator_endpoint(session, fake, spec, deployment(spec, session, clock, tmp_path))
    twin = load_spec_text(SPEC_YAML.replace("name: docqa", f"name: {theirs}"),
                          source=str(tmp_path / "twin.yaml"))
    d = deployment(twin, session, clock, tmp_path)
    before = live(fake)
    with pytest.raises(DeployError, match=f"endpoint {theirs} exists and is not created by "
                                          "lmikit"):
        d.deploy()
    with pytest.raises(DeployError, match=f"endpoint {theirs} exists and is not created by "
                                          "lmikit"):
        d.destroy()
    assert live(fake) == before
