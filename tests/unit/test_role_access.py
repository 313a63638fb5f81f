"""The fake's question "may this role s3:GetObject that object?", after the IAM User Guide's
"Policy evaluation logic" (explicit Deny wins, else an Allow is needed) and its wildcard
rules (``*`` any run of characters, ``?`` one; actions case-insensitive, resource ARNs
case-sensitive). Reading the roles from IAM (moto) is tested in
tests/functional/test_registered_adapter_access.py."""

from __future__ import annotations

from typing import Any

import pytest

from lmikit.testing._role_access import decision

GET = "s3:GetObject"
OBJECT = "arn:aws:s3:::bucket/lmikit/demo/adapters/support/ab12.tar.gz"


def _doc(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def _allow(resource: Any, action: Any = GET, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


@pytest.mark.parametrize(("resource", "verdict"), [
    ("arn:aws:s3:::bucket/lmikit/demo/adapters/*", "Allow"),  # * spans "/"
    ("arn:aws:s3:::bucket/lmikit/demo/adapters/support/ab??.tar.gz", "Allow"),
    ("arn:aws:s3:::bucket/lmikit/demo/adapters/support/ab?.tar.gz", "ImplicitDeny"),
    ("arn:aws:s3:::bucket/lmikit/demo/adapters/legal/*", "ImplicitDeny"),
    ("arn:aws:s3:::bucket/lmikit/demo/model/*", "ImplicitDeny"),
    ("arn:aws:s3:::Bucket/lmikit/demo/adapters/*", "ImplicitDeny"),  # ARNs: case-sensitive
    ("arn:aws:s3:::bucket/lmikit/demo/adapters[*]", "ImplicitDeny"),  # [ ] are literal
    (["arn:aws:s3:::other/*", "arn:aws:s3:::bucket/*"], "Allow"),
    ("*", "Allow"),
])
def test_resource_wildcards(resource: Any, verdict: str) -> None:
    assert decision([_doc(_allow(resource))], GET, OBJECT) == verdict


@pytest.mark.parametrize(("action", "verdict"), [
    ("s3:GetObject", "Allow"), ("S3:getobject", "Allow"), ("s3:Get*", "Allow"),
    ("s3:*", "Allow"), ("*", "Allow"), (["s3:PutObject", "s3:GetObject"], "Allow"),
    ("s3:GetObjectVersion", "ImplicitDeny"), ("s3:ListBucket", "ImplicitDeny"),
])
def test_action_wildcards_ignore_case(action: Any, verdict: str) -> None:
    assert decision([_doc(_allow("*", action))], GET, OBJECT) == verdict


def test_an_explicit_deny_wins_over_any_allow() -> None:
    deny = {"Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::bucket/lmikit/*"}
    assert decision([_doc(_allow("*")), _doc(deny)], GET, OBJECT) == "Deny"


def test_not_action_and_not_resource_apply_to_everything_else() -> None:
    not_put = {"Effect": "Allow", "NotAction": "s3:PutObject", "Resource": "*"}
    assert decision([_doc(not_put)], GET, OBJECT) == "Allow"
    outside = {"Effect": "Allow", "Action": GET,
               "NotResource": "arn:aws:s3:::bucket/lmikit/demo/adapters/*"}
    assert decision([_doc(outside)], GET, OBJECT) == "ImplicitDeny"


def test_a_condition_is_judged_strictly() -> None:
    """Without a request context the fake cannot evaluate a Condition: an Allow with one
    grants nothing and a Deny with one applies."""
    condition = {"StringEquals": {"aws:PrincipalTag/team": "ml"}}
    assert decision([_doc(_allow("*", Condition=condition))], GET, OBJECT) == "ImplicitDeny"
    deny = {"Effect": "Deny", "Action": GET, "Resource": "*", "Condition": condition}
    assert decision([_doc(_allow("*"), deny)], GET, OBJECT) == "Deny"
