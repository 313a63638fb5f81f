"""``lmikit deploy`` builds the production system ``cdk deploy`` builds, for every example.

For each synthesized stack the SDK path runs against moto (IAM, S3, STS, CloudWatch,
Application Auto Scaling) and lmikit's strict fake SageMaker: one plain
``Deployment(spec, create_role=True).deploy()``, with no step called by hand, so the deployer
itself must create the role, the SageMaker resources, the scaling, the dashboard and the
alarms. Every request the SDK sends is recorded; the resources that exist afterwards are
read back from moto and the fake.

Then, for every CloudFormation resource type in the template, the SDK created the same
resources (same names, same count) with equal properties, modulo what only one side can
know, each checked rather than skipped:

* pseudo parameters (partition, account, region) resolve to moto's values, so partition-aware
  ARNs must come out equal;
* ``Ref``/``Fn::GetAtt`` of a resource in the stack must be the SDK's value of that resource
  (the role's ARN, the Model's name, the step policy's ARN);
* a CDK asset (the bootstrap bucket or image repository) must be the SDK's artifact with the
  same bytes (sha256), the image URI the SDK deployed, or, in the role's policy, a grant
  that covers every object the SDK uploaded.

The SDK deploys to SageMaker's default bucket, the one ``lmikit adapters register`` uses for
a stack's endpoint (which carries no ``lmikit:bucket`` tag), so the read on the adapters
registered later must name the same bucket and prefix on both sides. The fake judges every
component's artifact download against the role's policy in moto (``iam_role_reads``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lmikit.catalog._images import lmi_image_uri
from lmikit.deploy import Deployment
from lmikit.names import BUCKET_TAG, default_bucket_name
from lmikit.spec._loader import load_spec
from lmikit.testing import (
    FakeSageMaker,
    Timings,
    VirtualClock,
    iam_role_reads,
    s3_artifact_exists,
)
from lmikit.weights import parse_destination
from tests.conftest import stage_copy

from .conftest import EXAMPLES

ACCOUNT = "123456789012"  # moto's account
CDK_ASSET = re.compile(r"cdk-[a-z0-9]+-(?:container-)?assets-")
NAMES = [load_spec(p).name for p in EXAMPLES] + ["docqa-lora"]
STATEMENTS_ELSEWHERE = "compared statement by statement in the policy test"
TYPES = {  # CloudFormation type -> (SDK create/put operation, the property naming a resource)
    "AWS::SageMaker::EndpointConfig": ("sagemaker.CreateEndpointConfig", "EndpointConfigName"),
    "AWS::SageMaker::Endpoint": ("sagemaker.CreateEndpoint", "EndpointName"),
    "AWS::SageMaker::InferenceComponent": ("sagemaker.CreateInferenceComponent",
                                           "InferenceComponentName"),
    "AWS::SageMaker::Model": ("sagemaker.CreateModel", None),
    "AWS::ApplicationAutoScaling::ScalableTarget": (
        "application-autoscaling.RegisterScalableTarget", "ResourceId"),
    "AWS::ApplicationAutoScaling::ScalingPolicy": ("application-autoscaling.PutScalingPolicy",
                                                   "PolicyName"),
    "AWS::CloudWatch::Alarm": ("cloudwatch.PutMetricAlarm", "AlarmName"),
    "AWS::CloudWatch::Dashboard": ("cloudwatch.PutDashboard", "DashboardName"),
    "AWS::IAM::Role": ("iam.CreateRole", None),
    "AWS::IAM::ManagedPolicy": ("iam.CreatePolicy", None),
}


@dataclass
class SdkRun:
    """What the SDK path sent and what exists afterwards."""

    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    existing: dict[str, set[str]] = field(default_factory=dict)
    role_arn: str = ""
    bucket: str = ""
    image_uri: str = ""
    policy_arns: dict[str, str] = field(default_factory=dict)
    uploaded: dict[str, bytes] = field(default_factory=dict)  # s3 URL -> bytes
    attached: list[tuple[str, str]] = field(default_factory=list)  # (role, policy)

    def last(self, operation: str) -> dict[str, dict[str, Any]]:
        """The final request per resource name for a create/put operation."""
        name_key = next(k for op, k in TYPES.values() if op == operation)
        out: dict[str, dict[str, Any]] = {}
        for params in self.sent.get(operation, []):
            out[params[name_key] if name_key else "-"] = params
        return out


def _record(run: SdkRun) -> Any:
    def handler(params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        run.sent.setdefault(f"{service}.{model.name}", []).append(json.loads(json.dumps(
            params, default=str)))
    return handler


def sdk_run(synth: Any) -> SdkRun:
    stack = synth.stack
    spec, endpoint = stack.spec, stack.endpoint
    region = spec.region
    run = SdkRun()
    with mock_aws():
        s3 = boto3.client("s3", region_name=region)
        extra = {} if region == "us-east-1" else {
            "CreateBucketConfiguration": {"LocationConstraint": region}}
        run.bucket = default_bucket_name(region, ACCOUNT)
        s3.create_bucket(Bucket=run.bucket, **extra)
        if spec.model.is_s3 and spec.model.hub_id:  # the example's weights, as staged
            s3.create_bucket(Bucket=parse_destination(spec.model.id).bucket, **extra)
            stage_copy(s3, spec.model.id, spec.model.hub_id, {"config.json": b"{}"})
        clock = VirtualClock()
        fake = FakeSageMaker(region, clock=clock, timings=Timings(),
                             artifact_exists=s3_artifact_exists(s3),
                             role_reads=iam_role_reads(boto3.client("iam", region_name=region)))
        if spec.instance.capacity_reservation_arn:  # the plan the example reserves
            fake.add_training_plan(spec.instance.capacity_reservation_arn, spec.instance.type)
        session = fake.install(boto3.Session(region_name=region))
        session.events.register("before-parameter-build", _record(run))
        run.image_uri = (f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com/lmikit/lmi:parity"
                         if endpoint.image.is_custom
                         else lmi_image_uri(region, spec.engine.lmi_version))
        deployment = Deployment(spec, session=session, create_role=True, bucket=run.bucket,
                                base_dir=endpoint.base_dir, image_uri=run.image_uri,
                                image_kind=endpoint.image_kind, plan=endpoint.plan,
                                clock=clock, poll_seconds=10)
        deployment.deploy()
        run.role_arn = str(deployment.role_arn)
        _read_back(run, session, fake, s3)
    return run


def _read_back(run: SdkRun, session: Any, fake: FakeSageMaker, s3: Any) -> None:
    fake.settle()
    live = fake.resources()
    run.existing["AWS::SageMaker::EndpointConfig"] = set(live["endpoint-config"])
    run.existing["AWS::SageMaker::Endpoint"] = set(live["endpoint"])
    run.existing["AWS::SageMaker::InferenceComponent"] = set(live["inference-component"])
    run.existing["AWS::SageMaker::Model"] = {"-"} if live["model"] else set()
    aas = session.client("application-autoscaling")
    run.existing["AWS::ApplicationAutoScaling::ScalableTarget"] = {
        t["ResourceId"] for t in aas.describe_scalable_targets(
            ServiceNamespace="sagemaker")["ScalableTargets"]}
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    run.existing["AWS::ApplicationAutoScaling::ScalingPolicy"] = {
        p["PolicyName"] for p in policies}
    run.policy_arns = {p["PolicyName"]: p["PolicyARN"] for p in policies}
    cw = session.client("cloudwatch")
    run.existing["AWS::CloudWatch::Alarm"] = {
        a["AlarmName"] for a in cw.describe_alarms()["MetricAlarms"]}
    run.existing["AWS::CloudWatch::Dashboard"] = {
        d["DashboardName"] for d in cw.list_dashboards()["DashboardEntries"]}
    iam = session.client("iam")
    roles = iam.list_roles()["Roles"]
    run.existing["AWS::IAM::Role"] = {"-"} if roles else set()
    run.existing["AWS::IAM::ManagedPolicy"] = {
        "-" for _ in iam.list_policies(Scope="Local")["Policies"]}
    run.attached = [(r["RoleName"], p["PolicyName"]) for r in roles
                    for p in iam.list_attached_role_policies(
                        RoleName=r["RoleName"])["AttachedPolicies"]]
    for obj in s3.list_objects_v2(Bucket=run.bucket).get("Contents", []):
        run.uploaded[f"s3://{run.bucket}/{obj['Key']}"] = s3.get_object(
            Bucket=run.bucket, Key=obj["Key"])["Body"].read()


class Compare:
    """Template properties against the SDK's request, modulo tokens (module docstring)."""

    def __init__(self, synth: Any, run: SdkRun) -> None:
        self.synth = synth
        self.run = run
        self.region = synth.stack.spec.region
        self.problems: list[str] = []
        self.resources = synth.template["Resources"]
        manifest = synth.path.with_name(f"{synth.stack.artifact_id}.assets.json")
        self.assets = json.loads(manifest.read_text())["files"]

    def resolve(self, value: Any) -> Any:
        """Pseudo parameters, Fn::Join and Fn::Sub resolved; other intrinsics kept."""
        pseudo = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT,
                  "AWS::Region": self.region, "AWS::URLSuffix": "amazonaws.com"}
        if isinstance(value, dict) and len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref" and arg in pseudo:
                return pseudo[arg]
            if key == "Fn::Join":
                parts = [self.resolve(p) for p in arg[1]]
                if all(isinstance(p, str) for p in parts):
                    return arg[0].join(parts)
                return {key: [arg[0], parts]}
            if key == "Fn::Sub" and isinstance(arg, str):
                return re.sub(r"\$\{([^}]+)\}", lambda m: pseudo.get(m[1], m[0]), arg)
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def diff(self, sdk: Any, cfn: Any, path: str) -> None:
        cfn = self.resolve(cfn)
        if isinstance(cfn, dict) and len(cfn) == 1 and next(iter(cfn)) in ("Ref",
                                                                           "Fn::GetAtt"):
            self.token(sdk, cfn, path)
        elif isinstance(cfn, str) and CDK_ASSET.search(cfn):
            self.asset(sdk, cfn, path)
        elif isinstance(sdk, dict) and isinstance(cfn, dict):
            for k in sorted(sdk.keys() | cfn.keys()):
                if k not in cfn:
                    self.problems.append(f"{path}.{k}: only the SDK sets it ({sdk[k]!r})")
                elif k not in sdk:
                    self.problems.append(f"{path}.{k}: only the template sets it")
                else:
                    self.diff(sdk[k], cfn[k], f"{path}.{k}")
        elif isinstance(sdk, list) and isinstance(cfn, list) and len(sdk) == len(cfn):
            for i, (a, b) in enumerate(zip(sdk, cfn, strict=True)):
                self.diff(a, b, f"{path}[{i}]")
        elif isinstance(sdk, bool) or isinstance(cfn, bool):
            if sdk is not cfn:
                self.problems.append(f"{path}: SDK {sdk!r} != template {cfn!r}")
        elif sdk != cfn:
            self.problems.append(f"{path}: SDK {sdk!r} != template {cfn!r}")

    def token(self, sdk: Any, cfn: dict[str, Any], path: str) -> None:
        """A Ref/GetAtt of a stack resource must be the SDK's value of that resource."""
        kind, arg = next(iter(cfn.items()))
        logical, attr = (arg, "Ref") if kind == "Ref" else (arg[0], arg[1])
        target = self.resources[logical]
        expected: Any
        if target["Type"] == "AWS::IAM::Role" and attr == "Arn":
            expected = self.run.role_arn
        elif target["Type"] == "AWS::IAM::Role" and attr == "Ref":
            expected = self.run.role_arn.rsplit("/", 1)[1]
        elif target["Type"] == "AWS::SageMaker::Model" and attr == "ModelName":
            expected = next(iter(self.run.last("sagemaker.CreateModel").values()))["ModelName"]
        elif target["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy" and attr == "Ref":
            expected = self.run.policy_arns[target["Properties"]["PolicyName"]]
        else:
            self.problems.append(f"{path}: no SDK counterpart known for {cfn}")
            return
        if sdk != expected:
            self.problems.append(f"{path}: SDK {sdk!r} is not the {target['Type']} "
                                 f"{attr} {expected!r}")

    def asset(self, sdk: Any, cfn: str, path: str) -> None:
        """A CDK asset: the same bytes the SDK uploaded, or the image the SDK deployed."""
        if "container-assets" in cfn:
            if path.endswith(".Image") and sdk != self.run.image_uri:
                self.problems.append(f"{path}: SDK image {sdk!r} is not the one deployed")
            return
        key = cfn.rsplit("/", 1)[1]
        source = next((a["source"]["path"] for a in self.assets.values()
                       if any(d["objectKey"] == key for d in a["destinations"].values())),
                      None)
        if source is None:
            self.problems.append(f"{path}: {cfn} is not an asset of the stack")
            return
        data = (self.synth.path.parent / source).read_bytes()
        if not (isinstance(sdk, str) and sdk in self.run.uploaded):
            self.problems.append(f"{path}: SDK {sdk!r} is not an object the SDK uploaded")
        elif hashlib.sha256(self.run.uploaded[sdk]).digest() != hashlib.sha256(data).digest():
            self.problems.append(f"{path}: SDK {sdk} and CDK asset {source} differ in bytes")


def _of_type(synth: Any, cfn_type: str) -> dict[str, dict[str, Any]]:
    name_key = next(k for t, (_, k) in TYPES.items() if t == cfn_type)
    return {(r["Properties"][name_key] if name_key else "-"): r["Properties"]
            for r in synth.resources(cfn_type).values()}


def _statements_by_sid(document: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for st in document["Statement"]:
        st = dict(st)
        for key in ("Action", "Resource"):  # IAM reads "x" and ["x"] alike
            st[key] = st[key] if isinstance(st[key], list) else [st[key]]
        out[st["Sid"]] = st
    return out


class Runs(dict[str, SdkRun]):
    """Deployment name -> its SDK run, made on first use."""

    def __init__(self, synths: dict[str, Any]) -> None:
        super().__init__()
        self.synths = synths

    def __missing__(self, name: str) -> SdkRun:
        self[name] = sdk_run(self.synths[name])
        return self[name]


@pytest.fixture(scope="module")
def runs(synths: dict[str, Any]) -> Runs:
    return Runs(synths)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_sdk_creates_every_template_resource_with_equal_properties(
        synths: dict[str, Any], runs: dict[str, SdkRun], name: str) -> None:
    synth, run = synths[name], runs[name]
    types = {r["Type"] for r in synth.template["Resources"].values()}
    assert types <= set(TYPES), f"no parity check for {sorted(types - set(TYPES))}"
    compare = Compare(synth, run)
    for cfn_type, (operation, _) in TYPES.items():
        cfn = _of_type(synth, cfn_type)
        sdk = run.last(operation)
        where = f"{name} {cfn_type}"
        assert sorted(run.existing[cfn_type]) == sorted(cfn), f"{where}: resources differ"
        assert sorted(sdk) == sorted(cfn), f"{where}: requests differ"
        for key, props in cfn.items():
            sdk_props = _sdk_props(cfn_type, dict(sdk[key]), run)
            compare.diff(sdk_props, _cfn_props(cfn_type, props), f"{where}[{key}]")
    assert compare.problems == []


def _sdk_props(cfn_type: str, sent: dict[str, Any], run: SdkRun) -> dict[str, Any]:
    """The SDK request in the template's shape (what differs only in wire form)."""
    if cfn_type == "AWS::SageMaker::Model":
        sent.pop("ModelName")  # CloudFormation names the Model
    if cfn_type == "AWS::SageMaker::Endpoint":
        # The SDK records the bucket its artifacts are in, for later runs and `lmikit
        # adapters`; the stack's artifacts are CDK assets, which CloudFormation tracks itself.
        sent["Tags"] = [t for t in sent["Tags"] if t["Key"] != BUCKET_TAG]
    if cfn_type == "AWS::ApplicationAutoScaling::ScalableTarget":
        sent["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(sent["Tags"].items())]
    if cfn_type == "AWS::IAM::Role":
        sent.pop("RoleName")  # CloudFormation names the role
        sent["AssumeRolePolicyDocument"] = json.loads(sent["AssumeRolePolicyDocument"])
    if cfn_type == "AWS::IAM::ManagedPolicy":
        name = sent.pop("PolicyName")
        sent.pop("Tags")  # AWS::IAM::ManagedPolicy takes no tags; the SDK's own mark
        version = json.loads(sent["PolicyDocument"])["Version"]
        sent["PolicyDocument"] = {"Version": version, "Statement": STATEMENTS_ELSEWHERE}
        sent["Path"] = "/"  # CreatePolicy's default path
        sent["Roles"] = [role for role, policy in run.attached if policy == name]
    return sent


def _cfn_props(cfn_type: str, props: dict[str, Any]) -> dict[str, Any]:
    if cfn_type == "AWS::IAM::ManagedPolicy":
        return {**props, "PolicyDocument": {"Version": props["PolicyDocument"]["Version"],
                                            "Statement": STATEMENTS_ELSEWHERE}}
    return props


@pytest.mark.parametrize("name", NAMES)
def test_sdk_execution_policy_equals_the_stacks_statement_by_statement(
        synths: dict[str, Any], runs: dict[str, SdkRun], name: str) -> None:
    synth, run = synths[name], runs[name]
    compare = Compare(synth, run)
    (cfn_props,) = _of_type(synth, "AWS::IAM::ManagedPolicy").values()
    (sent,) = run.last("iam.CreatePolicy").values()
    cfn = _statements_by_sid(compare.resolve(cfn_props["PolicyDocument"]))
    sdk = _statements_by_sid(json.loads(sent["PolicyDocument"]))
    assert sorted(sdk) == sorted(cfn)
    for sid, statement in cfn.items():
        mine = sdk[sid]
        assert {k: v for k, v in mine.items() if k != "Resource"} == {
            k: v for k, v in statement.items() if k != "Resource"}, sid
        assert len(mine["Resource"]) == len(statement["Resource"]), sid
        for theirs, ours in zip(statement["Resource"], mine["Resource"], strict=True):
            if isinstance(theirs, str) and CDK_ASSET.search(theirs):
                _check_asset_grant(run, sid, ours)
            else:
                assert ours == theirs, sid


def _check_asset_grant(run: SdkRun, sid: str, resource: str) -> None:
    """Where the stack grants its asset, the SDK grants what it uploaded (or deployed)."""
    if sid == "PullImage":
        registry, _, repo = run.image_uri.partition("/")
        account, region = registry.split(".")[0], registry.split(".")[3]
        assert resource == f"arn:aws:ecr:{region}:{account}:repository/{repo.split(':')[0]}"
        return
    prefix = f"arn:aws:s3:::{run.bucket}/"
    assert resource.startswith(prefix), (sid, resource)
    covered = [url for url in run.uploaded
               if fnmatch.fnmatchcase(url.removeprefix("s3://"), resource.removeprefix(
                   "arn:aws:s3:::"))]
    assert len(covered) == 1, (sid, resource, sorted(run.uploaded))


def _base_component(synth: Any, run: SdkRun) -> tuple[dict[str, Any], dict[str, Any]]:
    name = f"{synth.stack.spec.name}-base"
    return (run.last("sagemaker.CreateInferenceComponent")[name],
            _of_type(synth, "AWS::SageMaker::InferenceComponent")[name])


def test_compare_reports_an_artifact_with_other_bytes(synths: dict[str, Any],
                                                      runs: dict[str, SdkRun]) -> None:
    """The asset rule is a check, not a pass: other bytes under the SDK's URL are reported."""
    synth, run = synths["chat-small"], runs["chat-small"]
    sdk, cfn = _base_component(synth, run)
    url = sdk["Specification"]["Container"]["ArtifactUrl"]
    corrupted = SdkRun(**{**run.__dict__, "uploaded": {**run.uploaded, url: b"other"}})
    compare = Compare(synth, corrupted)
    compare.diff(sdk, cfn, "base")
    assert compare.problems == [
        f"base.Specification.Container.ArtifactUrl: SDK {url} and CDK asset "
        f"{_asset_source(synth, cfn)} differ in bytes"]


def _asset_source(synth: Any, props: dict[str, Any]) -> str:
    key = Compare(synth, SdkRun()).resolve(
        props["Specification"]["Container"]["ArtifactUrl"]).rsplit("/", 1)[1]
    assets = json.loads(synth.path.with_name(
        f"{synth.stack.artifact_id}.assets.json").read_text())["files"]
    return next(a["source"]["path"] for a in assets.values()
                if any(d["objectKey"] == key for d in a["destinations"].values()))


def test_compare_reports_a_token_the_sdk_fills_differently(synths: dict[str, Any],
                                                           runs: dict[str, SdkRun]) -> None:
    """A Ref/GetAtt must be the SDK's value of that very resource (here: the role ARN)."""
    synth, run = synths["chat-small"], runs["chat-small"]
    (name, cfn), = _of_type(synth, "AWS::SageMaker::EndpointConfig").items()
    sdk = dict(run.last("sagemaker.CreateEndpointConfig")[name],
               ExecutionRoleArn="arn:aws:iam::123456789012:role/someone-else")
    compare = Compare(synth, run)
    compare.diff(sdk, cfn, "config")
    assert compare.problems == [
        "config.ExecutionRoleArn: SDK 'arn:aws:iam::123456789012:role/someone-else' is not "
        f"the AWS::IAM::Role Arn {run.role_arn!r}"]
