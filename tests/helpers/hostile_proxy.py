"""A hostile Hub for tests: a rewriting reverse proxy in front of the local Hub, and a sink.

``HostileProxy(upstream_url)`` forwards every request to the local Hub and rewrites the
answer by rule, so a test can make a real Hub say what a broken or hostile one would.
``HeaderSink()`` answers anything and records each request's headers, to catch a token
sent where it must not go. Both run on loopback threads; use the ``hostile`` and
``sink`` fixtures (import ``hostile_fixture`` / ``sink_fixture`` into a test module),
which stop them at teardown.

Rules are JSON-compatible dicts in the spirit of the local Hub's faults file
(``packages/ckpt-localhub/ckpt_localhub/faults.py``): a rule matches when its optional ``method``
equals the request's and its ``path`` regex is found in the URL path; rules are tried in
order and a request consumes at most one, the first with fires left (``times``,
default 1; -1 never runs out). Actions, combinable in one rule:

- ``status`` (int) [+ ``headers``]: answer this status with a JSON error, without asking
  the Hub; with ``echo_auth`` (true) the error echoes the request's ``Authorization``
  header back, plain and as a ``b'...'`` repr, as a careless server or proxy would;
  ``window_s`` (float) keeps the rule firing for that many seconds after its
  first fire, then retires it (a rate-limit window).
- ``headers`` (object): set these headers on the answer.
- ``ref_target`` (str): every ``targetCommit`` of a refs answer.
- ``commit_oid`` (str): the ``commitOid`` of a commit answer.
- ``json_merge`` (object): deep-merge into a JSON object answer (``null`` sets null).
- ``body`` (str): the answer's body, replaced whole.
- ``rename`` ([regex, replacement]): ``re.sub`` on the ``path`` of every tree entry.
- ``link_next`` (``"endless"`` or a URL): a ``Link: <...>; rel="next"`` header; endless
  points back at the same listing with an ever-growing ``hostile_page`` parameter.
- ``redirect`` (URL): answer 302 to it.
- ``corrupt`` (true): flip the middle byte of the body.
- ``trickle_bps`` (float): send the body at this many bytes a second;
  ``trickle_headers_bps``: the status line and headers too.

``proxy.before(method, path, fn)`` runs ``fn()`` before forwarding each matching request
(a job that changes its local dir while the push runs: a link appearing mid-commit).

Example::

    proxy.set_rules([{"method": "GET", "path": "/refs$", "ref_target": "a" * 40 + "\\n::warning::x"}])
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from tests.helpers.proxying import POLL_S, ForwardingHandler, start

__all__ = ["HeaderSink", "HostileProxy", "hostile_fixture", "sink_fixture"]

_KNOWN = {"method", "path", "times", "comment", "status", "echo_auth", "headers", "window_s", "ref_target",
          "commit_oid", "json_merge", "body", "rename", "link_next", "redirect", "corrupt", "trickle_bps",
          "trickle_headers_bps"}
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "te", "upgrade"}
_PAGE = "hostile_page"


class _Rule:
    def __init__(self, raw: dict[str, Any]) -> None:
        unknown = set(raw) - _KNOWN
        if unknown or not isinstance(raw.get("path"), str):
            raise ValueError(f"bad proxy rule {raw!r} (unknown keys {sorted(unknown)}, or no 'path')")
        self.raw = raw
        self.method = raw.get("method")
        self.path = re.compile(raw["path"])
        self.left = raw.get("times", 1)
        self.window = raw.get("window_s")
        self.first: float | None = None

    def take(self, method: str, path: str) -> bool:
        if self.method is not None and self.method != method:
            return False
        if not self.path.search(path):
            return False
        if self.window is not None and self.first is not None and time.monotonic() - self.first > self.window:
            return False
        if self.left == 0:
            return False
        if self.left > 0:
            self.left -= 1
        self.first = self.first if self.first is not None else time.monotonic()
        return True


def _merge(into: Any, patch: Any) -> Any:
    if isinstance(into, dict) and isinstance(patch, dict):
        out = dict(into)
        for key, value in patch.items():
            out[key] = _merge(into.get(key), value)
        return out
    return patch


class HostileProxy:
    """A reverse proxy to ``upstream`` that rewrites answers by rule (see the module doc)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.rules: list[_Rule] = []
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.hooks: list[tuple[str, re.Pattern[str], Any]] = []
        """Every request seen: method, path (with query), headers, and the rule it took (or None)."""
        self.stopping = threading.Event()
        self.server, self.url = start(self._handler())

    def set_rules(self, rules: list[dict[str, Any]]) -> None:
        parsed = [_Rule(json.loads(json.dumps(r))) for r in rules]  # JSON-compatible, like a faults file
        with self.lock:
            self.rules = parsed

    def before(self, method: str, path: str, fn: Any) -> None:
        """Run ``fn()`` before forwarding every ``method`` request whose path matches ``path``."""
        with self.lock:
            self.hooks.append((method, re.compile(path), fn))

    def fired(self, index: int = 0) -> int:
        """How many requests took rule ``index``."""
        return sum(1 for r in self.requests if r["rule"] == index)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def _take(self, method: str, path: str) -> tuple[int | None, dict[str, Any] | None]:
        with self.lock:
            for i, rule in enumerate(self.rules):
                if rule.take(method, path):
                    return i, rule.raw
        return None, None

    def _handler(self) -> type[ForwardingHandler]:
        proxy = self

        class Handler(ForwardingHandler):
            upstream = proxy.upstream
            upstream_timeout = 60.0

            def serve(self) -> None:
                parts = urlsplit(self.path)
                index, rule = proxy._take(self.command, parts.path)
                with proxy.lock:
                    proxy.requests.append({"method": self.command, "path": self.path,
                                           "headers": dict(self.headers.items()), "rule": index})
                rule = rule or {}
                body_in = self.read_body()
                for method, pattern, fn in list(proxy.hooks):
                    if method == self.command and pattern.search(parts.path):
                        fn()
                if "status" in rule:
                    error = "hostile proxy"
                    if rule.get("echo_auth"):
                        auth = self.headers.get("Authorization", "")
                        error = f"Illegal header value {auth.encode()!r}; you sent {auth}"
                    self._answer(rule["status"], {"Content-Type": "application/json", **rule.get("headers", {})},
                                 json.dumps({"error": error}).encode(), rule)
                    return
                if "redirect" in rule:
                    self._answer(302, {"Location": rule["redirect"]}, b"", rule)
                    return
                query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != _PAGE]
                target = parts.path + ("?" + urlencode(query) if query else "")
                status, got, body = self.forward(body_in, target)
                out_headers = {k: v for k, v in got if k.lower() not in _HOP}
                if self.command == "HEAD":
                    length = dict((k.lower(), v) for k, v in got).get("content-length")
                    self._answer(status, {**out_headers, **({"Content-Length": length} if length else {})}, b"",
                                 rule, head=True)
                    return
                body, out_headers = self._rewrite(body, out_headers, rule)
                self._answer(status, out_headers, body, rule)

            def _rewrite(self, body: bytes, headers: dict[str, str], rule: dict[str, Any]) -> tuple[bytes, dict]:
                if any(k in rule for k in ("ref_target", "commit_oid", "json_merge", "rename")):
                    doc = json.loads(body)
                    if "ref_target" in rule:
                        for kind in ("branches", "tags", "converts"):
                            for ref in doc.get(kind, []):
                                ref["targetCommit"] = rule["ref_target"]
                    if "commit_oid" in rule:
                        doc["commitOid"] = rule["commit_oid"]
                    if "json_merge" in rule:
                        doc = _merge(doc, rule["json_merge"])
                    if "rename" in rule:
                        pattern, replacement = rule["rename"]
                        for entry in doc:
                            entry["path"] = re.sub(pattern, replacement, entry["path"])
                    body = json.dumps(doc).encode()
                if "body" in rule:
                    body = rule["body"].encode()
                if rule.get("corrupt") and body:
                    flipped = bytearray(body)
                    flipped[len(body) // 2] ^= 0x01
                    body = bytes(flipped)
                link = rule.get("link_next")
                if link == "endless":
                    parts = urlsplit(self.path)
                    query = dict(parse_qsl(parts.query, keep_blank_values=True))
                    query[_PAGE] = str(int(query.get(_PAGE, "0")) + 1)
                    link = f"{proxy.url}{parts.path}?{urlencode(query)}"
                if link:
                    headers["Link"] = f'<{link}>; rel="next"'
                headers.update(rule.get("headers", {}))
                return body, headers

            def _answer(self, status: int, headers: dict[str, str], body: bytes, rule: dict[str, Any],
                        head: bool = False) -> None:
                if not head:
                    headers = {**headers, "Content-Length": str(len(body))}
                head_bytes = f"HTTP/1.1 {status} {http.client.responses.get(status, 'Unknown')}\r\n".encode()
                head_bytes += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n"
                try:
                    self._send(head_bytes, rule.get("trickle_headers_bps"))
                    self._send(body, rule.get("trickle_bps"))
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _send(self, data: bytes, bps: float | None) -> None:
                if not bps:
                    self.wfile.write(data)
                    self.wfile.flush()
                    return
                for i in range(len(data)):
                    if proxy.stopping.is_set():
                        raise BrokenPipeError("proxy stopping")
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1 / bps)

        return Handler


class HeaderSink:
    """An HTTP server that answers ``200 []`` to anything and records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                sink.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers.items())})
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(b"[]")

            do_HEAD = do_POST = do_PUT = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(POLL_S,), daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="hostile")
def hostile_fixture() -> Iterator[Any]:
    """``hostile(hub)`` -> a HostileProxy in front of that local Hub (stopped at teardown)."""
    started: list[HostileProxy] = []

    def start(hub: Any) -> HostileProxy:
        proxy = HostileProxy(hub.url)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture(name="sink")
def sink_fixture() -> Iterator[HeaderSink]:
    server = HeaderSink()
    yield server
    server.stop()
