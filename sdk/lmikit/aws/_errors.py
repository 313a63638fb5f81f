"""The one place botocore errors become lmikit errors.

Every AWS call in the SDK goes through :func:`call` (or :func:`paginate`), so a throttled,
failed, unreachable or unauthenticated call always surfaces as :class:`lmikit.errors.AwsError`
with the operation, AWS's error code and a message a person can act on.

>>> from botocore.exceptions import ClientError
>>> exc = ClientError({"Error": {"Code": "ValidationException",
...     "Message": 'Could not find endpoint "x".'}}, "DescribeEndpoint")
>>> err = map_error(exc, "describe_endpoint")
>>> err.code, err.operation, is_not_found(err)
('ValidationException', 'DescribeEndpoint', True)
>>> str(err)
'DescribeEndpoint failed: ValidationException: Could not find endpoint "x".'
"""

from __future__ import annotations

from typing import Any

from lmikit.errors import AwsError

NOT_FOUND_CODES = frozenset({"ResourceNotFound", "ResourceNotFoundException", "NoSuchKey",
                             "NotFound", "404", "NoSuchEntity", "ResourceNotFoundFault"})
# A lost answer: the request may have reached AWS and been applied.
_LOST = ("ReadTimeoutError", "ConnectionClosedError", "ResponseStreamingError")
NO_REGION = ("no AWS region is configured: give the spec file instead of the endpoint name "
             "(its region is used), pass --region REGION (region= in Python), or set "
             "AWS_DEFAULT_REGION (or a profile's region, `aws configure`)")
_NO_CREDENTIALS = ("no AWS credentials found. Configure them (aws configure, AWS_PROFILE, or "
                   "an instance role), or try lmikit without an account: `lmikit sandbox serve`")


def pascal(snake: str) -> str:
    """``describe_endpoint`` -> ``DescribeEndpoint`` (the API's own operation name)."""
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def map_error(exc: BaseException, operation: str) -> AwsError:
    """The :class:`AwsError` for a botocore exception raised by ``operation``."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
    )

    op = pascal(operation)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")) or str(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return AwsError(f"{op} failed: {code}: {message}", operation=op, code=code,
                        status=status)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return AwsError(f"{op} failed: {_NO_CREDENTIALS}", operation=op)
    if isinstance(exc, NoRegionError):
        return AwsError(f"{op} failed: {NO_REGION}", operation=op)
    if isinstance(exc, ParamValidationError):
        return AwsError(f"{op} failed: invalid request: {exc}", operation=op,
                        code="ParamValidation")
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        return AwsError(f"{op} failed: could not reach AWS ({exc}); check the network and the "
                        "region", operation=op)
    if type(exc).__name__ in _LOST:
        return AwsError(f"{op}: no answer from AWS ({exc}); the request may have been applied",
                        operation=op, lost=True)
    return AwsError(f"{op} failed: {exc}", operation=op)


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading an answer raises when it breaks partway, besides ``ClientError``:
    botocore's errors, urllib3's, the OS's and a malformed event stream's. botocore's
    ``EventStream`` iterates the raw urllib3 response unwrapped (botocore/eventstream.py
    ``EventStream._create_raw_event_generator``), so a response stream that stalls past the
    read timeout raises urllib3's ``ReadTimeoutError`` and one whose connection drops its
    ``ProtocolError``; ``StreamingBody.read`` turns the same into botocore's
    ``ReadTimeoutError`` / ``ResponseStreamingError``."""
    from botocore.eventstream import ParserError
    from botocore.exceptions import BotoCoreError
    from urllib3.exceptions import HTTPError

    return (BotoCoreError, HTTPError, OSError, ParserError)


def is_timeout(exc: BaseException) -> bool:
    """True when ``exc`` (one of :func:`read_errors`) is a timeout, not a broken connection.

    >>> from urllib3.exceptions import ProtocolError, ReadTimeoutError
    >>> is_timeout(ReadTimeoutError(None, None, "Read timed out.")), is_timeout(
    ...     ProtocolError("Response ended prematurely"))
    (True, False)
    """
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError
    from urllib3.exceptions import TimeoutError as Urllib3Timeout

    return isinstance(exc, ReadTimeoutError | ConnectTimeoutError | Urllib3Timeout
                      | TimeoutError)


def read_failure(exc: BaseException) -> str:
    """Why an answer broke off, in words (``exc`` is one of :func:`read_errors`).

    >>> from urllib3.exceptions import ProtocolError
    >>> read_failure(ProtocolError("Response ended prematurely"))
    'the connection dropped before the answer ended'
    """
    from botocore.eventstream import ParserError

    if is_timeout(exc):
        return "no data arrived within the client's read timeout"
    if isinstance(exc, ParserError):
        return "the event stream arrived malformed"
    return "the connection dropped before the answer ended"


def call(client: Any, operation: str, **kwargs: Any) -> dict[str, Any]:
    """``client.<operation>(**kwargs)``; any botocore error becomes :class:`AwsError`."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        result: dict[str, Any] = getattr(client, operation)(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise map_error(exc, operation) from exc
    return result


def is_not_found(err: BaseException) -> bool:
    """True when the error says the resource does not exist."""
    code = getattr(err, "code", "")
    if code in NOT_FOUND_CODES:
        return True
    message = str(err)
    return code == "ValidationException" and "Could not find" in message


def is_already_existing(err: BaseException) -> bool:
    """True when a create failed because a resource of that name exists."""
    return getattr(err, "code", "") == "ValidationException" and (
        "already existing" in str(err) or "already exists" in str(err))


def describe_or_none(client: Any, operation: str, **kwargs: Any) -> dict[str, Any] | None:
    """A describe call that returns None when the resource does not exist."""
    try:
        return call(client, operation, **kwargs)
    except AwsError as exc:
        if is_not_found(exc):
            return None
        raise


def paginate(client: Any, operation: str, result_key: str, **kwargs: Any
             ) -> list[dict[str, Any]]:
    """Every item of a listing, through botocore's paginator for ``operation``."""
    from botocore.exceptions import BotoCoreError, ClientError

    items: list[dict[str, Any]] = []
    try:
        for page in client.get_paginator(operation).paginate(**kwargs):
            items.extend(page.get(result_key) or [])
    except (ClientError, BotoCoreError) as exc:
        raise map_error(exc, operation) from exc
    return items
