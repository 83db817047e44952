"""One listener's application: route a request, let the fault layer shape it, and answer
errors the way the Hub words them, every answer with an ``X-Request-Id``."""

from __future__ import annotations

import hmac
import re
import secrets
import time
from urllib.parse import quote

from . import faultlayer
from .accesslog import AccessLog
from .context import Call, Hub
from .faults import FaultSet
from .httpmessages import Headers, HttpError, Request, Response, json_response
from .names import EntryNotFound, RepoMoved
from .objects import StorageError
from .oidc import Grant
from .routes import RouteTable
from .xet.tokens import grant_of

_BUCKET_PATH = re.compile(r"/api/buckets(?:/|$)|/buckets/")


def _request_id() -> str:
    # The shape of the Hub's ids (an AWS trace id); clients quote it in their errors.
    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)}"


def error_response(status: int, message: str, code: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    headers = dict(headers or {})
    if code:
        headers["X-Error-Code"] = code
    safe = message.encode("ascii", "replace").decode()[:500]
    # h11 refuses a header value with whitespace at either end (a message ending in a newline).
    headers["X-Error-Message"] = safe.replace("\r", " ").replace("\n", " ").strip()
    return json_response({"error": message}, status, headers)


def _moved_location(request: Request, params: dict[str, str], to: str) -> str | None:
    """The same request's URL, on this host, with the route's repo id replaced by ``to``; None for
    routes whose path names no repo (the id is in the body)."""
    if "ns" not in params or "name" not in params:
        return None
    old = f"/{params['ns']}/{params['name']}"
    at = request.path.lower().find(old.lower())
    if at < 0:
        return None
    path = f"{request.path[:at]}/{quote(to)}{request.path[at + len(old):]}"
    query = request.target.partition("?")[2]
    return f"{request.base_url}{path}" + (f"?{query}" if query else "")


class HubApp:
    """Serves ``routes`` for one listener (``"hub"`` or ``"cdn"``) of a Hub."""

    def __init__(self, hub: Hub, routes: RouteTable, listener: str, faults: FaultSet, log: AccessLog) -> None:
        self.hub = hub
        self.routes = routes
        self.listener = listener
        self.faults = faults
        self.log = log

    def handle(self, request: Request) -> Response:
        request_id = request.notes["request_id"] = _request_id()
        response = faultlayer.around(self.faults, request, lambda: self._route(request))
        response.headers.setdefault("X-Request-Id", request_id)
        return response

    def _route(self, request: Request) -> Response:
        found = self.routes.match(request.method, request.path)
        if found is None:
            return error_response(404, f"Not found: {request.method} {request.path}")
        handler, params = found
        call = Call(self.hub, request, params)
        try:
            grant = self.hub.credential(request.headers.get("Authorization")) \
                if self.listener == "hub" and _BUCKET_PATH.match(request.path) else None
            if isinstance(grant, Grant):
                # The exchange's resource names repos (and users), never a bucket.
                raise HttpError(403, f"Forbidden: this token is scoped to the {grant.repo_type} repo"
                                f" {grant.repo_id}; an exchanged token cannot reach a bucket")
            return handler(call)
        except HttpError as exc:
            return error_response(exc.status, exc.message, exc.code, exc.headers)
        except RepoMoved as exc:
            location = _moved_location(request, params, exc.to)
            if location is None:
                return error_response(404, str(exc), exc.code)
            return error_response(307, f"Repository moved to {exc.to}", headers={"Location": location})
        except StorageError as exc:
            headers: dict[str, str] = {}
            if isinstance(exc, EntryNotFound) and call.repo_commit:
                headers["X-Repo-Commit"] = call.repo_commit
            return error_response(exc.status, str(exc), exc.code, headers)

    def trusted(self, headers: Headers) -> bool:
        """The request carries the server's own token (on the CAS, a write token, which only
        writers get): it may pass the connection cap. Without a server token no one is told apart."""
        header = headers.get("Authorization") or ""
        given = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not given:
            return False
        if self.listener == "cas":
            grant = grant_of(self.hub.signer, given)
            return grant is not None and grant.scope == "write" and self.hub.token is not None
        return self.hub.token is not None and hmac.compare_digest(given.encode(), self.hub.token.encode())

    def credential_kind(self, headers: Headers) -> str | None:
        """What the access log records of a request's credential, never the credential itself:
        ``exchanged:SCOPE:TYPE/REPO`` (a live exchanged token), ``static`` (the server's token,
        or any on an open Hub), ``xet`` (a CAS token), ``invalid``, or None (none carried)."""
        if self.listener == "cas":
            return "xet" if headers.get("Authorization") else None
        found = self.hub.credential(headers.get("Authorization"))
        if isinstance(found, Grant):
            return f"exchanged:{found.scope}:{found.repo_type}/{found.repo_id}"
        return found

    def finished(self, request: Request, status: int | str, bytes_out: int, seconds: float) -> None:
        self.log.write({
            "ts": round(time.time(), 3),
            "method": request.method,
            "path": request.target,
            "status": status,
            "bytes_in": request.body.count,
            "bytes_out": bytes_out,
            "ms": round(seconds * 1000, 1),
            "listener": self.listener,
            "auth": "Authorization" in request.headers,
            "credential": self.credential_kind(request.headers),
            "request_id": request.notes.get("request_id"),
        })
