"""The local Hub's HTTP/1.1 server: a listening socket, one thread per connection, a cap on them.

At most ``max_connections`` connections are served at once; one past the cap is answered 503
with ``Retry-After``, unless its request carries the server's own credentials, which get a
reserve of a quarter of the cap more (so anonymous clients holding every slot cannot lock the
owner out). Each connection is served by :mod:`.httpconnection`; handlers see the types of
:mod:`.httpmessages`.

Example:

    >>> import urllib.request
    >>> from ckpt_localhub.httpmessages import Request, Response, SimpleApp, json_response
    >>> def app(request: Request) -> Response:
    ...     return json_response({"path": request.path})
    >>> server = Listener(("127.0.0.1", 0), SimpleApp(app))
    >>> server.start("example")
    >>> urllib.request.urlopen(server.url + "/hello").read()
    b'{"path": "/hello"}'
    >>> server.stop()
"""

from __future__ import annotations

import socket
import socketserver
import threading
from typing import Any

from .httpconnection import IDLE_TIMEOUT_S, Connection, head_headers, read_head, refuse_busy
from .httpmessages import App

MAX_CONNECTIONS = 64
"""Connections served at once (``--max-connections``); one past it is answered 503 with ``Retry-After``,
unless its request carries the server's own credentials (see ``Listener``)."""
POLL_S = 0.05
"""How often a listener's accept loop looks for a stop request: a stop waits up to this long
(``serve_forever``'s default, 0.5 s, made each stop of a test's Hub cost that much)."""


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
        Connection(self.request, self.server.app, self.server.url).serve()

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
        self._reserved = threading.BoundedSemaphore(max(1, max_connections // 4))

    def process_request(self, request: Any, client_address: Any) -> None:
        # One thread per connection, at most max_connections of them; past that a short-lived
        # thread reads the request head (within LINGER_S) and answers 503, unless the app trusts
        # its credentials (the server's token): those get up to a quarter of the cap more, so
        # anonymous clients holding every slot cannot lock the owner out. The short-lived
        # threads are capped too: past both, the connection is just closed.
        if self._busy.acquire(blocking=False):
            super().process_request(request, client_address)
        elif self._refusing.acquire(blocking=False):
            threading.Thread(target=self._overflow, args=(request,), daemon=True).start()
        else:
            self.shutdown_request(request)

    def _overflow(self, sock: socket.socket) -> None:
        try:
            head = read_head(sock)
            if self.app.trusted(head_headers(head)) and self._reserved.acquire(blocking=False):
                try:
                    self._serve_reserved(sock, head)
                finally:
                    self._reserved.release()
            else:
                refuse_busy(sock)
        finally:
            self._refusing.release()

    def _serve_reserved(self, sock: socket.socket, head: bytes) -> None:
        self.track(sock, True)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(IDLE_TIMEOUT_S)
            Connection(sock, self.app, self.url, received=head).serve()
        finally:
            self.track(sock, False)
            self.shutdown_request(sock)

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
