"""Wire formats: SageMaker's JSON protocol, the runtime's REST-JSON, and AWS event streams.

The fake speaks these exactly, so boto3's own serializers, parsers and retries run.
"""

from __future__ import annotations

import binascii
import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from botocore.model import OperationModel


@dataclass
class WireResponse:
    """Status, headers and a body that is either bytes or an iterator of chunks (a stream)."""

    status: int
    headers: dict[str, str]
    body: bytes | Iterable[bytes] = b""
    streaming: bool = False
    lost: bool = False  # applied, but the answer must not reach the client

    def chunks(self) -> Iterator[bytes]:
        if isinstance(self.body, bytes | bytearray):
            yield bytes(self.body)
        else:
            yield from self.body


@dataclass
class WireRequest:
    method: str
    url: str
    headers: dict[str, str]  # lower-cased names
    body: bytes = field(repr=False, default=b"")

    @property
    def path(self) -> str:
        return urlsplit(self.url).path


def lower_headers(headers: Any) -> dict[str, str]:
    out = {}
    for k, v in dict(headers).items():
        key = k.decode() if isinstance(k, bytes) else str(k)
        out[key.lower()] = v.decode() if isinstance(v, bytes) else str(v)
    return out


def body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    if hasattr(body, "read"):
        pos = body.tell() if hasattr(body, "tell") else None
        data = body.read()
        if pos is not None and hasattr(body, "seek"):
            body.seek(pos)
        return data if isinstance(data, bytes) else data.encode()
    return b"".join(body)


def parse_rest_json(op: OperationModel, req: WireRequest) -> dict[str, Any]:
    """Rebuild the runtime's input parameters from URI labels, headers and the payload."""
    params: dict[str, Any] = {}
    template = op.http["requestUri"].split("?")[0].strip("/").split("/")
    parts = req.path.strip("/").split("/")
    for tpl, part in zip(template, parts, strict=False):
        if tpl.startswith("{") and tpl.endswith("}"):
            params[tpl.strip("{}+")] = unquote(part)
    shape = op.input_shape
    payload = shape.serialization.get("payload")
    for name, member in shape.members.items():
        loc = member.serialization.get("location")
        if loc == "header":
            value = req.headers.get(member.serialization["name"].lower())
            if value is not None:
                params[name] = value
    if payload:
        params[payload] = req.body
    return params


def json_error(code: str, message: str, status: int,
               extra: dict[str, Any] | None = None) -> WireResponse:
    body = json.dumps({"__type": code, "message": message, **(extra or {})}).encode()
    return WireResponse(status, {"Content-Type": "application/x-amz-json-1.1",
                                 "x-amzn-ErrorType": code,
                                 "Content-Length": str(len(body))}, body)


def json_ok(data: dict[str, Any], request_id: str) -> WireResponse:
    body = json.dumps(data).encode()
    return WireResponse(200, {"Content-Type": "application/x-amz-json-1.1",
                              "x-amzn-RequestId": request_id,
                              "Content-Length": str(len(body))}, body)


# --- event streams (application/vnd.amazon.eventstream) ------------------------------------

def _header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return struct.pack("!B", len(n)) + n + b"\x07" + struct.pack("!H", len(v)) + v


def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One binary event-stream message: prelude, CRC, headers, payload, CRC."""
    raw_headers = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + raw_headers + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def payload_part(data: bytes) -> bytes:
    return event_message({":event-type": "PayloadPart", ":message-type": "event",
                          ":content-type": "application/octet-stream"}, data)


def stream_exception(code: str, message: str, error_code: str | None = None) -> bytes:
    body: dict[str, Any] = {"Message": message}
    if error_code:
        body["ErrorCode"] = error_code
    return event_message({":exception-type": code, ":message-type": "exception",
                          ":content-type": "application/json"}, json.dumps(body).encode())


class RawStream:
    """The ``raw`` object botocore reads a response from: ``stream()`` and ``read()``."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""

    def stream(self, amt: int | None = None, decode_content: bool | None = None
               ) -> Iterator[bytes]:
        if self._buffer:
            data, self._buffer = self._buffer, b""
            yield data
        yield from self._chunks

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        if amt is None:
            data = self._buffer + b"".join(self._chunks)
            self._buffer = b""
            return data
        while len(self._buffer) < amt:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            self._buffer += nxt
        data, self._buffer = self._buffer[:amt], self._buffer[amt:]
        return data

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close:
            close()

    def release_conn(self) -> None:
        self.close()
