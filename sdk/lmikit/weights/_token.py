"""The Hub token for gated repos, read from a Secrets Manager secret.

The secret holds the token as plain text, or JSON with one of :data:`TOKEN_KEYS` (the
layouts lmikit's image reads, ``container/lmikit_runtime/secrets.py``), so one secret serves
staging and ``security.hf_token_secret_arn``. The token is returned to the caller only:
never printed, logged or put in an error (errors name the ARN, AWS's error code and the
JSON keys present).
"""

from __future__ import annotations

import json
import re
from typing import Any

from lmikit.aws import Clients, call
from lmikit.errors import AwsError
from lmikit.weights._destination import WeightsError

TOKEN_KEYS = ("HF_TOKEN", "hf_token", "HUGGING_FACE_HUB_TOKEN", "token")
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:(?P<region>[a-z0-9-]+):\d{12}:"
                        r"secret:.+$")


def token_from_secret(arn: str, session: Any = None, client: Any = None) -> str:
    """The Hub token in the secret ``arn`` (read in the secret's own region)."""
    found = SECRET_ARN.match(arn)
    if not found:
        raise WeightsError(f"--token-secret {arn!r} is not a Secrets Manager secret ARN "
                           "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)")
    if client is None:
        client = Clients(session=session, region=found["region"]).client("secretsmanager")
    try:
        answer = call(client, "get_secret_value", SecretId=arn)
    except AwsError as exc:
        raise WeightsError(f"cannot read secret {arn}: {exc.code or 'no answer'}; the caller "
                           "needs secretsmanager:GetSecretValue on it (and kms:Decrypt on "
                           "its key)") from None
    value = (answer.get("SecretString") or "").strip()
    if not value:
        raise WeightsError(f"secret {arn} holds no text (SecretString is empty)")
    if not value.startswith("{"):
        return value
    try:
        data = json.loads(value)
    except ValueError:
        raise WeightsError(f"secret {arn} looks like JSON but does not parse") from None
    token = next((data[k] for k in TOKEN_KEYS if isinstance(data, dict)
                  and isinstance(data.get(k), str) and data[k].strip()), None)
    if token is None:
        keys = ", ".join(sorted(map(str, data))) if isinstance(data, dict) else "none"
        raise WeightsError(f"secret {arn} is JSON without a token: use one of "
                           f"{', '.join(TOKEN_KEYS)} (keys present: {keys or 'none'})")
    return str(token).strip()
