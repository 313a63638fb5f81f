"""The least-privilege SageMaker execution role ``lmikit deploy --create-role`` creates.

The same role as the CDK stack's ``ExecutionRole``, from the same renderer
(:mod:`lmikit.render.iam`): the trust policy, description and tags of the role, and one
customer-managed policy (``lmikit-<name>-execution``, attached to the role) holding the
permissions document, built with the region's partition and the caller's account. The SDK
reads its artifacts under ``s3://<bucket>/lmikit/<name>/...`` (content-addressed keys), so
the artifact statements grant those prefixes where the stack grants its asset objects; the
bucket is also where ``lmikit adapters register`` puts this endpoint's adapters.

Only lmikit's own role is created or changed: an existing role (or policy) of that name must
carry ``lmikit:deployment=<name>``; otherwise the call stops with an error that names the role
and the tag (pass ``--role-arn`` to use a role of your own as it is).

>>> from lmikit.deploy import ensure_execution_role  # doctest: +SKIP
>>> ensure_execution_role(spec, "my-bucket")  # doctest: +SKIP
'arn:aws:iam::123456789012:role/lmikit-docqa-execution'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from lmikit.aws import Clients, call, describe_or_none, owner_of, paginate, tag_dict
from lmikit.change import Change
from lmikit.errors import AwsError, DeployError
from lmikit.names import DEPLOYMENT_TAG, artifact_prefix, execution_role_name
from lmikit.render.iam import (
    TRUST_POLICY,
    ecr_repository_arn,
    execution_policy_document,
    partition_of,
    policy_description,
    role_description,
    role_tags,
)
from lmikit.spec import DeploymentSpec

ACCESS_DENIED = frozenset({"AccessDenied", "AccessDeniedException"})
IAM_PROPAGATION_S = 10.0
"""How long a deploy waits after creating the role before SageMaker is asked to assume it:
IAM is eventually consistent, and a role created a moment ago can fail SageMaker's check
("Could not assume role"); AWS's IAM guide ("Changes that I make are not always immediately
visible") says changes usually take a few seconds to propagate."""
IAM_PROPAGATION_ENV = "LMIKIT_IAM_PROPAGATION_SECONDS"
"""Overrides :data:`IAM_PROPAGATION_S`; ``lmikit sandbox serve`` exports 0, as its IAM (moto's)
is consistent at once."""


def iam_propagation_seconds() -> float:
    """:data:`IAM_PROPAGATION_S`, or the seconds ``LMIKIT_IAM_PROPAGATION_SECONDS`` gives."""
    text = os.environ.get(IAM_PROPAGATION_ENV)
    if text is None:
        return IAM_PROPAGATION_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise DeployError(f"{IAM_PROPAGATION_ENV}={text!r} must be a number of seconds "
                          "from 0 to 3600")
    return seconds
LEGACY_INLINE_POLICY = "lmikit-endpoint"  # what earlier lmikit versions put on the role
MAX_POLICY_VERSIONS = 5  # IAM keeps at most five versions of a managed policy


def sdk_artifacts(spec: DeploymentSpec, bucket: str) -> dict[str, tuple[str, str]]:
    """Where ``lmikit deploy`` stores the artifacts: ``(bucket, key pattern)`` for the model
    (unless SageMaker copies the weights itself) and every adapter that is not on S3."""
    from lmikit.startup import weights_source

    out: dict[str, tuple[str, str]] = {}
    if weights_source(spec) != "s3-sagemaker":
        out["model"] = (bucket, f"{artifact_prefix(spec.name)}/*")
    for adapter in spec.adapters:
        if not adapter.source.startswith("s3://"):
            out[adapter.name] = (bucket, f"{artifact_prefix(spec.name, adapter.name)}/*")
    return out


def execution_role_policy(spec: DeploymentSpec, bucket: str, *, account: str,
                          image_uri: str | None = None,
                          partition: str | None = None) -> dict[str, Any]:
    """The permissions policy document of the SDK's execution role.

    ``image_uri`` defaults to the stock LMI image of ``engine.lmi_version``; ``partition`` to
    the partition of ``spec.region``.
    """
    partition = partition or partition_of(spec.region)
    if image_uri is None:
        from lmikit.image import lmi_image_uri

        image_uri = lmi_image_uri(spec.region, spec.engine.lmi_version)
    return execution_policy_document(
        spec, partition=partition, account=account,
        image_repository_arn=ecr_repository_arn(image_uri, partition),
        artifacts=sdk_artifacts(spec, bucket), adapter_bucket=bucket)


@dataclass
class RoleResult:
    """The role's ARN and what :func:`apply_execution_role` did."""

    arn: str
    changes: list[Change] = field(default_factory=list)


def _not_ours(kind: str, name: str, spec: DeploymentSpec, who: str | None,
              arn: str) -> DeployError:
    tagged = f"tagged {DEPLOYMENT_TAG}={who}" if who else f"not tagged {DEPLOYMENT_TAG}"
    return DeployError(
        f"IAM {kind} {name} exists but is {tagged}, so it is not lmikit's {kind} for "
        f"deployment {spec.name!r}; lmikit does not take it over. Pass --role-arn "
        f"(role_arn=) to deploy with a role of your own as it is, or tag it "
        f"{DEPLOYMENT_TAG}={spec.name} to let lmikit manage it (it is at {arn})")


def owner(tags: Any) -> str | None:
    """The deployment a listed tag set (``[{"Key", "Value"}]``) names, if any."""
    return owner_of(tag_dict(tags))


def _has_tags(stored: Any, spec: DeploymentSpec) -> bool:
    have = tag_dict(stored)
    return all(have.get(t["Key"]) == t["Value"] for t in role_tags(spec))


def document_of(value: Any) -> Any:
    """A policy document as IAM returns it (a dict, or URL-encoded JSON text)."""
    return json.loads(unquote(value)) if isinstance(value, str) else value


def role_arn_of(spec: DeploymentSpec, clients: Clients) -> str:
    """The ARN ``lmikit-<name>-execution`` has (or will have) in the caller's account."""
    return (f"arn:{partition_of(spec.region)}:iam::{clients.account()}:role/"
            f"{execution_role_name(spec.name)}")


def _tags(iam: Any, operation: str, **kwargs: Any) -> Any:
    return paginate(iam, operation, "Tags", **kwargs)


def apply_execution_role(spec: DeploymentSpec, bucket: str, *, session: Any = None,
                         image_uri: str | None = None, clients: Clients | None = None,
                         dry_run: bool = False) -> RoleResult:
    """Create or update the role and its managed policy (idempotent; ``dry_run``: read
    only, and report what would change)."""
    clients = clients or Clients(session, spec.region)
    iam = clients.iam
    partition = partition_of(spec.region)
    name = execution_role_name(spec.name)
    document = execution_role_policy(spec, bucket, account=clients.account(),
                                     image_uri=image_uri, partition=partition)
    result = RoleResult(arn=role_arn_of(spec, clients))
    stored = describe_or_none(iam, "get_role", RoleName=name)
    if stored is None:
        result.changes.append(Change("iam-role", name, "create"))
        if dry_run:
            result.changes.append(Change("iam-policy", name, "create"))
            return result
        try:
            result.arn = str(call(iam, "create_role", RoleName=name,
                                  AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
                                  Description=role_description(spec),
                                  Tags=role_tags(spec))["Role"]["Arn"])
        except AwsError as race:  # a concurrent run (or a lost answer) created it
            if race.code != "EntityAlreadyExists":
                raise
            stored = call(iam, "get_role", RoleName=name)
            result.changes.pop()
    if stored is not None:
        role = stored["Role"]
        result.arn = str(role["Arn"])
        tags = _tags(iam, "list_role_tags", RoleName=name)
        who = owner(tags)
        if who != spec.name:
            raise _not_ours("role", name, spec, who, result.arn)
        changed = []
        if document_of(role.get("AssumeRolePolicyDocument")) != TRUST_POLICY:
            if not dry_run:
                call(iam, "update_assume_role_policy", RoleName=name,
                     PolicyDocument=json.dumps(TRUST_POLICY))
            changed.append("trust policy")
        if role.get("Description") != role_description(spec):
            if not dry_run:
                call(iam, "update_role", RoleName=name, Description=role_description(spec))
            changed.append("description")
        if not _has_tags(tags, spec):
            if not dry_run:
                call(iam, "tag_role", RoleName=name, Tags=role_tags(spec))
            changed.append("tags")
        result.changes.append(Change("iam-role", name, "update" if changed else "unchanged",
                                     ", ".join(changed)))
    policy_arn = _policy_arn_of(result.arn)
    result.changes.append(_ensure_policy(iam, spec, name, policy_arn, document, dry_run))
    attached = paginate(iam, "list_attached_role_policies", "AttachedPolicies", RoleName=name)
    if policy_arn not in {p["PolicyArn"] for p in attached} and not dry_run:
        call(iam, "attach_role_policy", RoleName=name, PolicyArn=policy_arn)
    if LEGACY_INLINE_POLICY in paginate(iam, "list_role_policies", "PolicyNames",
                                        RoleName=name):
        if not dry_run:
            call(iam, "delete_role_policy", RoleName=name, PolicyName=LEGACY_INLINE_POLICY)
        result.changes.append(Change("iam-inline-policy", LEGACY_INLINE_POLICY, "delete",
                                     "replaced by the managed policy"))
    return result


def _policy_arn_of(role_arn: str) -> str:
    """The managed policy named like the role, in the role's partition and account (both
    live under the IAM path ``/``)."""
    return role_arn.replace(":role/", ":policy/", 1)


def _ensure_policy(iam: Any, spec: DeploymentSpec, name: str, arn: str,
                   document: dict[str, Any], dry_run: bool = False) -> Change:
    stored = describe_or_none(iam, "get_policy", PolicyArn=arn)
    if stored is None:
        if dry_run:
            return Change("iam-policy", name, "create")
        try:
            call(iam, "create_policy", PolicyName=name, PolicyDocument=json.dumps(document),
                 Description=policy_description(spec), Tags=role_tags(spec))
            return Change("iam-policy", name, "create")
        except AwsError as race:  # a concurrent run (or a lost answer) created it
            if race.code != "EntityAlreadyExists":
                raise
            stored = call(iam, "get_policy", PolicyArn=arn)
    tags = _tags(iam, "list_policy_tags", PolicyArn=arn)
    if owner(tags) != spec.name:
        raise _not_ours("policy", name, spec, owner(tags), arn)
    retag = not _has_tags(tags, spec)
    if retag and not dry_run:
        call(iam, "tag_policy", PolicyArn=arn, Tags=role_tags(spec))
    default = stored["Policy"]["DefaultVersionId"]
    version = call(iam, "get_policy_version", PolicyArn=arn, VersionId=default)
    if document_of(version["PolicyVersion"]["Document"]) == document:
        return Change("iam-policy", name, "update" if retag else "unchanged",
                      "tags" if retag else "")
    if dry_run:
        return Change("iam-policy", name, "update", "new default version")
    versions = paginate(iam, "list_policy_versions", "Versions", PolicyArn=arn)
    old = sorted((v for v in versions if not v["IsDefaultVersion"]),
                 key=lambda v: v["CreateDate"])
    if len(versions) >= MAX_POLICY_VERSIONS and old:
        call(iam, "delete_policy_version", PolicyArn=arn, VersionId=old[0]["VersionId"])
    call(iam, "create_policy_version", PolicyArn=arn, PolicyDocument=json.dumps(document),
         SetAsDefault=True)
    return Change("iam-policy", name, "update", "new default version")


def ensure_execution_role(spec: DeploymentSpec, bucket: str, *, session: Any = None,
                          image_uri: str | None = None) -> str:
    """Create (or update) ``lmikit-<name>-execution`` and return its ARN
    (:func:`apply_execution_role` without the change list)."""
    return apply_execution_role(spec, bucket, session=session, image_uri=image_uri).arn


def remove_policy(iam: Any, spec: DeploymentSpec, arn: str) -> list[Change]:
    """Delete the (detached) managed policy ``arn`` with every version, when it is tagged as
    this deployment's."""
    if describe_or_none(iam, "get_policy", PolicyArn=arn) is None:
        return []
    name = arn.rsplit("/", 1)[1]
    if owner(_tags(iam, "list_policy_tags", PolicyArn=arn)) != spec.name:
        return [Change("iam-policy", name, "kept", f"not tagged {DEPLOYMENT_TAG}={spec.name}")]
    for v in paginate(iam, "list_policy_versions", "Versions", PolicyArn=arn):
        if not v["IsDefaultVersion"]:
            call(iam, "delete_policy_version", PolicyArn=arn, VersionId=v["VersionId"])
    call(iam, "delete_policy", PolicyArn=arn)
    return [Change("iam-policy", name, "delete")]


def remove_execution_role(spec: DeploymentSpec, *, session: Any = None,
                          clients: Clients | None = None, dry_run: bool = False
                          ) -> list[Change]:
    """Delete lmikit's role and managed policy (only when tagged as this deployment's).

    A role that still has policies lmikit did not put there is kept (``kept``, naming them).
    """
    clients = clients or Clients(session, spec.region)
    iam = clients.iam
    name = execution_role_name(spec.name)
    changes: list[Change] = []
    try:
        stored = describe_or_none(iam, "get_role", RoleName=name)
    except AwsError as exc:
        if exc.code not in ACCESS_DENIED:
            raise
        # A caller that never used --create-role may have no IAM rights at all.
        return [Change("iam-role", name, "unknown",
                       f"not checked: no permission to read IAM ({exc.code}); if "
                       "`lmikit deploy --create-role` made it, run `lmikit destroy` with "
                       "iam:GetRole and iam:DeleteRole to delete it")]
    if stored is None:
        return [Change("iam-role", name, "absent")]
    who = owner(_tags(iam, "list_role_tags", RoleName=name))
    if who != spec.name:
        return [Change("iam-role", name, "kept", f"not tagged {DEPLOYMENT_TAG}={spec.name}")]
    policy_arn = _policy_arn_of(str(stored["Role"]["Arn"]))
    attached = [p["PolicyArn"] for p in paginate(iam, "list_attached_role_policies",
                                                 "AttachedPolicies", RoleName=name)]
    policy = describe_or_none(iam, "get_policy", PolicyArn=policy_arn)
    ours = policy is not None and owner(
        _tags(iam, "list_policy_tags", PolicyArn=policy_arn)) == spec.name
    inline = paginate(iam, "list_role_policies", "PolicyNames", RoleName=name)
    if not dry_run:
        if policy_arn in attached:
            call(iam, "detach_role_policy", RoleName=name, PolicyArn=policy_arn)
        if ours:
            remove_policy(iam, spec, policy_arn)
        if LEGACY_INLINE_POLICY in inline:
            call(iam, "delete_role_policy", RoleName=name, PolicyName=LEGACY_INLINE_POLICY)
    if policy is not None:
        changes.append(Change("iam-policy", name, "delete") if ours else Change(
            "iam-policy", name, "kept", f"not tagged {DEPLOYMENT_TAG}={spec.name}"))
    inline = [p for p in inline if p != LEGACY_INLINE_POLICY]
    foreign = sorted([*inline, *(a for a in attached if a != policy_arn)])
    if foreign:
        return [*changes, Change("iam-role", name, "kept",
                                 "other policies are attached: " + ", ".join(foreign))]
    if not dry_run:
        call(iam, "delete_role", RoleName=name)
    return [*changes, Change("iam-role", name, "delete")]
