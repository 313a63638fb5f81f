"""Whether an IAM role may read an S3 object, for the fake SageMaker's artifact downloads.

SageMaker downloads a component's ``Container.ArtifactUrl`` with the endpoint config's
``ExecutionRoleArn``; with :func:`iam_role_reads` the fake asks IAM (moto) the same question.
The evaluation follows the IAM User Guide's "Policy evaluation logic" for identity-based
policies of one account: an explicit Deny wins, else an Allow is needed, else the request is
implicitly denied. It reads the role's attached managed policies (default versions) and inline
policies, and matches ``Action``/``NotAction`` (case-insensitive) and ``Resource``/
``NotResource`` (case-sensitive) with the ``*`` and ``?`` wildcards.

What it does not model, said rather than guessed: a statement with a ``Condition`` is judged
strictly (an Allow with one grants nothing, a Deny with one applies), since the fake has no
request context; policy variables (``${aws:username}``) match literally; bucket policies, KMS
key policies, permission boundaries and SCPs are not read. lmikit's own policies put no
condition on ``s3:GetObject``. A role IAM does not know, or a policy it cannot read (an AWS
managed one moto lacks), is not judged: the check answers None, as for a role of another
account.

>>> doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
...     "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/lmikit/d/adapters/*"}]}
>>> decision([doc], "s3:GetObject", "arn:aws:s3:::b/lmikit/d/adapters/x/1.tar.gz")
'Allow'
>>> decision([doc], "s3:GetObject", "arn:aws:s3:::b/lmikit/d/model/1.tar.gz")
'ImplicitDeny'
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

READ_ACTION = "s3:GetObject"


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@functools.lru_cache(maxsize=1024)
def _pattern(text: str, ignore_case: bool) -> re.Pattern[str]:
    """IAM's wildcards: ``*`` any run of characters (``/`` included), ``?`` one character."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)
    flags = (re.IGNORECASE | re.DOTALL) if ignore_case else re.DOTALL
    return re.compile(f"^{body}$", flags)


def _any_match(patterns: Any, value: str, ignore_case: bool) -> bool:
    return any(isinstance(p, str) and _pattern(p, ignore_case).match(value)
               for p in _items(patterns))


def _applies(statement: dict[str, Any], action: str, resource: str) -> bool:
    if "Action" in statement:
        acts = _any_match(statement["Action"], action, True)
    else:
        acts = not _any_match(statement.get("NotAction", []), action, True)
    if "Resource" in statement:
        on = _any_match(statement["Resource"], resource, False)
    else:
        on = not _any_match(statement.get("NotResource", []), resource, False)
    return acts and on


def decision(documents: Iterable[dict[str, Any]], action: str, resource: str) -> str:
    """``Allow``, ``Deny`` (an explicit Deny applies) or ``ImplicitDeny`` (no Allow does)."""
    allowed = False
    for document in documents:
        for statement in _items(document.get("Statement", [])):
            if not isinstance(statement, dict) or not _applies(statement, action, resource):
                continue
            if statement.get("Effect") == "Deny":
                return "Deny"  # with or without a Condition: judged strictly
            if statement.get("Effect") == "Allow" and "Condition" not in statement:
                allowed = True
    return "Allow" if allowed else "ImplicitDeny"


def _document(value: Any) -> dict[str, Any]:
    """A policy document as IAM returns it: a dict, or URL-encoded JSON text."""
    return dict(json.loads(unquote(value))) if isinstance(value, str) else dict(value)


def _role_documents(iam: Any, role_name: str) -> list[dict[str, Any]] | None:
    """The role's policy documents, or None when the role or one of its policies cannot be
    read."""
    errors = iam.exceptions.ClientError
    try:
        iam.get_role(RoleName=role_name)
        documents = []
        for page in iam.get_paginator("list_attached_role_policies").paginate(
                RoleName=role_name):
            for attached in page["AttachedPolicies"]:
                arn = attached["PolicyArn"]
                version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
                documents.append(_document(iam.get_policy_version(
                    PolicyArn=arn, VersionId=version)["PolicyVersion"]["Document"]))
        for page in iam.get_paginator("list_role_policies").paginate(RoleName=role_name):
            for name in page["PolicyNames"]:
                documents.append(_document(iam.get_role_policy(
                    RoleName=role_name, PolicyName=name)["PolicyDocument"]))
    except errors:
        return None
    return documents


def iam_role_reads(iam: Any) -> Callable[[str, str], str | None]:
    """A ``role_reads`` check for :class:`~lmikit.testing.FakeSageMaker` backed by an IAM
    client (moto): ``check(role_arn, "s3://bucket/key")`` is None when the role may
    ``s3:GetObject`` the object (or cannot be judged: see the module), else why not."""
    def check(role_arn: str, url: str) -> str | None:
        parts = role_arn.split(":", 5)
        if len(parts) != 6 or not parts[5].startswith("role/"):
            return None
        documents = _role_documents(iam, parts[5].rsplit("/", 1)[1])
        if documents is None:
            return None
        resource = f"arn:{parts[1]}:s3:::{url.removeprefix('s3://')}"
        verdict = decision(documents, READ_ACTION, resource)
        if verdict == "Allow":
            return None
        if verdict == "Deny":
            return f"an explicit Deny in its policies refuses {READ_ACTION} on {resource}"
        return f"no statement of its policies allows {READ_ACTION} on {resource}"
    return check
