"""Secrets from Secrets Manager, fetched at start-up: the Hugging Face token and the
credentials of the remote KV tier (Redis).

A secret is returned to the caller only: it is never logged, written to a file or put in
an error message (errors name the ARN, the AWS error code and the JSON keys present, never a
value). boto3 ships in the LMI image (the Dockerfile checks); a client can be injected for
tests.

>>> class Fake:
...     def get_secret_value(self, SecretId):
...         return {"SecretString": '{"username": "app", "password": "p@ss"}'}
>>> arn = "arn:aws:secretsmanager:us-east-1:111122223333:secret:kv-AbCdEf"
>>> creds = fetch_remote_credentials(arn, client=Fake())
>>> url_with_credentials("rediss://cache:6380/0", creds)
'rediss://app:p%40ss@cache:6380/0'
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

TOKEN_KEYS = ("HF_TOKEN", "hf_token", "HUGGING_FACE_HUB_TOKEN", "token")
# Secrets Manager's own JSON layout for database credentials ("username", "password").
USERNAME_KEYS = ("username", "user")
PASSWORD_KEYS = ("password",)
# LMCache 0.5.6 passes a redis:// or rediss:// remote_url to redis.ConnectionPool.from_url
# (lmcache/v1/storage_backend/connector/redis_adapter.py RedisConnectorAdapter), which reads
# the user name and password from the URL's user info, percent-decoded (redis-py parse_url).
CREDENTIAL_SCHEMES = ("redis", "rediss")


class SecretError(Exception):
    """The secret cannot be read or is not usable; the message never holds the value."""


@dataclass(frozen=True)
class RemoteCredentials:
    """A user name (may be empty: Redis's default user) and a password. Never printed."""

    username: str = field(repr=False)
    password: str = field(repr=False)


def region_of(secret_arn: str) -> str:
    parts = secret_arn.split(":")
    if len(parts) < 7 or parts[2] != "secretsmanager":
        raise SecretError(f"{secret_arn!r} is not a Secrets Manager secret ARN")
    return parts[3]


def read_secret(secret_arn: str, client: Any = None) -> str:
    """The secret's text (SecretString, or SecretBinary decoded as UTF-8), stripped."""
    if client is None:
        try:
            import boto3
        except ImportError as exc:
            raise SecretError("boto3 is not importable in this image; cannot read "
                              f"{secret_arn}") from exc
        client = boto3.client("secretsmanager", region_name=region_of(secret_arn))
    try:
        response = client.get_secret_value(SecretId=secret_arn)
    except Exception as exc:  # botocore errors; keep only the code, never the payload
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
        raise SecretError(f"cannot read secret {secret_arn}: {code}; the execution role needs "
                          "secretsmanager:GetSecretValue on it (and kms:Decrypt on its key)") \
            from None
    value = response.get("SecretString")
    if value is None and response.get("SecretBinary") is not None:
        binary = response["SecretBinary"]
        try:
            value = (binary if isinstance(binary, bytes) else base64.b64decode(binary)).decode()
        except ValueError:
            raise SecretError(f"secret {secret_arn} is binary and not UTF-8 text") from None
    value = (value or "").strip()
    if not value:
        raise SecretError(f"secret {secret_arn} is empty")
    return value


def _json_object(secret_arn: str, value: str) -> dict[str, Any] | None:
    if not value.startswith("{"):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        raise SecretError(f"secret {secret_arn} looks like JSON but does not parse") from None
    if not isinstance(data, dict):
        raise SecretError(f"secret {secret_arn} is JSON but not an object")
    return data


def _keys(data: dict[str, Any]) -> str:
    return ", ".join(sorted(map(str, data))) or "none"


def fetch_hf_token(secret_arn: str, client: Any = None) -> str:
    """The token in the secret: a plain string, or JSON with one of :data:`TOKEN_KEYS`."""
    value = read_secret(secret_arn, client)
    data = _json_object(secret_arn, value)
    if data is None:
        return value
    found = next((data[k] for k in TOKEN_KEYS if isinstance(data.get(k), str)), None)
    if found is None or not found.strip():
        raise SecretError(f"secret {secret_arn} is JSON without a token key; use one of "
                          f"{', '.join(TOKEN_KEYS)} (keys present: {_keys(data)})")
    return str(found).strip()


def fetch_remote_credentials(secret_arn: str, client: Any = None) -> RemoteCredentials:
    """The remote tier's credentials: JSON ``{"username": ..., "password": ...}`` (the user
    name is optional), or the password alone as plain text (Redis's default user)."""
    value = read_secret(secret_arn, client)
    data = _json_object(secret_arn, value)
    if data is None:
        return RemoteCredentials("", value)
    password = next((data[k] for k in PASSWORD_KEYS if k in data), None)
    username = next((data[k] for k in USERNAME_KEYS if k in data), "")
    if not isinstance(password, str) or not password:
        raise SecretError(f"secret {secret_arn} is JSON without a non-empty string "
                          f"'password' (keys present: {_keys(data)})")
    if not isinstance(username, str):
        raise SecretError(f"secret {secret_arn}: 'username' must be a string")
    return RemoteCredentials(username, password)


def url_with_credentials(remote_url: str, credentials: RemoteCredentials) -> str:
    """``remote_url`` with the credentials as percent-encoded user info, the form LMCache's
    Redis connector reads. The URL itself must carry none (the spec refuses them)."""
    scheme, sep, rest = remote_url.partition("://")
    if not sep or scheme not in CREDENTIAL_SCHEMES:
        raise SecretError(f"remote credentials apply to {' and '.join(CREDENTIAL_SCHEMES)} "
                          f"URLs only; the remote tier is {scheme or 'not a URL'}")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if "@" in authority:
        raise SecretError("the remote URL already names a user; take credentials from the "
                          "secret only")
    user = quote(credentials.username, safe="")
    return f"{scheme}://{user}:{quote(credentials.password, safe='')}@{rest}"
