"""The Hugging Face token from Secrets Manager, fetched at start-up.

The token is returned to the caller only: it is never logged, written to a file or put in
an error message. boto3 ships in the LMI image (the Dockerfile checks); a client can be
injected for tests.
"""

from __future__ import annotations

import base64
import json
from typing import Any

TOKEN_KEYS = ("HF_TOKEN", "hf_token", "HUGGING_FACE_HUB_TOKEN", "token")


class SecretError(Exception):
    """The secret cannot be read or holds no token; the message never holds the value."""


def region_of(secret_arn: str) -> str:
    parts = secret_arn.split(":")
    if len(parts) < 7 or parts[2] != "secretsmanager":
        raise SecretError(f"{secret_arn!r} is not a Secrets Manager secret ARN")
    return parts[3]


def fetch_hf_token(secret_arn: str, client: Any = None) -> str:
    """The token in the secret: a plain string, or JSON with one of :data:`TOKEN_KEYS`."""
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
        value = (binary if isinstance(binary, bytes) else base64.b64decode(binary)).decode()
    value = (value or "").strip()
    if value.startswith("{"):
        try:
            data = json.loads(value)
        except ValueError:
            raise SecretError(f"secret {secret_arn} looks like JSON but does not parse") \
                from None
        found = next((data[k] for k in TOKEN_KEYS if isinstance(data.get(k), str)), None)
        if found is None:
            raise SecretError(f"secret {secret_arn} is JSON without a token key; use one of "
                              f"{', '.join(TOKEN_KEYS)} (keys present: "
                              f"{', '.join(sorted(data)) or 'none'})")
        value = found.strip()
    if not value:
        raise SecretError(f"secret {secret_arn} is empty")
    return value
