"""A reverse proxy in front of the local Hub for tests of the write path.

It forwards every request unchanged (the Host header too, so the URLs the Hub hands
back point at the proxy) and records what went through, and it can:

- run a callback before forwarding a matching request (change a local file between
  hashing and upload, as a job still writing its checkpoint would);
- forward a matching request, let the Hub apply it, then answer an error instead of
  the Hub's answer (a commit that landed behind a 500);
- answer an error without forwarding (a commit that did not land);
- rewrite a request body on its way (a Hub that stores other bytes than were sent);
- add headers to an answer (a ``Link`` to another host).

Used from a test that has a local Hub and the ``cli`` fixture::

    with CommitProxy(hub.url) as proxy:
        proxy.after("POST", r"/commit/", status=500)
        run = cli("push", ..., env=env_for(proxy, tmp_path))
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.helpers.proxying import HOP_BY_HOP, ForwardingHandler, start

COMMIT = r"/api/models/[^/]+/[^/]+/commit/"


@dataclass
class _Rule:
    method: str
    path: re.Pattern[str]
    times: int
    before: Callable[[], None] | None = None
    status: int | None = None
    forward: bool = True
    rewrite: Callable[[bytes], bytes] | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)

    def take(self, method: str, path: str) -> bool:
        if self.times == 0 or method != self.method or not self.path.search(path):
            return False
        if self.times > 0:
            self.times -= 1
        return True


@dataclass
class Seen:
    method: str
    path: str
    status: int
    """What the client was answered (the Hub's status, or the one the proxy put instead)."""
    upstream_status: int | None
    """None when the proxy answered without forwarding."""
    body: bytes = field(repr=False, default=b"")
    answer: bytes = field(repr=False, default=b"")


class CommitProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.rules: list[_Rule] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.server, self.url = start(self._handler())

    # -- rules -------------------------------------------------------------------------------
    def before(self, method: str, path: str, fn: Callable[[], None], times: int = 1) -> None:
        """Run ``fn`` before forwarding the next ``times`` matching requests (-1: all)."""
        with self.lock:
            self.rules.append(_Rule(method, re.compile(path), times, before=fn))

    def after(self, method: str, path: str, status: int = 500, times: int = 1) -> None:
        """Forward the next ``times`` matching requests, then answer ``status`` instead."""
        with self.lock:
            self.rules.append(_Rule(method, re.compile(path), times, status=status))

    def fail(self, method: str, path: str, status: int = 500, times: int = 1) -> None:
        """Answer ``status`` to the next ``times`` matching requests without forwarding them."""
        with self.lock:
            self.rules.append(_Rule(method, re.compile(path), times, status=status, forward=False))

    def rewrite(self, method: str, path: str, fn: Callable[[bytes], bytes], times: int = 1) -> None:
        """Forward the next ``times`` matching requests with their body passed through ``fn``."""
        with self.lock:
            self.rules.append(_Rule(method, re.compile(path), times, rewrite=fn))

    def add_headers(self, method: str, path: str, headers: dict[str, str], times: int = 1) -> None:
        """Add (or replace) headers in the answers to the next ``times`` matching requests."""
        with self.lock:
            self.rules.append(_Rule(method, re.compile(path), times, headers=list(headers.items())))

    # -- what went through ------------------------------------------------------------------
    def commits(self) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.method == "POST" and re.search(COMMIT, s.path)]

    def commit_headers(self) -> list[dict[str, Any]]:
        """The header line (summary, description, parentCommit) of every commit POST."""
        return [json.loads(s.body.split(b"\n", 1)[0])["value"] for s in self.commits()]

    # -- plumbing ----------------------------------------------------------------------------
    def _handler(self) -> type[ForwardingHandler]:
        proxy = self

        class Handler(ForwardingHandler):
            upstream = proxy.upstream

            def serve(self) -> None:
                body = self.read_body()
                path = self.path.split("?", 1)[0]
                with proxy.lock:
                    rules = [r for r in proxy.rules if r.take(self.command, path)]
                for rule in rules:
                    if rule.before is not None:
                        rule.before()
                    if rule.rewrite is not None:
                        body = rule.rewrite(body)
                override = next((r.status for r in rules if r.status is not None), None)
                upstream_status: int | None = None
                if all(r.forward for r in rules):
                    status, headers, data = self.forward(body)
                    upstream_status = status
                if override is not None:
                    status = override
                    data = json.dumps({"error": f"the proxy answers {override}"}).encode()
                    headers = [("Content-Type", "application/json")]
                for rule in rules:
                    names = {name.lower() for name, _value in rule.headers}
                    headers = [(n, v) for n, v in headers if n.lower() not in names] + rule.headers
                with proxy.lock:
                    proxy.seen.append(Seen(self.command, self.path, status, upstream_status, body, data))
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                length = dict((k.lower(), v) for k, v in headers).get("content-length", str(len(data)))
                self.send_header("Content-Length", length if self.command == "HEAD" else str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> CommitProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
