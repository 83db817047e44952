"""The one forwarding handler the test proxies share: read a request whole, send it to the
upstream (the local Hub) unchanged but for hop-by-hop headers, hand back what it answered.

``CommitProxy`` (tests/helpers/commit_proxy.py) and ``HostileProxy`` (tests/helpers/hostile_proxy.py) each
subclass :class:`ForwardingHandler` with their own ``serve`` (their rules), and start it
with :func:`start`.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

POLL_S = 0.05
"""How often a test server's serve_forever looks for a shutdown (the default, 0.5 s, is what each stop cost)."""

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "trailer"}


class ForwardingHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, quiet; subclasses set ``upstream`` (a URL) and define ``serve``."""

    protocol_version = "HTTP/1.1"
    upstream = "http://127.0.0.1:80"
    upstream_timeout = 120.0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def serve(self) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self.serve()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_GET

    def read_body(self) -> bytes:
        """The request body, chunked or by Content-Length."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def forward(self, body: bytes, target: str | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send this request (to ``target``, default its own) upstream with ``body``; the
        Host header goes as the client sent it, so the URLs the Hub hands back point at the
        proxy. Returns the status, headers (hop-by-hop ones left out; Content-Length kept,
        which a HEAD answer needs) and body."""
        parts = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                          timeout=self.upstream_timeout)
        try:
            conn.putrequest(self.command, target or self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    conn.putheader(name, value)
            if body or self.command in ("POST", "PUT"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            data = response.read()
            return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP], data
        finally:
            conn.close()


def start(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``handler`` on a loopback port of its own, on a daemon thread; (server, url)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # A short poll: shutdown() waits for serve_forever's next look (0.5 s by default, per stop).
    threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
