"""Keep the secrets the start step exported out of the LMI server's log lines.

LMCache 0.5.6 logs its remote URL at INFO on every start (``RedisConnectorAdapter``
"Creating Redis connector for URL", ``RemoteBackend`` "Connected to remote storage at" and
"Connection initialized/re-established at"), and at WARNING whenever Redis is unhealthy
(``RemoteBackendHealthCheck.name()`` holds the URL). With credentials that URL holds the
password, so the image installs this module into the interpreter's site-packages as
``lmikit_log_redact`` with a ``.pth`` line that imports it: every Python process of the
image (djl-serving's workers, vLLM's engine and worker processes) runs it at start.

It does nothing unless ``LMIKIT_REDACT_ENV`` names variables (comma-separated; the start
step sets it). Then a log-record factory replaces each secret (the variable's value; for a
URL with user info, that user info and its password, raw and percent-decoded, so the host
stays readable) with ``****`` in every message and traceback logged through
:mod:`logging`, and uncaught exceptions are printed redacted.
Standard library only: it runs in every process before anything else is imported.

>>> secrets = secrets_in({"LMIKIT_REDACT_ENV": "U", "U": "redis://app:hunter2@cache:6379"})
>>> secrets
['app:hunter2', 'hunter2']
>>> redact("at redis://app:hunter2@cache:6379", secrets)
'at redis://****@cache:6379'
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

ENV = "LMIKIT_REDACT_ENV"
MASK = "****"
MIN_SECRET_CHARS = 4  # shorter fragments (a bare user name like "app") are not masked alone


def secrets_in(environ: Mapping[str, str]) -> list[str]:
    """The strings to mask, longest first (a URL before its password)."""
    found: set[str] = set()
    for name in environ.get(ENV, "").split(","):
        value = environ.get(name.strip(), "") if name.strip() else ""
        if not value:
            continue
        _, sep, rest = value.partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0] if sep else ""
        if "@" not in authority:
            found.add(value)
            continue
        # A URL keeps its scheme, host and path readable: only its user info is masked.
        userinfo = authority.rsplit("@", 1)[0]
        password = userinfo.partition(":")[2]
        found.update({userinfo, unquote(userinfo), password, unquote(password)})
    return sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=lambda s: -len(s))


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def install(environ: Mapping[str, str] | None = None) -> bool:
    """Install the redacting log-record factory and exception hook; False when there is
    nothing to redact."""
    secrets = secrets_in(os.environ if environ is None else environ)
    if not secrets:
        return False
    import logging
    import traceback

    previous = logging.getLogRecordFactory()
    if getattr(previous, "lmikit_redact", False):
        return True

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it later, as it would
            return record
        clean = redact(message, secrets)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(text, secrets)
        return record

    factory.lmikit_redact = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(redact(text, secrets))

    sys.excepthook = excepthook
    return True


try:
    install()
except Exception:  # never break an interpreter's start over log hygiene
    pass
