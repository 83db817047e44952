"""Fault injection rules for the local Hub, read from a JSON file that may change at runtime.

The file holds a JSON list of rules. A rule matches a request when its optional
``method`` equals the request method and its ``path`` regex is found (``re.search``) in
the URL path (without the query). Rules apply on every listener, the Hub, its CDN and
the Xet CAS (``^/v1/xorbs/``, ``^/v1/shards``, ``^/v1/fetch/xorb/`` ...): a CDN URL's
path is the ``/resolve/`` path it serves, so a rule written for a file reaches its bytes
whichever listener sends them. Rules are tried in file order and each request consumes
at most one rule: the first matching one that still has fires left (``times``, default
1; ``times: -1`` never runs out). Counts live in memory and restart whenever the file
changes. Actions (several may be combined in one rule):

- ``status`` (int) [+ ``retry_after`` seconds]: answer that status with a JSON error
  (``Retry-After`` carries the given number).
- ``ratelimit_reset`` (int seconds) [+ ``ratelimit_quota`` (default 500),
  ``ratelimit_window`` (default 300)]: the Hub's rate limit. The rule's first match opens
  a fixed window of that many seconds, and every matching request until it closes gets
  ``429`` (or ``status`` if given) with ``RateLimit: "api";r=0;t=<seconds left>`` and
  ``RateLimit-Policy: "fixed window";"api";q=<quota>;w=<window>``, plus ``Retry-After``
  only if ``retry_after`` is given. Requests inside an open window use no fire; ``times``
  counts windows.
- ``reset`` (int N): requests with a body: read N body bytes, then drop the connection;
  otherwise send the headers and N bytes of the response body, then drop it (a HEAD
  is dropped before any answer). The access log records status ``"reset"``.
- ``delay_s`` (float): sleep before answering (normally, or with the other actions).
  Writes (any method but GET and HEAD) sleep before the request takes effect.
- ``corrupt`` (true): flip one byte of the response body, headers unchanged.
- ``tree_escape`` (str): add a file entry with that path to tree and paths-info answers
  (of a repo, or of a Storage Bucket: ``/api/buckets/{id}/tree``, ``.../paths-info``, where
  the entry is a bucket file's, with a ``xetHash``).

Bucket routes (``/api/buckets/...`` and ``/buckets/{id}/resolve/...``, whose CDN URLs keep
that path) take every action like any other route; e.g. ``{"method": "POST", "path":
"^/api/buckets/.*/batch$", "status": 503}`` fails one batch before it lands.
- ``etag`` (str): replace the ``ETag`` and ``X-Linked-Etag`` response headers.

A rule with ``corrupt`` or ``reset`` and no ``status`` acts on response bytes, so it
never matches an answer without any: a ``corrupt`` rule skips HEAD requests, and both
skip redirects (an LFS file's ``/resolve/`` on the Hub) and fire on the request that
follows the redirect instead.

Example (``load`` raises FaultFileError for an invalid file):

    >>> _ = Path("faults.json").write_text('[{"method": "GET", "path": "/resolve/", "reset": 1000}]')
    >>> faults = FaultSet.load("faults.json")
    >>> firing = faults.take("GET", "/me/ckpts/resolve/main/model.bin")
    >>> firing.rule.reset if firing else None
    1000
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

_KNOWN_KEYS = {"method", "path", "times", "status", "retry_after", "reset", "delay_s", "corrupt",
               "tree_escape", "etag", "comment", "ratelimit_reset", "ratelimit_quota", "ratelimit_window"}
_ACTIONS = ("status", "reset", "delay_s", "corrupt", "tree_escape", "etag", "ratelimit_reset")


class FaultFileError(ValueError):
    """The faults file cannot be used; the message is one line naming the problem."""


@dataclass
class Rule:
    index: int
    method: str | None
    path: re.Pattern[str]
    times: int
    status: int | None = None
    retry_after: int | None = None
    reset: int | None = None
    delay_s: float = 0.0
    corrupt: bool = False
    tree_escape: str | None = None
    etag: str | None = None
    ratelimit_reset: int | None = None
    ratelimit_quota: int = 500
    ratelimit_window: int = 300

    @property
    def on_bytes(self) -> bool:
        """The rule acts on response bytes (so it waits for an answer that has some)."""
        return (self.corrupt or self.reset is not None) and self.status is None and self.ratelimit_reset is None

    def applies_to(self, method: str, path: str, redirect: bool = False) -> bool:
        if self.method is not None and self.method != method:
            return False
        if self.corrupt and method == "HEAD":
            return False
        if redirect and self.on_bytes:
            return False
        return self.path.search(path) is not None

    def ratelimit_headers(self, reset_in: int) -> dict[str, str]:
        return {"RateLimit": f'"api";r=0;t={reset_in}',
                "RateLimit-Policy": f'"fixed window";"api";q={self.ratelimit_quota};w={self.ratelimit_window}'}


@dataclass(frozen=True)
class Firing:
    """A rule taken by one request; ``reset_in`` is the seconds left in its rate-limit window."""

    rule: Rule
    reset_in: int | None = None


def _int(value: Any, key: str, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FaultFileError(f"{where}: '{key}' must be an integer >= {minimum}")
    return value


def parse_rules(text: str, source: str = "faults") -> list[Rule]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FaultFileError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(raw, list):
        raise FaultFileError(f"{source}: expected a JSON list of rules")
    rules = []
    for i, item in enumerate(raw):
        where = f"{source}: rule {i}"
        if not isinstance(item, dict):
            raise FaultFileError(f"{where}: expected an object")
        unknown = set(item) - _KNOWN_KEYS
        if unknown:
            raise FaultFileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if not isinstance(item.get("path"), str):
            raise FaultFileError(f"{where}: 'path' (a regex string) is required")
        try:
            pattern = re.compile(item["path"])
        except re.error as exc:
            raise FaultFileError(f"{where}: bad 'path' regex ({exc})") from None
        method = item.get("method")
        if method is not None and not isinstance(method, str):
            raise FaultFileError(f"{where}: 'method' must be a string")
        if not any(k in item for k in _ACTIONS):
            raise FaultFileError(f"{where}: needs one of {', '.join(_ACTIONS)}")
        times = item.get("times", 1)
        if isinstance(times, bool) or not isinstance(times, int) or (times < 1 and times != -1):
            raise FaultFileError(f"{where}: 'times' must be a positive integer or -1")
        rule = Rule(index=i, method=method.upper() if method else None, path=pattern, times=times)
        if "status" in item:
            rule.status = _int(item["status"], "status", where, 100)
            if rule.status > 599:
                raise FaultFileError(f"{where}: 'status' must be an HTTP status code")
        if "retry_after" in item:
            rule.retry_after = _int(item["retry_after"], "retry_after", where)
        if "reset" in item:
            rule.reset = _int(item["reset"], "reset", where)
        if "ratelimit_reset" in item:
            rule.ratelimit_reset = _int(item["ratelimit_reset"], "ratelimit_reset", where)
        for key in ("ratelimit_quota", "ratelimit_window"):
            if key in item:
                setattr(rule, key, _int(item[key], key, where))
        if "delay_s" in item:
            delay = item["delay_s"]
            if isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0:
                raise FaultFileError(f"{where}: 'delay_s' must be a number >= 0")
            rule.delay_s = float(delay)
        if "corrupt" in item:
            if not isinstance(item["corrupt"], bool):
                raise FaultFileError(f"{where}: 'corrupt' must be true or false")
            rule.corrupt = item["corrupt"]
        for key in ("tree_escape", "etag"):
            if key in item:
                if not isinstance(item[key], str):
                    raise FaultFileError(f"{where}: '{key}' must be a string")
                setattr(rule, key, item[key])
        rules.append(rule)
    return rules


class FaultSet:
    """Rules from a file, reloaded when the file's inode, mtime or size change."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._left: list[int] = []
        self._window_end: list[float] = []
        self._stamp: tuple[int, int, int] | None = None
        if self.path is not None:
            self._stamp = self._stat()
            if self._stamp is None:
                raise FaultFileError(f"faults file {self.path} does not exist")
            self._set(self._read())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FaultSet:
        return cls(path)

    def _stat(self) -> tuple[int, int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _read(self) -> list[Rule]:
        assert self.path is not None
        try:
            with open(self.path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise FaultFileError(f"cannot read faults file {self.path}: {exc.strerror}") from None
        return parse_rules(text, source=self.path)

    def _set(self, rules: list[Rule]) -> None:
        self._rules = rules
        self._left = [r.times for r in rules]
        self._window_end = [0.0 for _ in rules]

    def _refresh(self) -> None:
        stamp = self._stat()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        if stamp is None:
            # A removed file means "no faults", so tests can clear them by deleting it.
            self._set([])
            return
        try:
            self._set(self._read())
        except FaultFileError as exc:
            print(f"local-hub: warning: keeping previous fault rules: {exc}", file=sys.stderr, flush=True)

    def take(self, method: str, path: str, redirect: bool = False) -> Firing | None:
        """The rule this request triggers (consuming one of its fires), or None.

        ``redirect``: the answer is a redirect, which rules acting on bytes pass over.
        """
        if self.path is None:
            return None
        now = time.monotonic()
        with self._lock:
            self._refresh()
            for i, rule in enumerate(self._rules):
                if not rule.applies_to(method, path, redirect):
                    continue
                if self._window_end[i] > now:  # inside an open rate-limit window: no fire used
                    return Firing(rule, math.ceil(self._window_end[i] - now))
                if self._left[i] == 0:
                    continue
                if self._left[i] > 0:
                    self._left[i] -= 1
                if rule.ratelimit_reset is not None:
                    self._window_end[i] = now + rule.ratelimit_reset
                    return Firing(rule, rule.ratelimit_reset)
                return Firing(rule)
        return None
