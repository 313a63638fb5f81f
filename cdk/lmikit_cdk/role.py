"""The endpoint's execution role: least privilege, no AWS managed policies.

Every permission is a statement in one customer-managed policy (HIPAA packs flag inline
policies). Wildcard resources appear only where the AWS API has no resource-level
permission or names its resources at run time; each such place is listed in
:data:`WILDCARD_REASONS` and acknowledged in cdk-nag with that reason.
"""

from __future__ import annotations

from collections.abc import Iterable

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from lmikit.spec import DeploymentSpec

SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
METRIC_NAMESPACES = ("/aws/sagemaker/Endpoints", "/aws/sagemaker/InferenceComponents")
VPC_DESCRIBE_ACTIONS = ("ec2:DescribeDhcpOptions", "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs")
VPC_ENI_ACTIONS = ("ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                   "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission")

# Why each wildcard exists (the cdk-nag acknowledgements quote these).
WILDCARD_REASONS = {
    "ecr:GetAuthorizationToken": "ecr:GetAuthorizationToken has no resource-level permission; "
    "AWS requires Resource '*' (image layers are pulled from this image's repository only)",
    "cloudwatch:PutMetricData": "cloudwatch:PutMetricData has no resource-level permission; "
    "AWS requires Resource '*', so the statement is limited by cloudwatch:namespace to the "
    "SageMaker endpoint and inference-component namespaces",
    "logs": "SageMaker creates one log stream per instance and container at run time; the "
    "statement is limited to this deployment's log groups, streams are named by SageMaker",
    "ec2:Describe": "EC2 Describe* calls have no resource-level permission; AWS requires "
    "Resource '*' for the VPC lookups SageMaker makes when it attaches the endpoint to the VPC",
    "ec2:NetworkInterface": "SageMaker creates the endpoint's network interfaces at run time, "
    "so their IDs are unknown; the statement is limited to this deployment's subnets and "
    "security groups and to network interfaces in this account and region",
    "s3:weights": "the model weights are many objects under the model.id S3 prefix; the "
    "statement is limited to that prefix (read only)",
}


class ExecutionRole(Construct):
    """An IAM role SageMaker assumes for one deployment, with one managed policy.

    :param spec: the deployment (names its log groups, KMS key, VPC, secrets and S3 weights).
    """

    def __init__(self, scope: Construct, construct_id: str, *, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal(SAGEMAKER_PRINCIPAL),
                             description=f"SageMaker execution role of lmikit deployment "
                             f"{spec.name}")
        self.policy = iam.ManagedPolicy(
            self, "Policy", roles=[self.role],
            description=f"Least-privilege permissions of lmikit deployment {spec.name}")
        self.role_arn: str = self.role.role_arn
        self._add_base_statements(spec)

    def add_statements(self, statements: Iterable[iam.PolicyStatement]) -> None:
        for statement in statements:
            self.policy.add_statements(statement)

    def grant_read_objects(self, sid: str, bucket: str, key: str) -> None:
        """s3:GetObject on exactly one object (an artifact)."""
        self.add_statements([iam.PolicyStatement(
            sid=sid, actions=["s3:GetObject"],
            resources=[f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}/{key}"])])

    def _add_base_statements(self, spec: DeploymentSpec) -> None:
        stack = cdk.Stack.of(self)
        groups = [f"/aws/sagemaker/Endpoints/{spec.name}",
                  f"/aws/sagemaker/InferenceComponents/{spec.name}-*"]
        log_arns = [stack.format_arn(service="logs", resource="log-group",
                                     resource_name=f"{g}:*",
                                     arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
                    for g in groups]
        statements = [
            iam.PolicyStatement(sid="Logs", actions=[
                "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                "logs:PutLogEvents"], resources=log_arns),
            iam.PolicyStatement(sid="Metrics", actions=["cloudwatch:PutMetricData"],
                                resources=["*"], conditions={"StringEquals": {
                                    "cloudwatch:namespace": list(METRIC_NAMESPACES)}}),
        ]
        sec = spec.security
        if sec.kms_key_arn:
            statements.append(iam.PolicyStatement(
                sid="UseKmsKey", actions=["kms:Decrypt", "kms:DescribeKey",
                                          "kms:GenerateDataKey"],
                resources=[sec.kms_key_arn]))
            statements.append(iam.PolicyStatement(
                sid="KmsGrantForVolume", actions=["kms:CreateGrant"],
                resources=[sec.kms_key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}))
        if sec.hf_token_secret_arn:
            statements.append(iam.PolicyStatement(
                sid="ReadHfToken", actions=["secretsmanager:GetSecretValue"],
                resources=[sec.hf_token_secret_arn]))
        if spec.kv_cache.remote_credentials_secret_arn:
            statements.append(iam.PolicyStatement(
                sid="ReadKvRemoteCredentials", actions=["secretsmanager:GetSecretValue"],
                resources=[spec.kv_cache.remote_credentials_secret_arn]))
        if sec.vpc:
            statements.append(iam.PolicyStatement(
                sid="VpcDescribe", actions=list(VPC_DESCRIBE_ACTIONS), resources=["*"]))
            eni = stack.format_arn(service="ec2", resource="network-interface",
                                   resource_name="*")
            subnets = [stack.format_arn(service="ec2", resource="subnet", resource_name=s)
                       for s in sec.vpc.subnet_ids]
            groups_ = [stack.format_arn(service="ec2", resource="security-group",
                                        resource_name=g) for g in sec.vpc.security_group_ids]
            statements.append(iam.PolicyStatement(
                sid="VpcNetworkInterfaces", actions=list(VPC_ENI_ACTIONS),
                resources=[eni, *subnets, *groups_]))
        for sid, uri in (("ReadModelWeights", spec.model.id),
                         ("ReadDraftWeights", spec.engine.speculative.draft_model
                          if spec.engine.speculative else "")):
            if uri.startswith("s3://"):
                statements.extend(_s3_prefix_read(sid, uri))
        self.add_statements(statements)


def _s3_prefix_read(sid: str, uri: str) -> list[iam.PolicyStatement]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = prefix.rstrip("/")
    objects = f"{prefix}/*" if prefix else "*"
    bucket_arn = f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}"
    list_statement = iam.PolicyStatement(sid=f"{sid}List", actions=["s3:ListBucket"],
                                         resources=[bucket_arn])
    if prefix:
        list_statement.add_condition("StringLike", {"s3:prefix": [prefix, f"{prefix}/*"]})
    return [list_statement,
            iam.PolicyStatement(sid=sid, actions=["s3:GetObject"],
                                resources=[f"{bucket_arn}/{objects}"])]
