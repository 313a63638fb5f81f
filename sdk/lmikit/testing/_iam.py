"""Structural checks of IAM policy documents, after the IAM JSON policy grammar.

The rules follow the IAM User Guide's "Grammar of the IAM JSON policy language" and its
element reference (Version, Statement, Sid, Effect, Principal, Action/NotAction,
Resource/NotResource, Condition and the condition operators), plus the managed-policy size
quota of "IAM and AWS STS quotas" (6,144 characters, white space not counted).

>>> iam_policy_problems({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
...     "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}]})
[]
>>> iam_policy_problems({"Statement": [{"Sid": "a-b", "Effect": "allow", "Action": "s3",
...     "Resource": "bucket"}]})  # doctest: +NORMALIZE_WHITESPACE
['Version: missing (use 2012-10-17)', "Statement[0].Sid: 'a-b' is not letters and digits",
 "Statement[0].Effect: 'allow' is not Allow or Deny",
 "Statement[0].Action: 's3' is not <service>:<action>",
 "Statement[0].Resource: 'bucket' is neither * nor an ARN"]
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

VERSIONS = ("2012-10-17", "2008-10-17")
MANAGED_POLICY_MAX_CHARS = 6144
STATEMENT_KEYS = frozenset({"Sid", "Effect", "Principal", "NotPrincipal", "Action",
                            "NotAction", "Resource", "NotResource", "Condition"})
CONDITION_OPERATORS = frozenset({
    "StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase",
    "StringLike", "StringNotLike", "NumericEquals", "NumericNotEquals", "NumericLessThan",
    "NumericLessThanEquals", "NumericGreaterThan", "NumericGreaterThanEquals", "DateEquals",
    "DateNotEquals", "DateLessThan", "DateLessThanEquals", "DateGreaterThan",
    "DateGreaterThanEquals", "Bool", "BinaryEquals", "IpAddress", "NotIpAddress", "ArnEquals",
    "ArnLike", "ArnNotEquals", "ArnNotLike", "Null"})
_SID = re.compile(r"^[A-Za-z0-9]*$")
_ACTION = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9*?]+$")
_ARN = re.compile(r"^arn:(?P<partition>aws[a-z-]*):(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]*):"
                  r"(?P<account>\d{12}|aws|\*|):(?P<resource>.+)$")


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def condition_operator_known(operator: str) -> bool:
    """``StringLike``, ``ForAnyValue:StringLike``, ``StringLikeIfExists``, ..."""
    base = operator.split(":", 1)[1] if operator.startswith(("ForAllValues:",
                                                              "ForAnyValue:")) else operator
    base = base.removesuffix("IfExists")
    return base in CONDITION_OPERATORS


def iam_policy_problems(document: Any, *, identity: bool = True,
                        partition: str | None = None) -> list[str]:
    """Every grammar problem of a policy document (empty: well formed).

    :param identity: an identity-based (permissions) policy: no Principal allowed. False for
        a trust policy, where Principal is required.
    :param partition: when given, every ARN must be in this partition.
    """
    out: list[str] = []
    if not isinstance(document, dict):
        return ["policy: not a JSON object"]
    unknown = set(document) - {"Version", "Id", "Statement"}
    out += [f"{k}: not a policy element" for k in sorted(unknown)]
    if "Version" not in document:
        out.append("Version: missing (use 2012-10-17)")
    elif document["Version"] not in VERSIONS:
        out.append(f"Version: {document['Version']!r} is not one of {', '.join(VERSIONS)}")
    statements = document.get("Statement")
    if statements is None or statements == []:
        return [*out, "Statement: missing"]
    sids: set[str] = set()
    for i, st in enumerate(_items(statements)):
        out += _statement_problems(st, f"Statement[{i}]", sids, identity, partition)
    compact = re.sub(r"\s", "", _dumps(document))
    if identity and len(compact) > MANAGED_POLICY_MAX_CHARS:
        out.append(f"policy: {len(compact)} characters, more than the managed-policy quota "
                   f"{MANAGED_POLICY_MAX_CHARS}")
    return out


def _dumps(document: Any) -> str:
    return json.dumps(document)


# IAM service prefix -> botocore service model. IAM action names are the API operation names
# for these services, with a few exceptions the service documents in its operation docs
# (S3's ListObjectsV2: "you must have permission to perform the s3:ListBucket action").
IAM_PREFIX_SERVICES = {"s3": "s3", "ecr": "ecr", "logs": "logs", "cloudwatch": "cloudwatch",
                       "kms": "kms", "secretsmanager": "secretsmanager", "ec2": "ec2",
                       "sts": "sts", "iam": "iam", "sagemaker": "sagemaker",
                       "application-autoscaling": "application-autoscaling"}


@functools.lru_cache(maxsize=32)
def iam_actions(prefix: str) -> frozenset[str]:
    """Actions of one IAM service prefix known to botocore's service model: every operation
    name, plus every ``<prefix>:<Action>`` the model's documentation names."""
    import botocore.session

    service = IAM_PREFIX_SERVICES.get(prefix)
    if service is None:
        return frozenset()
    loader = botocore.session.get_session().get_component("data_loader")
    raw = loader.load_service_model(service, "service-2")
    names = set(raw["operations"])
    names |= set(re.findall(rf"(?<![A-Za-z0-9-]){re.escape(prefix)}:([A-Z][A-Za-z0-9]+)",
                            json.dumps(raw)))
    return frozenset(f"{prefix}:{n}" for n in names)


def unknown_actions(document: dict[str, Any]) -> list[str]:
    """Actions of a policy that no service model knows (wildcards are not allowed here).

    >>> unknown_actions({"Statement": [{"Action": ["s3:GetObject", "s3:ListBucket",
    ...                                            "s3:ReadObject", "ecr:PullImage"]}]})
    ['ecr:PullImage', 's3:ReadObject']
    """
    actions = {a for st in _items(document.get("Statement", []))
               for a in _items(st.get("Action", []))}
    return sorted(a for a in actions
                  if not isinstance(a, str) or a not in iam_actions(a.split(":", 1)[0]))


def _statement_problems(st: Any, where: str, sids: set[str], identity: bool,
                        partition: str | None) -> list[str]:
    if not isinstance(st, dict):
        return [f"{where}: not a JSON object"]
    out = [f"{where}.{k}: not a statement element" for k in sorted(set(st) - STATEMENT_KEYS)]
    sid = st.get("Sid")
    if sid is not None:
        if not isinstance(sid, str) or not _SID.match(sid):
            out.append(f"{where}.Sid: {sid!r} is not letters and digits")
        elif sid in sids:
            out.append(f"{where}.Sid: {sid!r} is used twice")
        else:
            sids.add(sid)
    if st.get("Effect") not in ("Allow", "Deny"):
        out.append(f"{where}.Effect: {st.get('Effect')!r} is not Allow or Deny")
    principal = [k for k in ("Principal", "NotPrincipal") if k in st]
    if identity and principal:
        out.append(f"{where}.{principal[0]}: not allowed in an identity-based policy")
    if not identity and not principal:
        out.append(f"{where}.Principal: required in a trust policy")
    out += _one_of(st, where, ("Action", "NotAction"), _action_problem)
    if identity or "Resource" in st or "NotResource" in st:
        out += _one_of(st, where, ("Resource", "NotResource"),
                       lambda v: _resource_problem(v, partition))
    if "Condition" in st:
        out += _condition_problems(st["Condition"], f"{where}.Condition")
    return out


def _one_of(st: dict[str, Any], where: str, keys: tuple[str, str], check: Any) -> list[str]:
    present = [k for k in keys if k in st]
    if len(present) != 1:
        return [f"{where}: needs exactly one of {' / '.join(keys)}"]
    key = present[0]
    values = _items(st[key])
    if not values:
        return [f"{where}.{key}: empty"]
    out = []
    for value in values:
        problem = check(value) if isinstance(value, str) else f"{value!r} is not a string"
        if problem:
            out.append(f"{where}.{key}: {problem}")
    return out


def _action_problem(action: str) -> str | None:
    if action == "*" or _ACTION.match(action):
        return None
    return f"{action!r} is not <service>:<action>"


def _resource_problem(resource: str, partition: str | None) -> str | None:
    if resource == "*":
        return None
    match = _ARN.match(resource)
    if not match:
        return f"{resource!r} is neither * nor an ARN"
    if partition and match["partition"] != partition:
        return f"{resource!r} is not in partition {partition}"
    return None


def _condition_problems(condition: Any, where: str) -> list[str]:
    if not isinstance(condition, dict) or not condition:
        return [f"{where}: not a non-empty JSON object"]
    out = []
    for operator, block in condition.items():
        if not condition_operator_known(operator):
            out.append(f"{where}: unknown condition operator {operator!r}")
        if not isinstance(block, dict) or not block:
            out.append(f"{where}.{operator}: not a non-empty JSON object of keys")
            continue
        for key, value in block.items():
            if ":" not in key:
                out.append(f"{where}.{operator}: {key!r} is not a <service>:<key> context key")
            if not all(isinstance(v, str | bool | int | float) for v in _items(value)):
                out.append(f"{where}.{operator}.{key}: values must be scalars")
    return out
