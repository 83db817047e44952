"""Faults as a layer around the routes: one request, the rule it triggers, what changes.

Writes (any method but GET and HEAD) meet their rule before the route runs, so a slow
or failed commit has not landed yet when the fault acts, and a ``reset`` can cut the
request body. Reads run their route first, so a rule knows whether the answer is a
redirect (which rules acting on bytes pass over) before it fires. The rules themselves
and the file format are in :mod:`.faults`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from .faults import FaultSet, Firing
from .httpmessages import DropConnection, Request, Response, json_response

READS = ("GET", "HEAD")


def around(faults: FaultSet, req: Request, route: Callable[[], Response]) -> Response:
    """The route's answer, as the fault rule this request triggers (if any) shapes it."""
    if req.method in READS:
        response = route()
        firing = faults.take(req.method, req.path, redirect=response.is_redirect)
        if firing is None:
            return response
        rule = firing.rule
        if rule.delay_s:
            time.sleep(rule.delay_s)
        if rule.reset is not None and req.method == "HEAD":
            raise DropConnection
        if rule.status is not None or rule.ratelimit_reset is not None:
            response = _status_answer(firing)
    else:
        firing = faults.take(req.method, req.path)
        if firing is None:
            return route()
        rule = firing.rule
        if rule.delay_s:
            time.sleep(rule.delay_s)
        if rule.reset is not None and req.body.present:
            _read_then_drop(req, rule.reset)
        response = _status_answer(firing) if rule.status is not None or rule.ratelimit_reset is not None else route()
    return _shape(firing, req, response)


def _read_then_drop(req: Request, count: int) -> None:
    left = count
    while left > 0 and (chunk := req.body.read(min(left, 1024 * 1024))):
        left -= len(chunk)
    raise DropConnection


def _status_answer(firing: Firing) -> Response:
    rule = firing.rule
    status = rule.status if rule.status is not None else 429
    headers: dict[str, str] = {}
    if rule.retry_after is not None:
        headers["Retry-After"] = str(rule.retry_after)
    if firing.reset_in is not None:
        headers.update(rule.ratelimit_headers(firing.reset_in))
        return json_response({"error": "You have been rate-limited; you can retry this action in about "
                                       f"{firing.reset_in} seconds."}, status, headers)
    return json_response({"error": f"Injected fault: HTTP {status}"}, status, headers)


def _shape(firing: Firing, req: Request, response: Response) -> Response:
    """The rule's effects on an answer: headers, listings, and the bytes on the wire."""
    rule = firing.rule
    if rule.etag is not None:
        for key in ("ETag", "X-Linked-Etag"):
            response.headers[key] = rule.etag
    answer = req.notes.get("answer")
    if rule.tree_escape is not None and answer == "tree" and isinstance(response.payload, list):
        data = b"escape\n"
        response.payload.append({"type": "file", "oid": hashlib.sha1(data, usedforsecurity=False).hexdigest(),
                                 "size": len(data), "path": rule.tree_escape})
    if rule.tree_escape is not None and answer == "bucket-tree" and isinstance(response.payload, list):
        # A bucket's file entry: no git id, a Xet hash instead (of bytes this server never stored).
        data = b"escape\n"
        response.payload.append({"type": "file", "path": rule.tree_escape, "size": len(data),
                                 "xetHash": hashlib.sha256(data).hexdigest(), "mtime": "2026-01-01T00:00:00.000Z",
                                 "uploadedAt": "2026-01-01T00:00:00.000Z"})
    if rule.reset is not None and not req.body.present:
        req.wire.cut_after = rule.reset
    if rule.corrupt:
        length = len(response.body_bytes())
        req.wire.flip_at = length // 2 if length else None
    return response
