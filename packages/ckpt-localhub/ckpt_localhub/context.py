"""What a route handler works with: the Hub's shared state and one request's context.

``Hub`` holds what every request shares (storage, the token, the URL signer, where the
CDN listens). ``Call`` is one request with its route parameters and the checks every
endpoint makes the way the Hub makes them: who is asking, whether they may see or
change a repo, and which commit a revision names.

Auth: with a token set, a wrong bearer token gets 401; anonymous requests may read
public repos only (private ones answer 404 RepoNotFound, files of gated ones 401
GatedRepo) and every write gets 401. Without a token everything is open and every
caller counts as the owner. With a trusted issuer (:mod:`.oidc`), a token it exchanged is
accepted too, token or not, and only for what it grants: its one repo (403 for another, or
any bucket), to write only when its scope is write; once expired it is an unknown token (401).
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from .httpmessages import HttpError, Request
from .names import RepoMeta, RepoNotFound
from .oidc import TOKEN_PREFIX, Grant, TrustedIssuer
from .signing import Signer
from .storage import Storage
from .xet.store import XetStore

MAX_JSON_BODY = 4 * 1024 * 1024
"""The largest JSON or form body a route reads whole (413 past it). The client's largest is a
preupload of 1000 files with 512-byte samples, well under 1 MiB; NDJSON commits and LFS
uploads stream and are bounded per line or by their announced size instead."""


@dataclass
class Hub:
    store: Storage
    token: str | None = None
    signer: Signer = field(default_factory=Signer)
    lfs_redirect: bool = True
    """Answer an LFS file's ``resolve`` with a redirect to the CDN listener, as the Hub does."""
    cdn_url: str | None = None
    """The CDN listener's base URL, once it listens."""
    xet: XetStore | None = None
    """Xet storage; None with Xet switched off (``--no-xet``): no token routes, no Xet headers."""
    cas_url: str | None = None
    """The CAS listener's base URL, once it listens."""
    xet_token_ttl: int = 3600
    """Seconds a CAS token lasts (the Hub's are short-lived too; clients refresh them)."""
    oidc: TrustedIssuer | None = None
    """The issuer whose id tokens ``/oauth/token`` exchanges; None: no exchange offered."""
    url: str | None = None
    """This Hub's own URL, once it listens: the audience an id token must name."""

    def credential(self, authorization: str | None) -> str | Grant | None:
        """What a request's ``Authorization`` carries: None (nothing), ``"static"`` (the
        server's token, or anything on an open server), a :class:`Grant` (an exchanged token
        still live), or ``"invalid"`` (a wrong token, an expired exchanged one)."""
        header = authorization or ""
        given = header[7:].strip() if header.lower().startswith("bearer ") else None
        if not given:
            return None
        if self.oidc is not None and given.startswith(TOKEN_PREFIX):
            return self.oidc.grant(given) or "invalid"
        if self.token is None or hmac.compare_digest(given.encode(), self.token.encode()):
            return "static"
        return "invalid"


def repo_url(base_url: str, repo_type: str, repo_id: str) -> str:
    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    return f"{base_url}/{prefix}{repo_id}"


class Call:
    """One request to a route: ``params`` are the route's parts, unquoted."""

    def __init__(self, hub: Hub, req: Request, params: dict[str, str]) -> None:
        self.hub = hub
        self.req = req
        self.params = params
        self.repo_commit: str | None = None
        """The commit a read resolved to: 404s for missing files still carry it."""
        self.meta: RepoMeta | None = None
        self._small_body: bytes | None = None

    @property
    def store(self) -> Storage:
        return self.hub.store

    # ------------------------------------------------------------------ who is asking
    def credential(self) -> str | Grant | None:
        """The request's credential (:meth:`Hub.credential`); 401 for an invalid one."""
        found = self.hub.credential(self.req.headers.get("Authorization"))
        if found == "invalid":
            raise HttpError(401, "Invalid credentials in Authorization header")
        return found

    def grant(self) -> Grant | None:
        """The exchanged token's grant, if the request carries one."""
        found = self.credential()
        return found if isinstance(found, Grant) else None

    def authorized(self) -> bool:
        """True when the caller is the owner (anyone, without a server token) or holds an
        exchanged token (whose scope :meth:`check_grant` holds it to); raises 401 on a wrong token."""
        found = self.credential()
        return self.hub.token is None or found is not None

    def check_grant(self, repo_type: str, repo_id: str, write: bool) -> None:
        """403 when the request's exchanged token does not cover this access."""
        grant = self.grant()
        why = grant.covers(repo_type, repo_id, write) if grant is not None else None
        if why is not None:
            raise HttpError(403, f"Forbidden: {why}")

    def require_write(self, target: tuple[str, str] | None = None) -> None:
        """The caller may write: ``target`` (repo type, repo id) is what it writes, which an
        exchanged token must cover; without one (buckets, deletes, moves) no exchanged token may."""
        if not self.authorized():
            raise HttpError(401, "You must be authenticated to perform this action (Invalid credentials)")
        grant = self.grant()
        if grant is not None and target is None:
            raise HttpError(403, f"Forbidden: this token is scoped to the {grant.repo_type} repo {grant.repo_id};"
                            " it may not do this")
        if target is not None:
            self.check_grant(*target, write=True)

    # ------------------------------------------------------------------ repos and revisions
    def repo_ref(self) -> tuple[str, str]:
        """(repo type, repo id) from the route's ``types``/``ns``/``name`` parts."""
        types = self.params.get("types") or "models"
        return types[:-1], f"{self.params['ns']}/{self.params['name']}"

    def repo(self, write: bool = False) -> RepoMeta:
        """The route's repo, if the caller may see it (and, with ``write``, change it)."""
        repo_type, repo_id = self.repo_ref()
        if write:
            self.require_write((repo_type, repo_id))
            self.meta = self.store.get_repo(repo_type, repo_id)
            return self.meta
        authed = self.authorized()
        self.check_grant(repo_type, repo_id, write=False)
        meta = self.store.get_repo(repo_type, repo_id)
        if meta.private and not authed:
            raise RepoNotFound("Repository not found")
        self.meta = meta
        return meta

    def head(self, revision: str) -> str:
        """The commit ``revision`` names in the route's repo (which the caller may read)."""
        meta = self.repo()
        sha = self.store.resolve(meta.repo_type, meta.repo_id, revision)
        self.repo_commit = sha
        return sha

    def require_file_access(self, meta: RepoMeta) -> None:
        """A gated repo's files need an identified caller, as on the Hub."""
        if meta.gated and not self.authorized():
            kind = meta.repo_type
            raise HttpError(401, f"Access to {kind} {meta.repo_id} is restricted. You must have access to it and be "
                            "authenticated to access it. Please log in.", code="GatedRepo")

    # ------------------------------------------------------------------ request bodies
    def small_body(self) -> bytes:
        """The whole request body, if it is at most ``MAX_JSON_BODY`` bytes; 413 otherwise, told
        from the declared length before a byte is read, or after reading one byte past the cap."""
        if self._small_body is not None:
            return self._small_body
        body = self.req.body
        too_large = HttpError(413, f"Request body is larger than {MAX_JSON_BODY} bytes")
        if body.declared is not None and body.declared > MAX_JSON_BODY:
            body.abandon()
            raise too_large
        raw = body.read_upto(MAX_JSON_BODY + 1)
        if len(raw) > MAX_JSON_BODY:
            body.abandon()
            raise too_large
        self._small_body = raw
        return raw

    def json(self) -> Any:
        raw = self.small_body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise HttpError(400, "Request body is not valid JSON") from None

    def json_object(self) -> dict[str, Any]:
        value = self.json()
        if not isinstance(value, dict):
            raise HttpError(400, "Request body must be a JSON object")
        return value

    def form(self) -> dict[str, list[str]]:
        return parse_qs(self.small_body().decode("utf-8", "replace"), keep_blank_values=True)
