"""Requests and answers as the local Hub's handlers see them, and what a listener serves.

A handler takes a :class:`Request` and returns a :class:`Response` (or raises
:class:`HttpError`); an :class:`App` is what a listener (:mod:`.httpserver`) serves. Memory
stays bounded: a request body is read only as far as a handler asks (1 MiB reads), and a file
is answered as a :class:`FileSlice`, which the connection sends with ``sendfile``, never
through Python buffers. Apart from the sockets (:mod:`.httpconnection`) so that the endpoints
import only these types.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import h11

READ_CHUNK = 1024 * 1024
DRAIN_LIMIT = 64 * 1024 * 1024  # a larger unread request body is not worth reading: hang up instead


class HttpError(Exception):
    """An answer other than success, raised from a handler: status, message and extra headers."""

    def __init__(self, status: int, message: str, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}


class DropConnection(Exception):
    """Hang up now, without (the rest of) an answer: a reset fault."""


@dataclass(frozen=True)
class FileSlice:
    """Part of a file, sent with sendfile."""

    path: Path
    offset: int
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass
class Response:
    """An answer. ``payload`` (a JSON value) is serialized only when sent, so layers around a
    handler can still change it; otherwise ``body`` is sent as is."""

    status: int = 200
    body: bytes | FileSlice = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    payload: Any = None

    @property
    def is_redirect(self) -> bool:
        return 300 <= self.status < 400

    def body_bytes(self) -> bytes | FileSlice:
        return json.dumps(self.payload).encode() if self.payload is not None else self.body


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None,
                  content_type: str = "application/json") -> Response:
    return Response(status, headers=dict(headers or {}), content_type=content_type, payload=value)


class Headers:
    """Request headers, looked up case-insensitively; repeated headers joined with ``, ``."""

    def __init__(self, items: list[tuple[bytes, bytes]]) -> None:
        self._values: dict[str, str] = {}
        for name, value in items:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            self._values[key] = f"{self._values[key]}, {text}" if key in self._values else text

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._values



class BodySource(Protocol):
    """What a :class:`Body` reads from: its connection (:class:`.httpconnection.Connection`)."""

    conn: h11.Connection

    def next_body_event(self) -> Any: ...


class Body:
    """A request body, de-chunked by h11 and read only as far as the handler asks."""

    def __init__(self, conn: BodySource, headers: Headers) -> None:
        self._conn = conn
        length = headers.get("Content-Length")
        self.declared = int(length) if length is not None and length.isascii() and length.isdigit() else None
        self.chunked = "chunked" in (headers.get("Transfer-Encoding") or "").lower()
        # Even an empty body ends with h11's EndOfMessage, which the connection must see
        # before it can take the next request.
        self.done = False
        self.abandoned = False
        self.count = 0
        self._buffer = memoryview(b"")

    @property
    def present(self) -> bool:
        return self.chunked or bool(self.declared)

    def _fill(self) -> None:
        while not self._buffer and not self.done:
            event = self._conn.next_body_event()
            if isinstance(event, h11.Data):
                self._buffer = memoryview(event.data)  # no copy: h11 hands over a fresh buffer
            else:
                self.done = True

    def _take(self, n: int) -> bytes:
        data = self._buffer[:n].tobytes()
        self._buffer = self._buffer[len(data):]
        self.count += len(data)
        return data

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all that is left when ``n < 0``); ``b""`` at the end."""
        if n < 0:
            parts = []
            while chunk := self.read(READ_CHUNK):
                parts.append(chunk)
            return b"".join(parts)
        self._fill()
        return self._take(n)

    def read_upto(self, n: int) -> bytes:
        """Up to ``n`` bytes in all, fewer only at the end of the body."""
        parts: list[bytes] = []
        size = 0
        while size < n and (chunk := self.read(min(READ_CHUNK, n - size))):
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)

    def abandon(self) -> None:
        """The rest of this body is not wanted (it was refused as too large): never drain it."""
        self.abandoned = True

    def readline(self, limit: int) -> bytes:
        """One line (with its ``\\n``), or what is left; HttpError 413 past ``limit`` bytes."""
        parts: list[bytes] = []
        size = 0
        while True:
            self._fill()
            if not self._buffer:
                return b"".join(parts)
            end = self._buffer[: limit + 1 - size].tobytes().find(b"\n")
            part = self._take(end + 1 if end >= 0 else limit + 1 - size)
            parts.append(part)
            size += len(part)
            if end >= 0:
                return b"".join(parts)
            if size > limit:
                raise HttpError(413, f"A line of the request body is longer than {limit} bytes")

    def drain(self) -> bool:
        """Discard what is left; False when too much is left to be worth reading, or when the
        client still waits for ``100 Continue`` (it was answered without: the body never comes)."""
        if self._conn.conn.they_are_waiting_for_100_continue or self.abandoned:
            return False
        if self.declared is not None and self.declared - self.count > DRAIN_LIMIT:
            return False
        total = 0
        while chunk := self.read(READ_CHUNK):
            total += len(chunk)
            if total > DRAIN_LIMIT:
                return False
        return True


@dataclass
class Wire:
    """What an injected fault does to the bytes of a request's answer on the wire, kept apart
    from the answer (:class:`Response`), which stays what its handler made."""

    cut_after: int | None = None
    """Send the headers and this many body bytes, then hang up."""
    flip_at: int | None = None
    """Flip the body byte at this offset (a corrupt fault)."""


@dataclass
class Request:
    method: str
    target: str
    """The request target as sent (path and query, percent-encoded)."""
    path: str
    """The target's path, still percent-encoded (routes match it, then unquote their parts)."""
    query: dict[str, list[str]]
    headers: Headers
    body: Body
    base_url: str
    """``http://host:port`` as the client addressed this server."""
    notes: dict[str, str] = field(default_factory=dict)
    """The app's bookkeeping about this request (its id; ``answer``: ``tree`` for a tree
    listing, which a fault may add an entry to)."""
    wire: Wire = field(default_factory=Wire)
    """How its answer goes on the wire (as sent, unless a fault changes it)."""

    def param(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def flag(self, name: str) -> bool:
        return self.param(name).lower() in ("1", "true", "yes")


class App(Protocol):
    """What a listener serves: answers, a hook that runs once a request is over, and whether a
    request's headers carry the credentials that may pass the connection cap."""

    def handle(self, request: Request) -> Response: ...

    def finished(self, request: Request, status: int | str, bytes_out: int, seconds: float) -> None: ...

    def trusted(self, headers: Headers) -> bool: ...


@dataclass
class SimpleApp:
    """An App from a plain function (no access log)."""

    fn: Callable[[Request], Response]

    def handle(self, request: Request) -> Response:
        return self.fn(request)

    def finished(self, request: Request, status: int | str, bytes_out: int, seconds: float) -> None:
        return None

    def trusted(self, headers: Headers) -> bool:
        return False


def parse_range(value: str, size: int) -> tuple[int, int]:
    """First and last byte of a single ``Range: bytes=...`` over ``size`` bytes; HttpError 416 otherwise.

    >>> parse_range("bytes=10-", 100), parse_range("bytes=-5", 100), parse_range("bytes=0-999", 100)
    ((10, 99), (95, 99), (0, 99))
    """
    unsatisfiable = HttpError(416, f"Range {value} not satisfiable", headers={"Content-Range": f"bytes */{size}"})
    unit, _, spec = value.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        raise unsatisfiable
    first, _, last = spec.strip().partition("-")
    try:
        if first == "":
            start, end = max(0, size - int(last)), size - 1
        else:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        raise unsatisfiable from None
    if start < 0 or start >= size or start > end:
        raise unsatisfiable
    return start, end
