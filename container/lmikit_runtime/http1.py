"""HTTP/1.1 message framing for the metrics front: where each message ends, bytes unchanged.

The front routes every request on a kept-alive connection by its own request line, so it must
know where each request and each response ends (RFC 9112 section 6.3). Only the head is
parsed; bodies are relayed as they arrive, never re-encoded:

- a request body is ``Content-Length`` bytes or a chunked body (``Transfer-Encoding`` ending
  in ``chunked``), else empty; both headers, a non-chunked coding, or folded lines are refused;
- a response body is empty for ``HEAD``, 1xx, 204 and 304, else chunked, ``Content-Length``,
  or everything until the server closes.

Standard library only: the image runs it with LMI's interpreter (docs/container.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

CHUNK = 64 * 1024
CRLF = b"\r\n"
HEX_DIGITS = b"0123456789abcdefABCDEF"
NO_BODY = ("none", 0)
UNTIL_CLOSE = ("close", 0)


class FramingError(Exception):
    """A message whose end cannot be told: 400 for a request, 502 for a response."""


@dataclass(frozen=True)
class Head:
    """A request or status line and its header fields (names lower-cased)."""

    raw: bytes  # as received, through the blank line
    start: tuple[bytes, bytes, bytes]  # (method, target, version) or (version, status, reason)
    fields: tuple[tuple[bytes, bytes], ...]

    def values(self, name: bytes) -> list[bytes]:
        return [v for k, v in self.fields if k == name]

    def tokens(self, name: bytes) -> list[bytes]:
        """Comma-separated list values of every ``name`` field, lower-cased."""
        return [t.strip().lower() for v in self.values(name) for t in v.split(b",")
                if t.strip()]

    @property
    def version(self) -> bytes:
        return self.start[2] if self.is_request else self.start[0]

    @property
    def is_request(self) -> bool:
        return not self.start[0].startswith(b"HTTP/")

    @property
    def keep_alive(self) -> bool:
        """Whether the sender keeps the connection after this message (RFC 9112 9.3)."""
        connection = self.tokens(b"connection")
        if self.version == b"HTTP/1.1":
            return b"close" not in connection
        return b"keep-alive" in connection


def parse_head(raw: bytes) -> Head:
    """Split a head (ending in an empty line) into its start line and fields."""
    lines = raw.lstrip(CRLF).split(CRLF)
    parts = lines[0].split(b" ", 2)
    if len(parts) != 3:
        raise FramingError(f"malformed start line {lines[0][:80]!r}")
    request = not parts[0].startswith(b"HTTP/")
    version = parts[2] if request else parts[0]
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise FramingError(f"HTTP/1.0 and HTTP/1.1 only, not {version[:20]!r}")
    if not request and not (len(parts[1]) == 3 and parts[1].isdigit()):
        raise FramingError(f"malformed status {parts[1][:20]!r}")
    fields = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
            raise FramingError(f"malformed header line {line[:80]!r}")
        fields.append((name.lower(), value.strip()))
    return Head(raw, (parts[0], parts[1], parts[2]), tuple(fields))


def _content_length(head: Head) -> int | None:
    values = {v.strip() for v in head.tokens(b"content-length")}
    if not values:
        return None
    if len(values) > 1 or not next(iter(values)).isdigit():
        raise FramingError(f"bad Content-Length {sorted(values)!r}")
    return int(next(iter(values)))


def request_body(head: Head) -> tuple[str, int]:
    """("none"|"length"|"chunked", length) of a request's body."""
    codings = head.tokens(b"transfer-encoding")
    if codings:
        if head.values(b"content-length"):
            raise FramingError("both Transfer-Encoding and Content-Length")
        if codings[-1] != b"chunked":
            raise FramingError(f"Transfer-Encoding {b', '.join(codings)!r} does not end in "
                               "chunked")
        return "chunked", 0
    length = _content_length(head)
    return ("length", length) if length else NO_BODY


def response_body(head: Head, method: bytes) -> tuple[str, int]:
    """("none"|"length"|"chunked"|"close", length) of a response to ``method``."""
    status = int(head.start[1])
    if method == b"HEAD" or status < 200 or status in (204, 304):
        return NO_BODY
    codings = head.tokens(b"transfer-encoding")
    if codings:
        return ("chunked", 0) if codings[-1] == b"chunked" else UNTIL_CLOSE
    length = _content_length(head)
    if length is None:
        return UNTIL_CLOSE
    return ("length", length) if length else NO_BODY


async def relay_body(src: asyncio.StreamReader, dst: asyncio.StreamWriter | None,
                     framing: tuple[str, int]) -> None:
    """Copy one body from ``src`` to ``dst`` (None: read and drop it) as it arrives, each
    chunk of a chunked body flushed on its own; never reads past the body's end."""
    kind, length = framing
    if kind == "length":
        await _copy(src, dst, length)
    elif kind == "close":
        while data := await src.read(CHUNK):
            await _write(dst, data)
    elif kind == "chunked":
        await _relay_chunked(src, dst)


async def _relay_chunked(src: asyncio.StreamReader, dst: asyncio.StreamWriter | None) -> None:
    while True:
        line = await _line(src)
        size_text = line.split(b";", 1)[0].strip()
        if not size_text or size_text.strip(HEX_DIGITS):
            raise FramingError(f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        if size == 0:  # the last chunk, then trailer fields up to an empty line
            await _write(dst, line)
            while (trailer := await _line(src)) != CRLF:
                await _write(dst, trailer)
            await _write(dst, CRLF)
            return
        if size <= CHUNK:  # a streamed token: one read, one write, one flush
            data = await src.readexactly(size + 2)
        else:
            await _write(dst, line)
            await _copy(src, dst, size)
            line, data = b"", await src.readexactly(2)
        if data[-2:] != CRLF:
            raise FramingError("chunk data not followed by CRLF")
        await _write(dst, line + data)


async def _line(src: asyncio.StreamReader) -> bytes:
    try:
        return await src.readuntil(CRLF)
    except asyncio.LimitOverrunError as exc:
        raise FramingError("chunk line too long") from exc


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter | None,
                count: int) -> None:
    while count:
        data = await src.read(min(CHUNK, count))
        if not data:
            raise asyncio.IncompleteReadError(b"", count)
        count -= len(data)
        await _write(dst, data)


async def _write(dst: asyncio.StreamWriter | None, data: bytes) -> None:
    if dst is not None:
        dst.write(data)
        await dst.drain()
