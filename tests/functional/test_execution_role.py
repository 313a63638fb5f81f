"""ensure_execution_role / remove_execution_role against moto's IAM, and ``--create-role``.

moto's IAM also checks every policy document it is given (its own policy-grammar validator),
on top of lmikit.testing.iam_policy_problems in tests/unit/test_render_iam.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

from lmikit.catalog._images import lmi_image_uri
from lmikit.cli import main
from lmikit.deploy import (
    Deployment,
    DeployResult,
    apply_execution_role,
    ensure_execution_role,
    execution_role_policy,
    remove_execution_role,
)
from lmikit.errors import DeployError
from lmikit.render._iam import TRUST_POLICY, partition_of
from lmikit.spec import DeploymentSpec
from lmikit.spec._loader import load_spec

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "lmikit-test-artifacts"
ACCOUNT = "123456789012"
ROLE = "lmikit-docqa-qwen7b-execution"


@pytest.fixture
def session() -> Iterator[Any]:
    with mock_aws():
        yield boto3.Session(region_name="us-east-1")


@pytest.fixture
def spec() -> DeploymentSpec:
    return load_spec(ROOT / "examples" / "docqa-qwen7b.yaml")


def _stored_policy(iam: Any, name: str = ROLE) -> dict[str, Any]:
    arn = f"arn:aws:iam::{ACCOUNT}:policy/{name}"
    version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"][
        "Document"]
    return json.loads(document) if isinstance(document, str) else dict(document)


def test_creates_the_role_and_its_managed_policy(session: Any, spec: DeploymentSpec) -> None:
    arn = ensure_execution_role(spec, BUCKET, session=session)
    assert arn == f"arn:aws:iam::{ACCOUNT}:role/{ROLE}"
    iam = session.client("iam")
    role = iam.get_role(RoleName=ROLE)["Role"]
    assert role["AssumeRolePolicyDocument"] == TRUST_POLICY
    assert role["Description"] == "SageMaker execution role of lmikit deployment docqa-qwen7b"
    assert iam.list_role_tags(RoleName=ROLE)["Tags"] == [
        {"Key": "lmikit:deployment", "Value": "docqa-qwen7b"},
        {"Key": "team", "Value": "ml-platform"}]
    assert _stored_policy(iam) == execution_role_policy(spec, BUCKET, account=ACCOUNT)
    attached = iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"]
    assert [p["PolicyName"] for p in attached] == [ROLE]
    assert iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []  # no inline policy


def test_the_policy_pulls_the_given_image_repository(session: Any,
                                                     spec: DeploymentSpec) -> None:
    image = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/lmikit/lmi:abc123"
    ensure_execution_role(spec, BUCKET, session=session, image_uri=image)
    pull = [s for s in _stored_policy(session.client("iam"))["Statement"]
            if s["Sid"] == "PullImage"]
    assert pull[0]["Resource"] == [f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/lmikit/lmi"]


def test_second_run_changes_nothing(session: Any, spec: DeploymentSpec) -> None:
    apply_execution_role(spec, BUCKET, session=session)
    again = apply_execution_role(spec, BUCKET, session=session)
    assert [c.line() for c in again.changes] == [f"unchanged iam-role {ROLE}",
                                                 f"unchanged iam-policy {ROLE}"]


def test_a_changed_spec_becomes_a_new_default_version(session: Any,
                                                      spec: DeploymentSpec) -> None:
    apply_execution_role(spec, BUCKET, session=session)
    iam = session.client("iam")
    arn = f"arn:aws:iam::{ACCOUNT}:policy/{ROLE}"
    for i in range(6):  # IAM keeps five versions: the oldest non-default one goes
        result = apply_execution_role(spec, f"{BUCKET}-{i}", session=session)
        assert result.changes[-1].line() == (f"update iam-policy {ROLE} "
                                             "(new default version)")
    versions = iam.list_policy_versions(PolicyArn=arn)["Versions"]
    assert len(versions) == 5
    assert _stored_policy(iam) == execution_role_policy(spec, f"{BUCKET}-5", account=ACCOUNT)


def test_refuses_a_role_it_did_not_create(session: Any, spec: DeploymentSpec) -> None:
    session.client("iam").create_role(RoleName=ROLE,
                                      AssumeRolePolicyDocument=json.dumps(TRUST_POLICY))
    with pytest.raises(DeployError, match=rf"IAM role {ROLE} exists but is not tagged "
                       r"lmikit:deployment.*Pass --role-arn \(role_arn=\)"):
        ensure_execution_role(spec, BUCKET, session=session)
    iam = session.client("iam")
    assert iam.list_attached_role_policies(RoleName=ROLE)["AttachedPolicies"] == []


def test_refuses_a_role_of_another_deployment(session: Any, spec: DeploymentSpec) -> None:
    session.client("iam").create_role(
        RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
        Tags=[{"Key": "lmikit:deployment", "Value": "other"}])
    with pytest.raises(DeployError, match="is tagged lmikit:deployment=other"):
        ensure_execution_role(spec, BUCKET, session=session)


def test_refuses_a_policy_it_did_not_create(session: Any, spec: DeploymentSpec) -> None:
    session.client("iam").create_policy(
        PolicyName=ROLE, PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}))
    with pytest.raises(DeployError, match=rf"IAM policy {ROLE} exists but is not tagged"):
        ensure_execution_role(spec, BUCKET, session=session)


def test_replaces_the_inline_policy_of_earlier_versions(session: Any,
                                                        spec: DeploymentSpec) -> None:
    iam = session.client("iam")
    iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
                    Tags=[{"Key": "lmikit:deployment", "Value": "docqa-qwen7b"}])
    iam.put_role_policy(RoleName=ROLE, PolicyName="lmikit-endpoint", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "logs:*",
                                                 "Resource": "*"}]}))
    result = apply_execution_role(spec, BUCKET, session=session)
    assert "delete iam-inline-policy lmikit-endpoint (replaced by the managed policy)" in [
        c.line() for c in result.changes]
    assert iam.list_role_policies(RoleName=ROLE)["PolicyNames"] == []
    assert {"Key": "team", "Value": "ml-platform"} in iam.list_role_tags(RoleName=ROLE)["Tags"]


def test_remove_deletes_role_and_policy_and_is_idempotent(session: Any,
                                                          spec: DeploymentSpec) -> None:
    apply_execution_role(spec, BUCKET, session=session)
    apply_execution_role(spec, "another-bucket", session=session)  # a second version
    assert [c.line() for c in remove_execution_role(spec, session=session)] == [
        f"delete iam-policy {ROLE}", f"delete iam-role {ROLE}"]
    iam = session.client("iam")
    assert iam.list_roles()["Roles"] == [] and iam.list_policies(Scope="Local")["Policies"] == []
    assert [c.action for c in remove_execution_role(spec, session=session)] == ["absent"]


def test_remove_keeps_a_role_that_is_not_ours_or_still_used(session: Any,
                                                            spec: DeploymentSpec) -> None:
    apply_execution_role(spec, BUCKET, session=session)
    iam = session.client("iam")
    iam.put_role_policy(RoleName=ROLE, PolicyName="team-extra", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                 "Resource": "*"}]}))
    changes = remove_execution_role(spec, session=session)
    assert changes[-1].line() == (f"kept iam-role {ROLE} (other policies are attached: "
                                  "team-extra)")
    iam.untag_role(RoleName=ROLE, TagKeys=["lmikit:deployment"])
    assert remove_execution_role(spec, session=session)[0].action == "kept"


@pytest.mark.slow
def test_govcloud_role_policy_uses_the_govcloud_partition() -> None:
    """(moto's IAM answers with ``arn:aws`` ARNs in every partition, so the role's own ARN
    is taken from IAM's answer and not checked here.)"""
    spec = load_spec(ROOT / "examples" / "docqa-qwen7b.yaml").model_copy(
        update={"region": "us-gov-west-1"})
    with mock_aws():
        session = boto3.Session(region_name="us-gov-west-1")
        ensure_execution_role(spec, BUCKET, session=session)
        document = _stored_policy(session.client("iam"))
    assert partition_of(spec.region) == "aws-us-gov"
    resources = [r for s in document["Statement"] for r in s["Resource"] if r != "*"]
    assert all(r.startswith("arn:aws-us-gov:") for r in resources)
    image = lmi_image_uri("us-gov-west-1", spec.engine.lmi_version)
    assert image.split(".")[0] in str(document)  # the GovCloud LMI registry's account


def test_cli_create_role_lets_the_deployment_create_the_role(
        session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[bool, str | None]] = []

    def deploy(self: Deployment) -> DeployResult:  # the deploy itself is tested elsewhere
        made.append((self.create_role, self.role_arn))
        self.role_arn = self.desired().requests.endpoint_config["ExecutionRoleArn"]
        return DeployResult()

    monkeypatch.setattr(Deployment, "deploy", deploy)
    result = CliRunner().invoke(main, ["deploy", str(ROOT / "examples" / "docqa-qwen7b.yaml"),
                                       "--create-role", "--bucket", BUCKET])
    assert result.exit_code == 0, result.output
    assert made == [(True, None)]  # the Deployment creates it, under its lease
    assert f"Execution role: arn:aws:iam::{ACCOUNT}:role/{ROLE}" in result.output


def test_cli_create_role_refuses_a_foreign_role_in_one_line(session: Any) -> None:
    session.client("iam").create_role(RoleName=ROLE,
                                      AssumeRolePolicyDocument=json.dumps(TRUST_POLICY))
    result = CliRunner().invoke(main, ["deploy", str(ROOT / "examples" / "docqa-qwen7b.yaml"),
                                       "--create-role", "--bucket", BUCKET])
    assert result.exit_code != 0
    last = result.output.rstrip().splitlines()[-1]  # below the (empty) progress table
    assert last.startswith(f"DeployError: IAM role {ROLE} exists but is not tagged "
                           "lmikit:deployment")
    assert "Rolled back" not in result.output  # refused before anything was changed
    assert "--role-arn" in result.output and "Traceback" not in result.output
