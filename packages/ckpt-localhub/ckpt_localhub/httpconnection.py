"""One client connection of the local Hub: h11's framing, the head timeout, the connection cap's refusals.

h11 does the framing: request lines and headers, Content-Length and chunked bodies,
``Expect: 100-continue``, keep-alive and pipelining, with its protocol checks. It is a
small, pure-Python, sans-I/O library that huggingface_hub's HTTP stack already installs,
so it costs no download and nothing at start-up. Around it a :class:`Connection` serves
requests until either side closes: a request head must arrive whole within
``HEADER_TIMEOUT_S`` of its first byte, and a file is answered with ``sendfile``.

One ordering promise: an app's ``finished`` hook (the access log) runs before the last
byte of its response leaves, so a client holding a whole response can read its line.

A connection past the listener's cap (:mod:`.httpserver` counts them) gets its request head
read here, within bounds, so the listener can see whose it is, and is answered 503 here.
"""

from __future__ import annotations

import json
import socket
import sys
import time
import traceback
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

import h11

from .httpmessages import (
    DRAIN_LIMIT,
    READ_CHUNK,
    App,
    Body,
    DropConnection,
    FileSlice,
    Headers,
    Request,
    Response,
    json_response,
)

SEND_CHUNK = 4 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT_S = 300
HEADER_TIMEOUT_S = 20.0
"""A request head must arrive whole this long after its first byte (a client sending one byte
a second would otherwise hold its connection, and a slot of the cap, for ever)."""
LINGER_S = 2.0  # how long a refused request's unread body is read and dropped before closing


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


class Connection:
    """One client connection: a loop of request, answer, until either side closes."""

    def __init__(self, sock: socket.socket, app: App, server_url: str, received: bytes = b"") -> None:
        self.sock = sock
        self.app = app
        self.server_url = server_url
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        if received:  # read already, to see whose request it is (a connection past the cap)
            self.conn.receive_data(received)

    def _event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(self.sock.recv(READ_CHUNK))
                continue
            return event

    def _head_event(self) -> Any:
        """The next request's head: waited for up to the idle timeout, then read whole within
        HEADER_TIMEOUT_S of its first byte (TimeoutError past it: the connection is dropped)."""
        deadline: float | None = None
        try:
            while True:
                event = self.conn.next_event()
                if event is not h11.NEED_DATA:
                    return event
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("request head took too long")
                    self.sock.settimeout(min(IDLE_TIMEOUT_S, left))
                data = self.sock.recv(READ_CHUNK)
                if data and deadline is None:
                    deadline = time.monotonic() + HEADER_TIMEOUT_S
                self.conn.receive_data(data)
        finally:
            self.sock.settimeout(IDLE_TIMEOUT_S)

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
            event = self._head_event()
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
            linger_close(self.sock)
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


def linger_close(sock: socket.socket) -> None:
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


def read_head(sock: socket.socket) -> bytes:
    """What a connection past the cap sends first, up to the end of its request head: at most
    MAX_HEADER_BYTES, within LINGER_S in all (a head trickling in is cut off there)."""
    head = b""
    deadline = time.monotonic() + LINGER_S
    try:
        while b"\r\n\r\n" not in head and len(head) < MAX_HEADER_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            chunk = sock.recv(MAX_HEADER_BYTES - len(head))
            if not chunk:
                break
            head += chunk
    except OSError:
        pass
    return head


def head_headers(head: bytes) -> Headers:
    """The header lines of a raw request head (enough to see its credentials)."""
    lines = head.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    return Headers([(name.strip(), value.strip()) for name, sep, value in (line.partition(b":") for line in lines)
                    if sep])


def refuse_busy(sock: socket.socket) -> None:
    """Answer a connection past the cap (its request head read already) with 503 and close it."""
    try:
        data = json.dumps({"error": "Too many open connections to the local Hub; retry later"}).encode()
        sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
    except OSError:
        pass
    linger_close(sock)
    sock.close()
