"""HTTP/1.1 plumbing for the local Hub: sockets to requests and responses, streaming both ways.

h11 does the framing: request lines and headers, Content-Length and chunked bodies,
``Expect: 100-continue``, keep-alive and pipelining, with its protocol checks. It is a
small, pure-Python, sans-I/O library that huggingface_hub's HTTP stack already installs,
so it costs no download and nothing at start-up. Around it this module keeps memory
bounded: a request body is read only as far as a handler asks (1 MiB reads), and a
file is answered with ``sendfile``, never through Python buffers.

One ordering promise: an app's ``finished`` hook (the access log) runs before the last
byte of its response leaves, so a client holding a whole response can read its line.

Example:

    >>> import urllib.request
    >>> def app(request: Request) -> Response:
    ...     return json_response({"path": request.path})
    >>> server = Listener(("127.0.0.1", 0), SimpleApp(app))
    >>> server.start("example")
    >>> urllib.request.urlopen(server.url + "/hello").read()
    b'{"path": "/hello"}'
    >>> server.stop()
"""

from __future__ import annotations

import json
import socket
import socketserver
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import parse_qs, urlsplit

import h11

READ_CHUNK = 1024 * 1024
SEND_CHUNK = 4 * 1024 * 1024
DRAIN_LIMIT = 64 * 1024 * 1024  # a larger unread request body is not worth reading: hang up instead
MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT_S = 300
LINGER_S = 2.0  # how long a refused request's unread body is read and dropped before closing
MAX_CONNECTIONS = 64
"""Connections served at once (``--max-connections``); one past it is answered 503 with ``Retry-After``."""
POLL_S = 0.05
"""How often a listener's accept loop looks for a stop request: a stop waits up to this long
(``serve_forever``'s default, 0.5 s, made each stop of a test's Hub cost that much)."""


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


class Body:
    """A request body, de-chunked by h11 and read only as far as the handler asks."""

    def __init__(self, conn: _Connection, headers: Headers) -> None:
        self._conn = conn
        length = headers.get("Content-Length")
        self.declared = int(length) if length is not None and length.isdigit() else None
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
    """What a listener serves: answers, and a hook that runs once a request is over."""

    def handle(self, request: Request) -> Response: ...

    def finished(self, request: Request, status: int | str, bytes_out: int, seconds: float) -> None: ...


@dataclass
class SimpleApp:
    """An App from a plain function (no access log)."""

    fn: Callable[[Request], Response]

    def handle(self, request: Request) -> Response:
        return self.fn(request)

    def finished(self, request: Request, status: int | str, bytes_out: int, seconds: float) -> None:
        return None


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


class _Out:
    """Writes a response to the socket, holding back its last byte until ``finish``.

    The held byte is what keeps the ordering promise: ``finish`` runs the app's hook,
    then lets the byte go.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sent = 0
        self._held = b""

        self.header_bytes = 0

    @property
    def body_sent(self) -> int:
        """Bytes of the response body written (the held one included), as the access log counts them."""
        return max(0, self.sent + len(self._held) - self.header_bytes)

    def write(self, data: bytes) -> None:
        data = self._held + data
        if not data:
            return
        self.sock.sendall(data[:-1])
        self.sent += len(data) - 1
        self._held = data[-1:]

    def sendfile(self, fh: BinaryIO, offset: int, count: int) -> None:
        if count <= 0:
            return
        self.write(b"")
        if self._held:
            self.sock.sendall(self._held)
            self.sent += 1
            self._held = b""
        if count > 1:
            sent = self.sock.sendfile(fh, offset, count - 1)
            self.sent += sent
            if sent != count - 1:
                raise ConnectionError("short sendfile")
        fh.seek(offset + count - 1)
        last = fh.read(1)
        if len(last) != 1:
            raise ConnectionError("file shrank while sending")
        self._held = last

    def cut(self) -> None:
        """Send what is held (a reset fault stops right after it)."""
        if self._held:
            self.sock.sendall(self._held)
            self.sent += 1
            self._held = b""

    def finish(self, before_last_byte: Callable[[], None]) -> None:
        before_last_byte()
        self.cut()


class _Connection:
    """One client connection: a loop of request, answer, until either side closes."""

    def __init__(self, sock: socket.socket, app: App, server_url: str) -> None:
        self.sock = sock
        self.app = app
        self.server_url = server_url
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)

    def _event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(self.sock.recv(READ_CHUNK))
                continue
            return event

    def next_body_event(self) -> Any:
        if self.conn.they_are_waiting_for_100_continue:
            self.sock.sendall(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        event = self._event()
        if isinstance(event, (h11.Data, h11.EndOfMessage)):
            return event
        raise ConnectionError("client closed the connection mid-body")

    def serve(self) -> None:
        try:
            while self._one_request():
                self.conn.start_next_cycle()
        except (OSError, h11.ProtocolError):
            pass  # the client went away, or spoke something that is not HTTP/1.1

    def _request(self, event: h11.Request) -> Request:
        target = event.target.decode("latin-1")
        url = urlsplit(target)
        headers = Headers(list(event.headers))
        host = headers.get("Host")
        return Request(event.method.decode("ascii"), target, url.path, parse_qs(url.query, keep_blank_values=True),
                       headers, Body(self, headers), f"http://{host}" if host else self.server_url)

    def _one_request(self) -> bool:
        """Serve one request; False when the connection is done."""
        try:
            event = self._event()
        except h11.RemoteProtocolError:
            self._refuse_malformed()
            return False
        if not isinstance(event, h11.Request):
            return False
        request = self._request(event)
        started = time.monotonic()
        out = _Out(self.sock)
        logged = False

        def log(status: int | str) -> None:
            nonlocal logged
            if not logged:
                logged = True
                self.app.finished(request, status, out.body_sent, time.monotonic() - started)

        status: int | str = 0
        try:
            response = self.app.handle(request)
            status = response.status
            keep = request.body.drain()
            self._send(request, response, out, keep, lambda: log(response.status))
        except DropConnection:
            log("reset")
            self._hang_up()
            return False
        except (OSError, h11.ProtocolError):
            log(status or "disconnected")
            return False
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill the server
            traceback.print_exc(file=sys.stderr)
            log(500)
            if self.conn.our_state is h11.SEND_RESPONSE:
                try:
                    self._send(request, json_response({"error": f"Internal error: {exc}"}, 500), out, False,
                               lambda: None)
                except Exception:  # noqa: BLE001, S110 - the client is gone; nothing left to tell it
                    pass
            return False
        log(status)
        return self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE

    def _send(self, request: Request, response: Response, out: _Out, keep: bool,
              before_last_byte: Callable[[], None]) -> None:
        body = response.body_bytes()
        length = len(body)
        headers = {"Content-Type": response.content_type, **response.headers, "Content-Length": str(length)}
        if not keep:
            headers["Connection"] = "close"
        head_only = request.method == "HEAD"
        if head_only and request.wire.cut_after is not None:
            raise DropConnection
        try:
            reason = HTTPStatus(response.status).phrase.encode()
        except ValueError:
            reason = b""
        head = self.conn.send(h11.Response(status_code=response.status, reason=reason,
                                           headers=list(headers.items()))) or b""
        out.header_bytes = len(head)
        out.write(head)
        cut, flip = request.wire.cut_after, request.wire.flip_at
        if head_only or not length:
            pass
        elif isinstance(body, bytes):
            if flip is not None and flip < length:
                body = body[:flip] + bytes([body[flip] ^ 0xFF]) + body[flip + 1:]
            if cut is not None and cut < length:
                out.write(body[:cut])
                out.cut()
                raise DropConnection
            out.write(self.conn.send(h11.Data(data=body)) or b"")
        else:
            # h11 counts the bytes; the bytes themselves go around it.
            self.conn.send_with_data_passthrough(h11.Data(data=body))  # type: ignore[arg-type]
            self._send_file(body, out, flip, cut)
        out.write(self.conn.send(h11.EndOfMessage()) or b"")
        out.finish(before_last_byte)
        if not keep:
            _linger_close(self.sock)
        elif self.conn.our_state is h11.MUST_CLOSE:
            self._hang_up()

    @staticmethod
    def _send_file(body: FileSlice, out: _Out, flip: int | None, cut: int | None) -> None:
        total = body.length if cut is None else min(cut, body.length)
        with open(body.path, "rb") as fh:
            if flip is None:
                out.sendfile(fh, body.offset, total)
            else:
                fh.seek(body.offset)
                pos = 0
                while pos < total:
                    chunk = fh.read(min(SEND_CHUNK, total - pos))
                    if not chunk:
                        raise ConnectionError("file shrank while sending")
                    if pos <= flip < pos + len(chunk):
                        i = flip - pos
                        chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                    out.write(chunk)
                    pos += len(chunk)
        if cut is not None and cut < body.length:
            out.cut()
            raise DropConnection

    def _refuse_malformed(self) -> None:
        try:
            if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                data = b'{"error": "Malformed HTTP request"}'
                self.sock.sendall(self.conn.send(h11.Response(status_code=400, headers=[
                    ("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                    ("Connection", "close")])) or b"")
                self.sock.sendall(self.conn.send(h11.Data(data=data)) or b"")
        except (OSError, h11.ProtocolError):
            pass
        self._hang_up()

    def _hang_up(self) -> None:
        # A FIN, not an RST: the client sees a truncated message ("peer closed connection"),
        # which is what a flaky network looks like to it.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _linger_close(sock: socket.socket) -> None:
    """Hang up after an answer sent before the request body was read (a 413, a 503): send FIN,
    then read and drop what the client still sends, bounded in bytes and time. Closing with
    unread bytes would send an RST, which can wipe the answer from the client's buffers."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + LINGER_S
        dropped = 0
        while dropped < DRAIN_LIMIT and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            chunk = sock.recv(READ_CHUNK)
            if not chunk:
                break
            dropped += len(chunk)
    except OSError:
        pass


def _refuse_busy(sock: socket.socket) -> None:
    """Answer a connection past the cap with 503 (after reading its request head, bounded) and close it."""
    try:
        sock.settimeout(LINGER_S)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < MAX_HEADER_BYTES:
            chunk = sock.recv(MAX_HEADER_BYTES)
            if not chunk:
                break
            head += chunk
        data = json.dumps({"error": "Too many open connections to the local Hub; retry later"}).encode()
        sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
    except OSError:
        pass
    _linger_close(sock)
    sock.close()


class _Handler(socketserver.BaseRequestHandler):
    server: Listener

    def setup(self) -> None:
        sock: socket.socket = self.request
        # Headers and body go out in separate writes; with Nagle on, each small answer waits
        # for the client's delayed ACK (~40 ms per request on loopback).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(IDLE_TIMEOUT_S)
        self.server.track(sock, True)

    def handle(self) -> None:
        _Connection(self.request, self.server.app, self.server.url).serve()

    def finish(self) -> None:
        self.server.track(self.request, False)


class Listener(socketserver.ThreadingTCPServer):
    """A listening socket serving ``app``, one thread per connection, at most ``max_connections``."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    block_on_close = False

    def __init__(self, address: tuple[str, int], app: App, max_connections: int = MAX_CONNECTIONS) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.app = app
        host, port = self.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else host
        self.url = f"http://[{host_text}]:{port}" if ":" in host_text else f"http://{host_text}:{port}"
        self.port: int = port
        self._thread: threading.Thread | None = None
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self.max_connections = max_connections
        self._busy = threading.BoundedSemaphore(max_connections)
        self._refusing = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        # One thread per connection, at most max_connections of them; past that a short-lived
        # thread answers 503 (themselves capped: past both, the connection is just closed).
        if self._busy.acquire(blocking=False):
            super().process_request(request, client_address)
        elif self._refusing.acquire(blocking=False):
            threading.Thread(target=self._refuse, args=(request,), daemon=True).start()
        else:
            self.shutdown_request(request)

    def _refuse(self, sock: socket.socket) -> None:
        try:
            _refuse_busy(sock)
        finally:
            self._refusing.release()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._busy.release()

    def track(self, sock: socket.socket, is_open: bool) -> None:
        with self._open_lock:
            if is_open:
                self._open.add(sock)
            else:
                self._open.discard(sock)

    def start(self, name: str) -> None:
        self._thread = threading.Thread(target=self.serve_forever, args=(POLL_S,), name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting and hang up the connections still open, idle keep-alives included,
        so that none outlives the server."""
        if self._thread is not None and self._thread.is_alive():
            self.shutdown()
            self._thread.join()
        self.server_close()
        with self._open_lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
