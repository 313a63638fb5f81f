"""Template assertions: the shape of the endpoint, adapters, scaling and IAM."""

from __future__ import annotations

from typing import Any

# Actions AWS grants only on Resource "*" (no resource-level permissions); documented in
# lmikit_cdk.role.WILDCARD_REASONS.
STAR_ONLY_ACTIONS = {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData",
                     "ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces",
                     "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs"}


def _listify(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statements(synth: Any) -> list[dict[str, Any]]:
    out = []
    for res in synth.template["Resources"].values():
        if res["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            out += res["Properties"]["PolicyDocument"]["Statement"]
        if res["Type"] == "AWS::IAM::Role":
            for policy in res["Properties"].get("Policies", []):
                out += policy["PolicyDocument"]["Statement"]
    return out


def test_variant_has_no_model_name(synths: dict[str, Any]) -> None:
    for synth in synths.values():
        _, config = synth.one("AWS::SageMaker::EndpointConfig")
        assert all("ModelName" not in v for v in config["Properties"]["ProductionVariants"])
    # Only the isolated specs have a Model: SageMaker copies their S3 weights.
    assert sorted(n for n, s in synths.items() if s.resources("AWS::SageMaker::Model")) == [
        "claims-llama8b", "docqa-mistral-large-3"]


def test_isolated_component_names_the_model_sagemaker_fills_from_s3(
        synths: dict[str, Any]) -> None:
    synth = synths["claims-llama8b"]
    model_id, model = synth.one("AWS::SageMaker::Model")
    (base,) = synth.resources("AWS::SageMaker::InferenceComponent").values()
    spec = base["Properties"]["Specification"]
    assert spec["ModelName"] == {"Fn::GetAtt": [model_id, "ModelName"]}
    assert "Container" not in spec
    props = model["Properties"]
    assert "ModelName" not in props  # named by CloudFormation: a changed Model is replaced
    assert props["PrimaryContainer"]["ModelDataSource"] == {"S3DataSource": {
        "S3Uri": "s3://example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/",
        "S3DataType": "S3Prefix", "CompressionType": "None"}}
    assert props["EnableNetworkIsolation"] is True
    policy_id, _ = synth.one("AWS::IAM::ManagedPolicy")
    assert policy_id in model["DependsOn"]
    assert synth.stack.endpoint.model_artifact is None  # /opt/ml/model holds the weights


def test_artifact_objects_are_tar_gz(synths: dict[str, Any]) -> None:
    """SageMaker takes a single .tar.gz as ArtifactUrl; CDK would otherwise name the object
    <hash>.gz (the extension of x.tar.gz)."""
    import json

    keys = []
    for synth in synths.values():
        manifest = synth.path.with_name(synth.path.name.replace(".template.json",
                                                                ".assets.json"))
        for asset in json.loads(manifest.read_text())["files"].values():
            if asset["source"]["path"].endswith(".tar.gz"):
                keys += [d["objectKey"] for d in asset["destinations"].values()]
    assert keys and all(k.endswith(".tar.gz") for k in keys)


def _sagemaker_roles(synth: Any) -> dict[str, Any]:
    return {k: r for k, r in synth.resources("AWS::IAM::Role").items()
            if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
            == {"Service": "sagemaker.amazonaws.com"}}


def test_endpoint_config_execution_role_is_the_deployment_role(
        synths: dict[str, Any]) -> None:
    for synth in synths.values():
        _, config = synth.one("AWS::SageMaker::EndpointConfig")
        (role_id,) = _sagemaker_roles(synth)
        assert config["Properties"]["ExecutionRoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_routing_config_is_prefix_aware_with_its_settings(synths: dict[str, Any]) -> None:
    _, config = synths["rag-qwen72b"].one("AWS::SageMaker::EndpointConfig")
    assert config["Properties"]["ProductionVariants"][0]["RoutingConfig"] == {
        "RoutingStrategy": "PREFIX_AWARE",
        "PrefixAwareRoutingConfig": {"PrefixLength": 8192, "ConcurrencyThreshold": 16}}


def test_sticky_sessions_route_least_outstanding(synths: dict[str, Any]) -> None:
    _, config = synths["docqa-qwen7b"].one("AWS::SageMaker::EndpointConfig")
    routing = config["Properties"]["ProductionVariants"][0]["RoutingConfig"]
    assert routing == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def test_detailed_observability_metrics_config(synths: dict[str, Any]) -> None:
    _, config = synths["docqa-qwen7b"].one("AWS::SageMaker::EndpointConfig")
    assert config["Properties"]["MetricsConfig"] == {
        "EnableEnhancedMetrics": True, "EnableDetailedObservability": True,
        "MetricPublishFrequencyInSeconds": 60}


def test_base_component_waits_for_the_endpoint(synths: dict[str, Any]) -> None:
    synth = synths["docqa-qwen7b"]
    endpoint_id, _ = synth.one("AWS::SageMaker::Endpoint")
    (base,) = synth.resources("AWS::SageMaker::InferenceComponent").values()
    assert endpoint_id in base["DependsOn"]
    assert base["Properties"]["EndpointName"] == "docqa-qwen7b"


def test_endpoint_waits_for_its_config_and_role_policy(synths: dict[str, Any]) -> None:
    synth = synths["docqa-qwen7b"]
    config_id, _ = synth.one("AWS::SageMaker::EndpointConfig")
    policy_id, _ = synth.one("AWS::IAM::ManagedPolicy")
    _, endpoint = synth.one("AWS::SageMaker::Endpoint")
    assert {config_id, policy_id} <= set(endpoint["DependsOn"])


def test_adapter_names_the_base_literally_and_depends_on_it(synths: dict[str, Any]) -> None:
    synth = synths["docqa-lora"]
    components = synth.resources("AWS::SageMaker::InferenceComponent")
    base_id, base = next((k, v) for k, v in components.items()
                         if "BaseInferenceComponentName" not in v["Properties"]["Specification"])
    (adapter,) = [v for k, v in components.items() if k != base_id]
    spec = adapter["Properties"]["Specification"]
    assert spec["BaseInferenceComponentName"] == base["Properties"]["InferenceComponentName"]
    assert spec["BaseInferenceComponentName"] == "docqa-lora-base"
    assert base_id in adapter["DependsOn"]
    assert "ComputeResourceRequirements" not in spec


def test_adapter_artifact_is_an_s3_asset_readable_by_the_role(synths: dict[str, Any]) -> None:
    synth = synths["docqa-lora"]
    sids = {s.get("Sid") for s in _statements(synth)}
    assert {"ReadModelArtifact", "ReadAdapterLegal"} <= sids
    files = {a["source"]["path"] for a in _asset_manifest(synth)["files"].values()}
    assert sum(p.endswith(".tar.gz") for p in files) == 2


def test_a_stack_serving_lora_reads_the_adapters_lmikit_adapters_registers(
        synths: dict[str, Any]) -> None:
    """The stack's endpoint has no lmikit:bucket tag, so `lmikit adapters register` uploads
    to sagemaker-<region>-<account> under lmikit/<name>/adapters/: the role reads that prefix
    there, in every stack whose base serves LoRA, and no stack without LoRA reads it."""
    checked = 0
    for name, synth in synths.items():
        found = [s for s in _statements(synth) if s.get("Sid") == "ReadRegisteredAdapters"]
        if not synth.stack.spec.lora_enabled:
            assert found == [], name
            continue
        checked += 1
        assert found == [{"Sid": "ReadRegisteredAdapters", "Effect": "Allow",
                          "Action": "s3:GetObject", "Resource": {"Fn::Join": ["", [
                              "arn:", {"Ref": "AWS::Partition"},
                              f":s3:::sagemaker-{synth.stack.spec.region}-",
                              {"Ref": "AWS::AccountId"}, f"/lmikit/{name}/adapters/*"]]}}]
    assert checked >= 2  # docqa-lora and secure-redis at least


def _asset_manifest(synth: Any) -> dict[str, Any]:
    import json

    stack = synth.stack
    path = synth.path.with_name(f"{stack.artifact_id}.assets.json")
    return json.loads(path.read_text())


def test_copy_count_target_tracks_concurrency_per_copy(synths: dict[str, Any]) -> None:
    synth = synths["rag-qwen72b"]
    _, target = synth.one("AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"]["ResourceId"] == "inference-component/rag-qwen72b-base"
    assert target["Properties"]["ScalableDimension"] == (
        "sagemaker:inference-component:DesiredCopyCount")
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (2, 8)
    _, policy = synth.one("AWS::ApplicationAutoScaling::ScalingPolicy")
    config = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert config["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution")
    assert config["TargetValue"] == 8


def _scaling_alarms(synth: Any) -> dict[str, dict[str, Any]]:
    """Alarms of CopyCountScaling (the observability alarms are in test_observability)."""
    return {k: v for k, v in synth.resources("AWS::CloudWatch::Alarm").items()
            if k.startswith("LmiScaling")}


def test_min_one_instance_has_no_zero_scale_alarm(synths: dict[str, Any]) -> None:
    assert _scaling_alarms(synths["rag-qwen72b"]) == {}


def test_min_zero_adds_step_scaling_on_no_capacity_alarm(synths: dict[str, Any]) -> None:
    synth = synths["chat-small"]
    _, target = synth.one("AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"]["MinCapacity"] == 0
    policies = synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    step_id, step = next((k, v) for k, v in policies.items()
                         if v["Properties"]["PolicyType"] == "StepScaling")
    assert step["Properties"]["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]
    (alarm,) = _scaling_alarms(synth).values()
    props = alarm["Properties"]
    assert (props["Namespace"], props["MetricName"]) == ("AWS/SageMaker",
                                                         "NoCapacityInvocationFailures")
    assert props["Dimensions"] == [{"Name": "InferenceComponentName",
                                    "Value": "chat-small-base"}]
    assert (props["ComparisonOperator"], props["Threshold"]) == (
        "GreaterThanOrEqualToThreshold", 1)
    assert props["AlarmActions"] == [{"Ref": step_id}]


def test_scaling_uses_the_service_linked_role(synths: dict[str, Any]) -> None:
    synth = synths["chat-small"]
    assert len(synth.resources("AWS::IAM::Role")) == 1  # the execution role only
    _, target = synth.one("AWS::ApplicationAutoScaling::ScalableTarget")
    assert "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in str(
        target["Properties"]["RoleARN"])


def test_no_wildcard_action_and_star_resource_only_where_aws_requires_it(
        synths: dict[str, Any]) -> None:
    bad = []
    for name, synth in synths.items():
        for st in _statements(synth):
            actions = _listify(st["Action"])
            bad += [f"{name}: {a}" for a in actions if "*" in a]
            if "*" in _listify(st["Resource"]):
                bad += [f"{name}: {a} on *" for a in actions if a not in STAR_ONLY_ACTIONS]
    assert bad == []


def test_metric_data_is_limited_to_sagemaker_namespaces(synths: dict[str, Any]) -> None:
    (st,) = [s for s in _statements(synths["docqa-qwen7b"]) if s.get("Sid") == "Metrics"]
    assert st["Condition"] == {"StringEquals": {"cloudwatch:namespace": [
        "/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents"]}}


def test_execution_role_has_no_aws_managed_policy(synths: dict[str, Any]) -> None:
    """No role lmikit creates has an AWS managed or inline policy: the execution role, and
    with a KMS key the artifact copy function's role (lmikit_cdk.kms_artifacts)."""
    for name, synth in synths.items():
        roles = synth.resources("AWS::IAM::Role")
        assert len(_sagemaker_roles(synth)) == 1
        for role_id, role in roles.items():
            assert "ManagedPolicyArns" not in role["Properties"]
            assert "Policies" not in role["Properties"]
            if role_id not in _sagemaker_roles(synth):
                assert role_id.startswith("LmikitArtifactCopyRole"), (name, role_id)
                assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0][
                    "Principal"] == {"Service": "lambda.amazonaws.com"}
        assert not synth.resources("AWS::IAM::Policy"), name


def test_ecr_pull_is_limited_to_the_image_repository(synths: dict[str, Any]) -> None:
    for synth in synths.values():
        (st,) = [s for s in _statements(synth) if s.get("Sid") == "PullImage"]
        assert not isinstance(st["Resource"], list) and st["Resource"] != "*"


def test_regulated_spec_is_in_a_vpc_with_network_isolation_and_key_use(
        synths: dict[str, Any]) -> None:
    synth = synths["claims-llama8b"]
    _, config = synth.one("AWS::SageMaker::EndpointConfig")
    props = config["Properties"]
    assert props["EnableNetworkIsolation"] is True
    assert props["VpcConfig"]["Subnets"] == ["subnet-0a1b2c3d4e5f60718",
                                             "subnet-0f1e2d3c4b5a69788"]
    assert "KmsKeyId" not in props  # ml.g6e has NVMe: SageMaker rejects a volume key
    kms = [s for s in _statements(synth) if s.get("Sid") == "UseKmsKey"]
    assert kms[0]["Resource"] == ("arn:aws:kms:us-east-1:111122223333:key/"
                                  "1234abcd-12ab-34cd-56ef-1234567890ab")
    weights = [s for s in _statements(synth) if s.get("Sid") == "ReadModelWeights"]
    assert "example-models-bucket/meta-llama/Llama-3.1-8B-Instruct/*" in str(weights)


def test_stacks_are_region_aware_and_account_agnostic(synths: dict[str, Any]) -> None:
    regions = {name: s.stack.region for name, s in synths.items()}
    assert regions["chat-small"] == "eu-west-1" and regions["rag-qwen72b"] == "us-west-2"
    assert all(s.stack.account.startswith("${Token[") for s in synths.values())
