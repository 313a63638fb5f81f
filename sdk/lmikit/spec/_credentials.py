"""Credentials written into URLs: find them, and mask them in anything lmikit prints.

Every string in a spec ends up somewhere published (container environment, CloudFormation,
the model artifact, the HyperPod manifest, tags), so a URL carrying a user name, a password
or a secret-looking query parameter is refused by the spec, and every message that shows a
spec value shows it masked.

>>> url_credentials("redis://:hunter2@cache:6379")
'a user name or password before the host'
>>> url_credentials("redis://cache:6379?db=0") is None
True
>>> mask_credentials("rediss://app:hunter2@cache:6380/0?password=x&db=1")
'rediss://****@cache:6380/0?password=****&db=1'
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_plus

MASK = "****"
# A URL inside any text: scheme "://" then everything up to white space.
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>[^\s'\"]*)")
# Query parameters whose value is a credential (compared lower-case, "-" read as "_"), and
# words that make any parameter name one.
SECRET_PARAMETERS = frozenset({
    "pass", "passwd", "pwd", "auth", "sig", "signature", "apikey", "api_key", "access_key",
    "secret_key", "credential", "credentials", "x_amz_credential", "x_amz_signature",
    "x_amz_security_token", "session_token", "client_secret", "access_token", "auth_token",
})
SECRET_WORDS = ("password", "secret", "token")


def _is_secret_parameter(name: str) -> bool:
    key = unquote_plus(name).strip().lower().replace("-", "_")
    return key in SECRET_PARAMETERS or any(word in key for word in SECRET_WORDS)


def _split(rest: str) -> tuple[str, str, str]:
    """(authority, path, "?query#fragment" part) of what follows ``scheme://``."""
    end = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if found != -1:
            end = min(end, found)
    authority, tail = rest[:end], rest[end:]
    query_at = tail.find("?")
    if query_at == -1:
        return authority, tail, ""
    return authority, tail[:query_at], tail[query_at:]


def url_credentials(text: str) -> str | None:
    """What kind of credential a URL in ``text`` carries, or None.

    >>> url_credentials("s3://bucket/a@b/c") is None  # "@" in the path is not a user
    True
    >>> url_credentials("redis://cache:6379/0?Password=x")
    "a 'Password' query parameter"
    """
    for match in _URL.finditer(text):
        authority, _, query = _split(match["rest"])
        if "@" in authority:
            return "a user name or password before the host"
        for pair in re.split(r"[&;]", query.lstrip("?").split("#", 1)[0]):
            name = pair.split("=", 1)[0]
            if name and _is_secret_parameter(name):
                return f"a {name!r} query parameter"
    return None


def _mask_url(match: re.Match[str]) -> str:
    authority, path, query = _split(match["rest"])
    if "@" in authority:
        authority = MASK + "@" + authority.rsplit("@", 1)[1]
    if query:
        fragment = ""
        if "#" in query:
            query, fragment = query.split("#", 1)
            fragment = "#" + fragment
        pairs = []
        for pair in re.split(r"([&;])", query[1:]):
            name, eq, _ = pair.partition("=")
            pairs.append(f"{name}={MASK}" if eq and _is_secret_parameter(name) else pair)
        query = "?" + "".join(pairs) + fragment
    return f"{match['scheme']}://{authority}{path}{query}"


def mask_credentials(value: Any) -> Any:
    """``value`` with the credentials of every URL in it replaced by ``****``; lists and
    mappings are masked item by item, anything else is returned as it is."""
    if isinstance(value, str):
        return _URL.sub(_mask_url, value) if "://" in value else value
    if isinstance(value, dict):
        return {k: mask_credentials(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mask_credentials(v) for v in value)
    return value


def credential_paths(data: Any, path: tuple[str | int, ...] = ()
                     ) -> list[tuple[tuple[str | int, ...], str]]:
    """(path, what) for every string in ``data`` (a spec as plain data) holding a URL with
    credentials, in document order."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(data, str):
        what = url_credentials(data) if "://" in data else None
        if what:
            found.append((path, what))
    elif isinstance(data, dict):
        for key, value in data.items():
            found += credential_paths(value, (*path, key if isinstance(key, int) else str(key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += credential_paths(value, (*path, i))
    return found
