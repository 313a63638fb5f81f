"""The fake itself: it must be at least as strict as the service model, and consistent."""

from __future__ import annotations

import copy
import doctest
import importlib
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from lmikit.render._sagemaker import render_requests
from lmikit.testing import FakeSageMaker, compile_java_pattern

from .conftest import BUCKET, IMAGE, ROLE

ARTIFACT_KEY = "lmikit/docqa/model/abc.tar.gz"


@pytest.fixture
def requests(spec: Any, fake: FakeSageMaker) -> Any:
    import boto3

    from lmikit.planner._planner import plan_spec

    boto3.client("s3", region_name="us-east-1").put_object(Bucket=BUCKET, Key=ARTIFACT_KEY,
                                                            Body=b"model")
    return render_requests(spec, plan_spec(spec), image_uri=IMAGE, execution_role_arn=ROLE,
                           model_artifact_url=f"s3://{BUCKET}/{ARTIFACT_KEY}")


@pytest.fixture
def sm(session: Any) -> Any:
    return session.client("sagemaker")


def _up(sm: Any, fake: FakeSageMaker, requests: Any) -> None:
    sm.create_endpoint_config(**requests.endpoint_config)
    sm.create_endpoint(**requests.endpoint)
    fake.settle()
    sm.create_inference_component(**requests.base_component)
    fake.settle()


def test_fake_rejects_an_enum_botocore_lets_through(sm: Any, requests: Any) -> None:
    body = copy.deepcopy(requests.endpoint_config)
    body["ProductionVariants"][0]["RoutingConfig"]["RoutingStrategy"] = "ROUND_ROBIN"
    with pytest.raises(ClientError, match="'ROUND_ROBIN' is not one of"):
        sm.create_endpoint_config(**body)


def test_fake_rejects_a_name_over_the_max_length(sm: Any, requests: Any) -> None:
    body = dict(requests.endpoint_config, EndpointConfigName="x" * 64)
    with pytest.raises(ClientError, match="more than the maximum 63"):
        sm.create_endpoint_config(**body)


def test_fake_translates_java_character_classes() -> None:
    rx = compile_java_pattern(r"\A\S[\p{Print}]*\z")
    assert rx is not None and rx.fullmatch("doc-42 v1") and not rx.fullmatch(" lead")
    assert compile_java_pattern(r"\p{IsAlphabetic}+") is None


def test_fake_moves_through_creating_to_in_service(sm: Any, fake: FakeSageMaker,
                                                   requests: Any) -> None:
    sm.create_endpoint_config(**requests.endpoint_config)
    sm.create_endpoint(**requests.endpoint)
    assert sm.describe_endpoint(EndpointName="docqa")["EndpointStatus"] == "Creating"
    fake.clock.advance(fake.timings.endpoint_create)
    assert sm.describe_endpoint(EndpointName="docqa")["EndpointStatus"] == "InService"


def test_fake_needs_an_in_service_endpoint_for_components(sm: Any, requests: Any) -> None:
    sm.create_endpoint_config(**requests.endpoint_config)
    sm.create_endpoint(**requests.endpoint)
    with pytest.raises(ClientError, match="components need an InService endpoint"):
        sm.create_inference_component(**requests.base_component)


def test_fake_adapter_needs_its_base(sm: Any, fake: FakeSageMaker, requests: Any) -> None:
    sm.create_endpoint_config(**requests.endpoint_config)
    sm.create_endpoint(**requests.endpoint)
    fake.settle()
    with pytest.raises(ClientError, match='Base inference component "docqa-base" does not'):
        sm.create_inference_component(
            InferenceComponentName="docqa-x", EndpointName="docqa",
            Specification={"BaseInferenceComponentName": "docqa-base",
                           "Container": {"ArtifactUrl": "s3://b/k.tar.gz"}})


def test_fake_endpoint_with_components_cannot_be_deleted(sm: Any, fake: FakeSageMaker,
                                                         requests: Any) -> None:
    _up(sm, fake, requests)
    with pytest.raises(ClientError, match="hosts inference components"):
        sm.delete_endpoint(EndpointName="docqa")


def test_fake_missing_artifact_fails_the_component(sm: Any, fake: FakeSageMaker,
                                                   requests: Any) -> None:
    body = copy.deepcopy(requests.base_component)
    body["Specification"]["Container"]["ArtifactUrl"] = "s3://lmikit-test-artifacts/nope.tar.gz"
    sm.create_endpoint_config(**requests.endpoint_config)
    sm.create_endpoint(**requests.endpoint)
    fake.settle()
    sm.create_inference_component(**body)
    fake.settle()
    desc = sm.describe_inference_component(InferenceComponentName="docqa-base")
    assert desc["InferenceComponentStatus"] == "Failed"
    assert "nope.tar.gz" in desc["FailureReason"]


@pytest.mark.slow
def test_fake_throttling_is_retried_by_botocore(sm: Any, fake: FakeSageMaker) -> None:
    fake.inject("ListEndpoints", "throttle", times=2)
    response = sm.list_endpoints()
    assert response["ResponseMetadata"]["RetryAttempts"] == 2


def test_fake_rejects_unknown_fault_kinds(fake: FakeSageMaker) -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        fake.inject("CreateEndpoint", "meteor")


@pytest.mark.parametrize("name", ["lmikit.testing._validate", "lmikit.testing._clock",
                                  "lmikit.testing._fake", "lmikit.client._endpoint"])
def test_docstring_examples_run(name: str, aws: None) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_fake_keeps_resources_per_region(fake: FakeSageMaker, session: Any,
                                         requests: Any) -> None:
    """Like the service: a client of one region never sees another region's resources."""
    east = session.client("sagemaker", region_name="us-east-1")
    west = session.client("sagemaker", region_name="eu-west-1")
    east.create_endpoint_config(**requests.endpoint_config)
    assert west.list_endpoint_configs()["EndpointConfigs"] == []
    with pytest.raises(ClientError, match="Could not find endpoint configuration"):
        west.describe_endpoint_config(EndpointConfigName=requests.names.endpoint_config)
    west.create_endpoint_config(**requests.endpoint_config)  # the name is free there
    arn = west.describe_endpoint_config(
        EndpointConfigName=requests.names.endpoint_config)["EndpointConfigArn"]
    assert arn.startswith("arn:aws:sagemaker:eu-west-1:")
    assert fake.resources("eu-west-1")["endpoint-config"] == {requests.names.endpoint_config:
                                                             None}
    assert {c.region for c in fake.calls} == {"us-east-1", "eu-west-1"}


def test_fake_lost_answer_is_applied_and_retried_into_already_existing(
        fake: FakeSageMaker, session: Any, requests: Any) -> None:
    from botocore.config import Config

    sm = session.client("sagemaker", config=Config(retries={"mode": "standard"}))
    fake.inject("CreateEndpointConfig", "lost")
    with pytest.raises(ClientError, match="Cannot create already existing endpoint "
                                          "configuration"):
        sm.create_endpoint_config(**requests.endpoint_config)
    assert [c.error for c in fake.operations("CreateEndpointConfig")] == [
        "lost", "ValidationException"]
    assert requests.names.endpoint_config in fake.resources()["endpoint-config"]


def test_fake_shows_the_pending_config_while_an_endpoint_updates(
        fake: FakeSageMaker, sm: Any, requests: Any) -> None:
    _up(sm, fake, requests)
    new = {**requests.endpoint_config, "EndpointConfigName": "docqa-next"}
    sm.create_endpoint_config(**new)
    sm.update_endpoint(EndpointName="docqa", EndpointConfigName="docqa-next")
    desc = sm.describe_endpoint(EndpointName="docqa")
    assert desc["EndpointStatus"] == "Updating"
    assert desc["EndpointConfigName"] == requests.names.endpoint_config
    assert desc["PendingDeploymentSummary"]["EndpointConfigName"] == "docqa-next"
    fake.settle()
    desc = sm.describe_endpoint(EndpointName="docqa")
    assert desc["EndpointConfigName"] == "docqa-next" and "PendingDeploymentSummary" not in desc


def test_fake_faults_and_records_calls_moto_answers(fake: FakeSageMaker, session: Any) -> None:
    from botocore.config import Config

    s3 = session.client("s3", config=Config(retries={"mode": "standard"}))
    fake.inject("PutObject", "5xx")
    fake.inject("HeadObject", "throttle")
    s3.put_object(Bucket=BUCKET, Key="k", Body=b"1")  # retried after the 500
    s3.head_object(Bucket=BUCKET, Key="k")  # retried after the 503 SlowDown
    fake.inject("DeleteObject", "lost")
    s3.delete_object(Bucket=BUCKET, Key="k")  # applied, answer lost, retried
    assert [(c.operation, c.error) for c in fake.operations(
        "PutObject", "HeadObject", "DeleteObject")] == [
        ("PutObject", "5xx"), ("PutObject", None), ("HeadObject", "throttle"),
        ("HeadObject", None), ("DeleteObject", "lost"), ("DeleteObject", None)]
    with pytest.raises(ValueError, match="answered by moto: use one of throttle, 5xx, lost"):
        fake.inject("PutObject", "failed")


def test_fake_lists_models(fake: FakeSageMaker, sm: Any) -> None:
    container = {"Image": "img:1", "ModelDataSource": {"S3DataSource": {
        "S3Uri": "s3://b/w/", "S3DataType": "S3Prefix", "CompressionType": "None"}}}
    for name in ("docqa-model-1", "docqa-v2-model-1", "other"):
        sm.create_model(ModelName=name, PrimaryContainer=container)
    rows = sm.get_paginator("list_models").paginate(NameContains="docqa", PaginationConfig={
        "PageSize": 1})
    assert sorted(m["ModelName"] for page in rows for m in page["Models"]) == [
        "docqa-model-1", "docqa-v2-model-1"]


def _component_tags(sm: Any, name: str) -> dict[str, str]:
    arn = sm.describe_inference_component(InferenceComponentName=name)["InferenceComponentArn"]
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def test_fake_keeps_an_inference_components_tags_as_the_service_does(
        sm: Any, fake: FakeSageMaker, requests: Any) -> None:
    """CreateInferenceComponent's Tags, AddTags adding or overwriting, DeleteTags removing
    the keys named (one the component does not carry is no error), on the component's ARN;
    the tags go with the component."""
    _up(sm, fake, requests)
    assert _component_tags(sm, "docqa-base") == {"lmikit:deployment": "docqa"}
    arn = sm.describe_inference_component(InferenceComponentName="docqa-base")[
        "InferenceComponentArn"]
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "lmikit:managed-by", "Value": "adapters"}])
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "lmikit:managed-by", "Value": "spec"}])
    assert _component_tags(sm, "docqa-base") == {"lmikit:deployment": "docqa",
                                                 "lmikit:managed-by": "spec"}
    sm.delete_tags(ResourceArn=arn, TagKeys=["lmikit:managed-by", "never-set"])
    assert _component_tags(sm, "docqa-base") == {"lmikit:deployment": "docqa"}
    sm.delete_inference_component(InferenceComponentName="docqa-base")
    fake.settle()
    with pytest.raises(ClientError, match="Could not find resource"):
        sm.delete_tags(ResourceArn=arn, TagKeys=["lmikit:deployment"])


@pytest.mark.parametrize(("tag", "match"), [
    ({"Key": "team;ops", "Value": "x"}, r"'team;ops' does not match pattern"),  # TagKey
    ({"Key": "team", "Value": "a\tb"}, r"does not match pattern"),  # TagValue
    ({"Key": "aws:owner", "Value": "x"}, "reserved for AWS use"),
])
def test_fake_refuses_a_tag_the_service_refuses_and_creates_nothing(
        sm: Any, fake: FakeSageMaker, requests: Any, tag: dict[str, str], match: str) -> None:
    _up(sm, fake, requests)
    arn = sm.describe_inference_component(InferenceComponentName="docqa-base")[
        "InferenceComponentArn"]
    with pytest.raises(ClientError, match=match):
        sm.add_tags(ResourceArn=arn, Tags=[tag])
    adapter = {"InferenceComponentName": "docqa-x", "EndpointName": "docqa",
               "Specification": {"BaseInferenceComponentName": "docqa-base",
                                 "Container": {"ArtifactUrl": f"s3://{BUCKET}/{ARTIFACT_KEY}"}},
               "Tags": [tag]}
    with pytest.raises(ClientError, match=match):
        sm.create_inference_component(**adapter)
    assert "docqa-x" not in fake.resources()["inference-component"]


def test_fake_holds_at_most_fifty_tags_per_resource(sm: Any, fake: FakeSageMaker,
                                                    requests: Any) -> None:
    """AddTags takes up to 50 tags a call (botocore's TagList max); the resource holds at most
    50 in all ("Tagging AWS resources", AWS General Reference)."""
    _up(sm, fake, requests)
    arn = sm.describe_inference_component(InferenceComponentName="docqa-base")[
        "InferenceComponentArn"]
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(49)])
    assert len(_component_tags(sm, "docqa-base")) == 50
    with pytest.raises(ClientError, match="at most 50 tags; this request would give it 51"):
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": "one-more", "Value": "v"}])


P4DE_TP4 = """
api_version: v1
name: docqa
region: us-east-1
model: {id: Qwen/Qwen2.5-72B-Instruct}
instance: {type: ml.p4de.24xlarge, copies_per_instance: COPIES, min_count: INSTANCES,
           max_count: 2}
engine: {tensor_parallel_degree: 4, max_model_len: 32768}
routing: {strategy: ROUTING}
"""


def _session_turns(fake: FakeSageMaker, session: Any, copies: int, instances: int,
                   routing: str) -> list[str]:
    """Deploy p4de copies at TP 4 as rendered, open one session, send 12 turns; each turn's
    answer, or the container's error message."""
    import boto3

    from lmikit.planner._planner import plan_spec
    from lmikit.spec._loader import load_spec_text

    spec = load_spec_text(P4DE_TP4.replace("COPIES", str(copies))
                          .replace("INSTANCES", str(instances)).replace("ROUTING", routing))
    boto3.client("s3", region_name="us-east-1").put_object(Bucket=BUCKET, Key=ARTIFACT_KEY,
                                                            Body=b"model")
    _up(session.client("sagemaker"), fake, render_requests(
        spec, plan_spec(spec), image_uri=IMAGE, execution_role_arn=ROLE,
        model_artifact_url=f"s3://{BUCKET}/{ARTIFACT_KEY}"))
    rt = session.client("sagemaker-runtime")
    call = {"EndpointName": "docqa", "InferenceComponentName": "docqa-base"}
    opened = rt.invoke_endpoint(**call, Body='{"requestType": "NEW_SESSION"}',
                                SessionId="NEW_SESSION")
    sid = opened["NewSessionId"].split(";")[0]
    out = []
    for turn in range(12):
        try:
            got = rt.invoke_endpoint(**call, SessionId=sid,
                                     Body=f'{{"prompt": "turn {turn}", "max_tokens": 3}}')
            out.append(json.loads(got["Body"].read())["choices"][0]["text"])
        except ClientError as exc:
            out.append(exc.response["OriginalMessage"])
    return out


def test_fake_pins_a_session_to_its_instance_not_its_copy(fake: FakeSageMaker,
                                                          session: Any) -> None:
    """Two copies on one instance (prefix_aware: lmikit renders it; LMI's sessions are on by
    default): SageMaker keeps the session's instance, any copy there may answer, and the one
    that did not open the session answers as LMI does."""
    turns = _session_turns(fake, session, copies=2, instances=1, routing="prefix_aware")
    lost = [t for t in turns if "session not found" in t]
    assert lost and len(lost) < len(turns)
    assert all(json.loads(t)["error"].startswith("Input parsing failed: session not found: ")
               for t in lost)


def test_fake_session_with_one_copy_per_instance_keeps_every_turn(fake: FakeSageMaker,
                                                                  session: Any) -> None:
    turns = _session_turns(fake, session, copies=1, instances=2, routing="sticky_session")
    assert [t.split()[:3] for t in turns] == [["[docqa-base", "turn", f"{i + 1}]"]
                                              for i in range(12)]
