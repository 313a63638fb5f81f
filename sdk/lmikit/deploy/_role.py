"""A least-privilege SageMaker execution role for one deployment.

Unlike the common ``AmazonSageMakerFullAccess`` attachment, the inline policy grants only
what the endpoint needs: read its artifacts, pull the LMI image, write logs and metrics,
and (when the spec has a key) decrypt with the KMS key.
"""

from __future__ import annotations

import json
from typing import Any

from lmikit.deploy._aws import Clients, call, error_code
from lmikit.errors import DeployError
from lmikit.names import deployment_tags
from lmikit.spec import DeploymentSpec

TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
    "Action": "sts:AssumeRole"}]}


def execution_role_policy(spec: DeploymentSpec, bucket: str) -> dict[str, Any]:
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadArtifacts", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [f"arn:aws:s3:::{bucket}/lmikit/{spec.name}/*"]},
        {"Sid": "PullImage", "Effect": "Allow",
         "Action": ["ecr:GetAuthorizationToken", "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
         "Resource": "*"},
        {"Sid": "Logs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/*"},
        {"Sid": "Metrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"],
         "Resource": "*",
         "Condition": {"StringLike": {"cloudwatch:namespace": ["AWS/SageMaker*", "lmikit*"]}}},
    ]
    if spec.model.is_s3:
        bucket_name, _, prefix = spec.model.id[5:].partition("/")
        statements.append({"Sid": "ReadWeights", "Effect": "Allow",
                           "Action": ["s3:GetObject", "s3:ListBucket"],
                           "Resource": [f"arn:aws:s3:::{bucket_name}",
                                        f"arn:aws:s3:::{bucket_name}/{prefix}*"]})
    if spec.security.kms_key_arn:
        statements.append({"Sid": "Decrypt", "Effect": "Allow",
                           "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                           "Resource": [spec.security.kms_key_arn]})
    if spec.security.hf_token_secret_arn:
        statements.append({"Sid": "HfToken", "Effect": "Allow",
                           "Action": ["secretsmanager:GetSecretValue"],
                           "Resource": [spec.security.hf_token_secret_arn]})
    return {"Version": "2012-10-17", "Statement": statements}


def ensure_execution_role(spec: DeploymentSpec, bucket: str, *, session: Any = None) -> str:
    """Create (or update) ``lmikit-<name>-execution`` and return its ARN."""
    from botocore.exceptions import ClientError

    iam = Clients(session, spec.region).iam
    name = f"lmikit-{spec.name}-execution"
    try:
        arn = str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except ClientError as exc:
        if error_code(exc) != "NoSuchEntity":
            raise DeployError(f"GetRole {name} failed: {error_code(exc)}") from exc
        try:
            arn = call(iam, "create_role", RoleName=name,
                       AssumeRolePolicyDocument=json.dumps(TRUST),
                       Description=f"lmikit execution role for {spec.name}",
                       Tags=deployment_tags(spec.name))["Role"]["Arn"]
        except DeployError as race:  # a concurrent run (or a lost answer) created it
            if error_code(race) != "EntityAlreadyExists":
                raise
            arn = call(iam, "get_role", RoleName=name)["Role"]["Arn"]
    call(iam, "put_role_policy", RoleName=name, PolicyName="lmikit-endpoint",
         PolicyDocument=json.dumps(execution_role_policy(spec, bucket)))
    return arn
