"""The boto3 edge of the scaling and observability steps: clients with botocore's adaptive
retries, botocore errors mapped to :class:`lmikit.errors.DeployError`, and tag reading.

Kept apart from :mod:`lmikit.deploy` so that a deployer can import the steps without an
import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lmikit.errors import DeployError
from lmikit.names import DEPLOYMENT_TAG

RETRIES = {"mode": "adaptive", "max_attempts": 8}


def client(service: str, region: str, session: Any = None) -> Any:
    """A boto3 client of ``session`` (one for ``region`` if None) with adaptive retries."""
    from botocore.config import Config

    if session is None:
        import boto3

        session = boto3.Session(region_name=region)
    return session.client(service, region_name=region,
                          config=Config(retries=dict(RETRIES), user_agent_extra="lmikit"))


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def call(client_: Any, operation: str, what: str = "", **kwargs: Any) -> dict[str, Any]:
    """``client_.<operation>(**kwargs)``; botocore errors become DeployError naming ``what``."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        result: dict[str, Any] = getattr(client_, operation)(**kwargs)
        return result
    except ClientError as exc:
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        name = "".join(p.title() for p in operation.split("_"))
        raise DeployError(f"{name}{' ' + what if what else ''} failed: {error_code(exc)}: "
                          f"{message}") from exc
    except BotoCoreError as exc:
        name = "".join(p.title() for p in operation.split("_"))
        raise DeployError(f"{name}{' ' + what if what else ''} failed: {exc}") from exc


def account_id(region: str, session: Any = None) -> str:
    return str(call(client("sts", region, session), "get_caller_identity")["Account"])


def tag_map(tags: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or ()}


def owner(tags: Iterable[Mapping[str, str]] | None) -> str | None:
    """The deployment a resource's tags say it belongs to (None: no lmikit tag)."""
    return tag_map(tags).get(DEPLOYMENT_TAG)
