"""cdk-nag (3.x) checks and lmikit's acknowledgements.

cdk-nag 3 is a CDK policy-validation plugin: :func:`add_nag_checks` registers the
AwsSolutions and HIPAA.Security packs on an app, and ``cdk synth`` fails on any finding that
is not acknowledged. Acknowledgements use CDK's ``Validations.of(construct).acknowledge`` and
always name the rule (or the single finding) and a reason specific to this deployment.
Tests call ``pack.validate_scope(app)`` on the same packs (see tests/cdk).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
import cdk_nag
from constructs import IConstruct

if TYPE_CHECKING:
    from lmikit_cdk.role import ExecutionRole

WILDCARD_RULE = "AwsSolutions-IAM5"


def nag_packs(scope: IConstruct | None = None) -> list[cdk_nag.NagPack]:
    """The packs lmikit is held to."""
    return [cdk_nag.AwsSolutionsChecks(scope, verbose=True),
            cdk_nag.HIPAASecurityChecks(scope, verbose=True)]


def add_nag_checks(app: IConstruct) -> None:
    """Make ``cdk synth`` fail on unacknowledged AwsSolutions or HIPAA.Security findings."""
    cdk.Validations.of(app).add_plugins(*nag_packs(app))


def acknowledge(construct: IConstruct, rule: str, reason: str,
                *more: tuple[str, str]) -> None:
    """Acknowledge ``rule`` (and each further ``(rule, reason)``) on ``construct``."""
    pairs = [(rule, reason), *more]
    for rule_id, why in pairs:
        if not rule_id or len(why.strip()) < 20:
            raise ValueError(f"acknowledging {rule_id!r} needs the rule id and a specific "
                             "reason")
    cdk.Validations.of(construct).acknowledge(
        *(cdk.Acknowledgment(id=rule_id, reason=why) for rule_id, why in pairs))


def acknowledge_role_wildcards(role: ExecutionRole) -> None:
    """Acknowledge each wildcard finding of the execution role's policy, one by one, with the
    reason :func:`lmikit.render.wildcard_reason` gives for its statement."""
    from lmikit.render import wildcard_reason

    stack = cdk.Stack.of(role)
    document = stack.resolve(role.policy.document.to_json())
    findings: list[tuple[str, str]] = []
    for statement in document.get("Statement", []):
        resources = statement.get("Resource", [])
        resources = resources if isinstance(resources, list) else [resources]
        reason = wildcard_reason(statement)
        for resource in resources:
            text = _finding_text(resource)
            if "*" in text and reason:
                findings.append((f"{WILDCARD_RULE}[Resource::{text}]", reason))
    if findings:
        acknowledge(role.policy, *findings[0], *findings[1:])


def _finding_text(value: object) -> str:
    """A resource as cdk-nag prints it in finding ids: intrinsics flattened to <Ref>/<Attr>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_finding_text(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        res, attr = value["Fn::GetAtt"]
        return f"<{res}.{attr}>"
    return str(value)



def acknowledge_copy_function(function: IConstruct) -> None:
    """Acknowledge what lmikit cannot change on aws-s3-deployment's copy function (see
    :mod:`lmikit_cdk.kms_artifacts`; its IAM is lmikit's own least-privilege policy)."""
    target = function.node.try_find_child("Resource") or function
    acknowledge(
        target, "AwsSolutions-L1", "aws-s3-deployment's BucketDeployment fixes its handler's "
        "Python runtime (it runs the AWS CLI layer built for it); lmikit cannot choose it, "
        "and aws-cdk-lib releases move it forward",
        ("HIPAA.Security-LambdaConcurrency", "the function runs only while CloudFormation "
         "creates or updates an artifact copy, once per artifact per deploy; reserving "
         "concurrency would hold account capacity for a function idle between deploys"),
        ("HIPAA.Security-LambdaDLQ", "CloudFormation invokes this custom-resource handler and "
         "waits for its answer: a failed copy fails the stack operation, which rolls back, so "
         "no event is lost that a dead-letter queue could keep"),
        ("HIPAA.Security-LambdaInsideVPC", "the function only copies one S3 object to another "
         "through the S3 and KMS APIs and answers CloudFormation's pre-signed URL; it serves "
         "no traffic and reaches no resource inside the deployment's VPC"))
