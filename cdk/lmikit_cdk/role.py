"""The endpoint's execution role: least privilege, no AWS managed policies.

Every permission is a statement in one customer-managed policy (HIPAA packs flag inline
policies). The trust policy, descriptions, tags and the policy document come from
:mod:`lmikit.render.iam`, the renderer ``lmikit deploy --create-role`` uses, with
CloudFormation's partition and account (tokens) and the stack's asset locations. Wildcard
resources appear only where the AWS API has no resource-level permission or names its
resources at run time; each such place is listed in
:data:`lmikit.render.iam.WILDCARD_REASONS` and acknowledged in cdk-nag with that reason.

>>> role = ExecutionRole(stack, "ExecutionRole", spec=spec)  # doctest: +SKIP
>>> role.grant_read_objects("model", bucket, key)  # doctest: +SKIP
>>> role.render_policy(image_repository_arn=repo_arn)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from lmikit.errors import RenderError
from lmikit.names import default_bucket_name
from lmikit.render.iam import (
    SAGEMAKER_PRINCIPAL,
    WILDCARD_REASONS,
    execution_policy_document,
    policy_description,
    role_description,
    role_tags,
)
from lmikit.spec import DeploymentSpec

__all__ = ["WILDCARD_REASONS", "ExecutionRole"]


class ExecutionRole(Construct):
    """An IAM role SageMaker assumes for one deployment, with one managed policy.

    The policy is rendered once, by :meth:`render_policy`, after every artifact it reads
    was registered with :meth:`grant_read_objects` (:class:`lmikit_cdk.LmiEndpoint` calls it
    last).

    :param spec: the deployment (names its log groups, KMS key, VPC, secrets and S3 weights).

    ``adapter_bucket`` is where ``lmikit adapters register`` puts the adapters it adds to this
    endpoint: the stack's endpoint carries no ``lmikit:bucket`` tag, so the registry picks
    SageMaker's default bucket ``sagemaker-<region>-<account>``, and when the endpoint
    serves LoRA the role reads ``lmikit/<name>/adapters/*`` there.
    """

    def __init__(self, scope: Construct, construct_id: str, *, spec: DeploymentSpec) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal(SAGEMAKER_PRINCIPAL),
                             description=role_description(spec))
        for tag in role_tags(spec):
            cdk.Tags.of(self.role).add(tag["Key"], tag["Value"])
        self.policy = iam.ManagedPolicy(self, "Policy", roles=[self.role],
                                        description=policy_description(spec))
        self.role_arn: str = self.role.role_arn
        self.artifacts: dict[str, tuple[str, str]] = {}
        self.adapter_bucket: str = default_bucket_name(spec.region, cdk.Aws.ACCOUNT_ID)
        self.document: dict[str, Any] | None = None

    def grant_read_objects(self, artifact: str, bucket: str, key: str) -> None:
        """Let the role read one artifact object: ``artifact`` is ``"model"`` or an adapter
        name (see :func:`lmikit.render.iam.execution_policy_document`)."""
        if self.document is not None:
            raise RenderError("the execution policy was already rendered; register every "
                              "artifact before render_policy()")
        self.artifacts[artifact] = (bucket, key)

    def render_policy(self, *, image_repository_arn: str) -> dict[str, Any]:
        """Render the policy document (once) and add its statements to the managed policy."""
        if self.document is not None:
            raise RenderError("the execution policy is rendered once")
        self.document = execution_policy_document(
            self.spec, partition=cdk.Aws.PARTITION, account=cdk.Aws.ACCOUNT_ID,
            image_repository_arn=image_repository_arn, artifacts=self.artifacts,
            adapter_bucket=self.adapter_bucket)
        for statement in self.document["Statement"]:
            self.policy.add_statements(iam.PolicyStatement.from_json(statement))
        return self.document
