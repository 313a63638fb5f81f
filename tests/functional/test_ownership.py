"""A resource is a deployment's only when its tags say so: deploying, collecting or destroying
``docqa`` never touches ``docqa-v2`` (whose names all start with ``docqa``), nor anything
untagged that happens to carry a deployment's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from lmikit.errors import DeployError
from lmikit.testing import FakeSageMaker, VirtualClock

from .conftest import BUCKET, SPEC_YAML, deployment, live, make_adapter, spec_with

ADAPTERS = "adapters:\n  - {name: legal, source: adapters/legal}\n"


@pytest.fixture
def pair(fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> Any:
    """docqa and docqa-v2, both deployed, sharing one bucket."""
    make_adapter(tmp_path / "adapters", "legal")
    docqa = deployment(spec_with(tmp_path, ADAPTERS), session, clock, tmp_path)
    from lmikit.spec._loader import load_spec_text

    v2_spec = load_spec_text(SPEC_YAML.replace("name: docqa", "name: docqa-v2") + ADAPTERS,
                             source=str(tmp_path / "v2.yaml"))
    v2 = deployment(v2_spec, session, clock, tmp_path)
    docqa.deploy()
    v2.deploy()
    return docqa, v2


def _v2_things(fake: FakeSageMaker) -> dict[str, Any]:
    res = live(fake)
    keys = [o["Key"] for o in boto3.client("s3", region_name="us-east-1").list_objects_v2(
        Bucket=BUCKET, Prefix="lmikit/docqa-v2/").get("Contents", [])]
    return {"endpoint": {k: v for k, v in res.get("endpoint", {}).items() if k == "docqa-v2"},
            "components": sorted(k for k in res.get("inference-component", {})
                                 if k.startswith("docqa-v2-")),
            "configs": sorted(k for k in res.get("endpoint-config", {})
                              if k.startswith("docqa-v2-")),
            "objects": sorted(keys)}


@pytest.mark.slow
def test_destroy_leaves_a_deployment_whose_name_shares_its_prefix(
        fake: FakeSageMaker, pair: Any) -> None:
    docqa, _ = pair
    before = _v2_things(fake)
    assert before["components"] == ["docqa-v2-base", "docqa-v2-legal"]
    docqa.destroy()
    assert _v2_things(fake) == before
    assert "docqa" not in live(fake)["endpoint"]


@pytest.mark.slow
def test_gc_considers_only_what_its_tags_say_is_its_own(fake: FakeSageMaker, session: Any,
                                                         pair: Any) -> None:
    """Fails if ownership were decided by name (``NameContains=docqa`` also lists
    docqa-v2's configs and an untagged one)."""
    docqa, v2 = pair
    sm = session.client("sagemaker")
    body = v2.desired().requests.endpoint_config
    sm.create_endpoint_config(**{**body, "EndpointConfigName": "docqa-v2-spare"})
    sm.create_endpoint_config(**{**body, "EndpointConfigName": "docqa-hand-made",
                                 "Tags": []})
    result = docqa.gc()
    assert result.changes == []
    assert {"docqa-v2-spare", "docqa-hand-made"} <= set(live(fake)["endpoint-config"])
    assert ("endpoint-config", "docqa-v2-spare", "delete") in {
        (c.kind, c.name, c.action) for c in v2.gc().changes}


def test_deploy_refuses_an_endpoint_it_does_not_own(fake: FakeSageMaker, session: Any,
                                                    clock: VirtualClock, spec: Any,
                                                    tmp_path: Path) -> None:
    d = deployment(spec, session, clock, tmp_path)
    sm = session.client("sagemaker")
    body = d.desired().requests.endpoint_config
    sm.create_endpoint_config(**{**body, "EndpointConfigName": "someone-elses", "Tags": []})
    sm.create_endpoint(EndpointName="docqa", EndpointConfigName="someone-elses")
    fake.settle()
    before = live(fake)
    with pytest.raises(DeployError, match="endpoint docqa exists and is not created by lmikit "
                                          "\\(no lmikit:deployment tag\\), not 'docqa''s"):
        d.deploy()
    with pytest.raises(DeployError, match="endpoint docqa exists and is not created by lmikit"):
        d.destroy()
    assert live(fake) == before


def test_deploy_refuses_a_component_name_taken_elsewhere(fake: FakeSageMaker, session: Any,
                                                         clock: VirtualClock, pair: Any,
                                                         tmp_path: Path) -> None:
    """``docqa`` with an adapter named ``v2-base`` would be ``docqa-v2-base``: docqa-v2's."""
    make_adapter(tmp_path / "adapters", "v2-base")
    clash = spec_with(tmp_path, "adapters:\n  - {name: v2-base, source: adapters/v2-base}\n")
    with pytest.raises(DeployError, match="inference-component docqa-v2-base exists and is "
                                          "lmikit deployment 'docqa-v2''s, not 'docqa''s"):
        deployment(clash, session, clock, tmp_path).deploy()
    assert "docqa-v2-base" in live(fake)["inference-component"]


@pytest.mark.slow
def test_role_arn_is_not_needed_to_destroy(fake: FakeSageMaker, session: Any,
                                           clock: VirtualClock, pair: Any,
                                           tmp_path: Path) -> None:
    from lmikit.deploy import Deployment

    docqa, _ = pair
    bare = Deployment(docqa.spec, session=session, clock=clock, poll_seconds=10)
    assert bare.bucket == BUCKET  # found on the endpoint's lmikit:bucket tag
    bare.destroy()
    assert "docqa" not in live(fake)["endpoint"]
