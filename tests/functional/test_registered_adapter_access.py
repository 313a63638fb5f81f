"""The README's walk-through under the fake's download check: a spec deployed with
``create_role=True``, then ``lmikit adapters register support`` (the registry of the spec).

SageMaker downloads an adapter's ``ArtifactUrl`` with the endpoint config's execution role;
the fake asks moto's IAM whether that role's policies allow ``s3:GetObject`` on the object
(``lmikit.testing.iam_role_reads``), so a role that reads only the spec's own adapters leaves
a registered one Failed, as SageMaker would. The check itself (managed and inline policies,
explicit Deny, roles IAM does not hold) is tested at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lmikit.deploy import Deployment
from lmikit.errors import AdapterError
from lmikit.lora._registry import AdapterRegistry
from lmikit.names import execution_role_name
from lmikit.testing import FakeSageMaker, VirtualClock, iam_role_reads

from .conftest import BUCKET, IMAGE, live, make_adapter, spec_with

ACCOUNT = "123456789012"  # moto's
GET = "s3:GetObject"
OBJECT = "arn:aws:s3:::bucket/lmikit/demo/adapters/support/ab12.tar.gz"


def _deployed(session: Any, clock: VirtualClock, tmp_path: Path) -> AdapterRegistry:
    make_adapter(tmp_path / "adapters", "legal")
    spec = spec_with(tmp_path, "adapters:\n  - {name: legal, source: adapters/legal}\n")
    Deployment(spec, session=session, create_role=True, bucket=BUCKET, base_dir=tmp_path,
               image_uri=IMAGE, clock=clock, poll_seconds=10).deploy()
    return AdapterRegistry.for_spec(spec, session=session, clock=clock, poll_seconds=1)


def test_an_adapter_registered_after_a_create_role_deploy_comes_in_service(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    registry = _deployed(session, clock, tmp_path)
    info = registry.register("support", make_adapter(tmp_path / "new", "support"))
    assert (info.component, info.status) == ("docqa-support", "InService")
    assert info.artifact_url and info.artifact_url.startswith(
        f"s3://{BUCKET}/lmikit/docqa/adapters/support/")
    assert live(fake)["inference-component"] == {
        "docqa-base": "InService", "docqa-legal": "InService", "docqa-support": "InService"}


def _drop_registered_adapters_read() -> None:
    """Put back the role's policy as lmikit made it before it read the whole adapters
    prefix: only the spec's adapters (and the model) are readable."""
    iam = boto3.client("iam", region_name="us-east-1")
    arn = f"arn:aws:iam::{ACCOUNT}:policy/{execution_role_name('docqa')}"
    version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"][
        "Document"]
    document = json.loads(document) if isinstance(document, str) else dict(document)
    kept = [s for s in document["Statement"] if s["Sid"] != "ReadRegisteredAdapters"]
    assert len(kept) == len(document["Statement"]) - 1
    iam.create_policy_version(PolicyArn=arn, PolicyDocument=json.dumps(
        {**document, "Statement": kept}), SetAsDefault=True)


def test_a_role_reading_only_the_spec_adapters_leaves_a_registered_one_failed(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    """The spec's adapter stays readable, the registered one is refused, and registering it
    fails cleanly."""
    registry = _deployed(session, clock, tmp_path)
    _drop_registered_adapters_read()
    with pytest.raises(AdapterError, match=(
            r"inference-component docqa-support is Failed: Failed to download model data "
            rf'from URL: "s3://{BUCKET}/lmikit/docqa/adapters/support/[0-9a-f]{{64}}\.tar\.gz"'
            r".*the role \"arn:aws:iam::123456789012:role/lmikit-docqa-execution\" has "
            r"permissions to download the object \(no statement of its policies allows "
            rf"s3:GetObject on arn:aws:s3:::{BUCKET}/lmikit/docqa/adapters/support/")):
        registry.register("support", make_adapter(tmp_path / "new", "support"))
    assert live(fake)["inference-component"] == {"docqa-base": "InService",
                                                 "docqa-legal": "InService"}


def test_an_update_to_weights_the_role_cannot_read_is_rolled_back(
        fake: FakeSageMaker, session: Any, clock: VirtualClock, tmp_path: Path) -> None:
    registry = _deployed(session, clock, tmp_path)
    first = registry.register("support", make_adapter(tmp_path / "new", "support"))
    _drop_registered_adapters_read()
    with pytest.raises(AdapterError, match=r"the update was rolled back: .*no statement of "
                                           r"its policies allows s3:GetObject"):
        registry.update("support", make_adapter(tmp_path / "newer", "support", rank=4))
    assert registry.adapter("support")["Specification"]["Container"]["ArtifactUrl"] == \
        first.artifact_url


def _doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


@pytest.fixture
def iam() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("iam", region_name="us-east-1")
        client.create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": "sts:AssumeRole",
                "Principal": {"Service": "sagemaker.amazonaws.com"}}]}))
        yield client


def test_role_reads_judge_managed_and_inline_policies(iam: Any) -> None:
    check = iam_role_reads(iam)
    role = "arn:aws:iam::123456789012:role/r"
    url = "s3://bucket/lmikit/demo/adapters/support/ab12.tar.gz"
    assert check(role, url) == f"no statement of its policies allows {GET} on {OBJECT}"
    arn = iam.create_policy(PolicyName="p", PolicyDocument=json.dumps(_doc(
        {"Effect": "Allow", "Action": GET,
         "Resource": "arn:aws:s3:::bucket/lmikit/demo/adapters/*"})))["Policy"]["Arn"]
    iam.attach_role_policy(RoleName="r", PolicyArn=arn)
    assert check(role, url) is None
    iam.put_role_policy(RoleName="r", PolicyName="no-demo", PolicyDocument=json.dumps(_doc(
        {"Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::bucket/lmikit/*"})))
    assert check(role, url) == f"an explicit Deny in its policies refuses {GET} on {OBJECT}"


def test_a_role_iam_does_not_hold_is_not_judged(iam: Any) -> None:
    check = iam_role_reads(iam)
    assert check("arn:aws:iam::123456789012:role/elsewhere", "s3://bucket/k") is None
    assert check("not-an-arn", "s3://bucket/k") is None
