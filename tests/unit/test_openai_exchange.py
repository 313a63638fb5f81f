"""SageMaker runtime errors -> the status codes the openai package picks its exceptions by."""

from __future__ import annotations

import json

import pytest

from lmikit.client._openai import base_url, error_reply, http_module, status_for_error

# (SageMaker error code, HTTP status SageMaker answered, OriginalStatusCode) -> status.
# Codes and statuses: botocore's sagemaker-runtime model (InvokeEndpoint's errors) and the
# common AWS auth/throttling codes; the openai package maps 400/401/403/404/429/>=500.
TABLE = [
    ("ValidationError", 400, None, 400),
    ("ModelError", 424, 400, 400),
    ("ModelError", 424, 404, 404),
    ("ModelError", 424, 424, 424),      # LMI: Input parsing failed / Custom formatter failed
    ("ModelError", 424, 500, 500),      # LMI: vLLM's ErrorResponse through the formatter
    ("ModelError", 424, None, 424),
    ("ModelError", 424, 200, 424),      # a non-error original status is not passed on
    ("ModelNotReadyException", 429, None, 429),
    ("ThrottlingException", 400, None, 429),
    ("AccessDeniedException", 400, None, 403),
    ("UnrecognizedClientException", 400, None, 401),
    ("InvalidSignatureException", 403, None, 401),
    ("ExpiredTokenException", 400, None, 401),
    ("InternalFailure", 500, None, 500),
    ("ServiceUnavailable", 503, None, 503),
    ("InternalDependencyException", 530, None, 530),
    ("SomethingNew", 200, None, 500),
]


@pytest.mark.parametrize(("code", "http", "original", "status"), TABLE)
def test_status_for_error_follows_the_table(code: str, http: int, original: int | None,
                                            status: int) -> None:
    assert status_for_error(code, http, original) == status


def test_error_reply_is_openai_shaped_and_not_retried() -> None:
    reply = error_reply(404, "no such model", "invalid_request_error", "model_not_found",
                        "model", request_id="r-1")
    assert reply.status == 404
    assert reply.headers == {"content-type": "application/json", "x-should-retry": "false",
                             "x-request-id": "r-1"}
    assert isinstance(reply.body, bytes)
    assert json.loads(reply.body) == {"error": {
        "message": "no such model", "type": "invalid_request_error", "param": "model",
        "code": "model_not_found"}}


def test_base_url_cannot_leave_the_machine() -> None:
    assert base_url("docqa") == "https://sagemaker.lmikit.invalid/endpoints/docqa/v1"


def test_http_module_is_the_one_the_openai_client_is_built_on() -> None:
    openai = pytest.importorskip("openai")
    http = http_module(openai)
    assert issubclass(openai.DefaultHttpxClient, http.Client)
