"""Endpoints about Storage Buckets as a whole: create, info, list, delete, move, settings, and
the Xet tokens of repo type ``bucket``.

``POST /api/buckets/{ns}/{name}`` (``{"visibility": "private"|"public"}``; ``me`` is the
caller's namespace) answers ``url``; 409 with the ``url`` when it exists. ``GET`` answers
``id``, ``private``, ``createdAt``, ``size`` and ``totalFiles`` (the bucket's usage: the
bytes of its files, each path once); ``DELETE`` removes it and frees what no one else holds;
``PUT .../settings`` takes ``{"private": bool}``. ``GET /api/buckets/{ns}`` lists a namespace
(``search=`` filters names), paginated with ``Link``. ``POST /api/repos/move`` with
``"type": "bucket"`` renames one (:func:`move`, called from :mod:`.api_repos`); the old id
redirects. ``GET /api/buckets/{ns}/{name}/xet-{read|write}-token`` (no revision, unlike repos).

Trust, as for repos: with a server token, anonymous callers see public buckets only (a private
one answers 401, a missing one 404, code ``RepoNotFound``) and every write needs the token;
CAS tokens are minted for ``bucket/<id>`` and read only that bucket's files.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

from .context import Call
from .httpmessages import HttpError, Response, json_response
from .names import RepoExists, RepoMeta, RepoNotFound, check_repo_id
from .objects import AUTHOR
from .usage import collect_garbage
from .xet.tokens import mint

LIST_PAGE = 1000


def bucket_id(call: Call) -> str:
    return named(f"{call.params['ns']}/{call.params['name']}")


def named(bid: str) -> str:
    """A bucket id as the caller may write it: ``me/NAME`` is the caller's own (here, the one
    user's), in a route and in a body (a copy's ``sourceRepoId``) alike.

    >>> named("me/ckpts") == f"{AUTHOR}/ckpts", named("org/ckpts")
    (True, 'org/ckpts')
    """
    ns, sep, name = bid.partition("/")
    return f"{AUTHOR}/{name}" if sep and ns == "me" else bid


def bucket_url(call: Call, meta: RepoMeta) -> str:
    return f"{call.req.base_url}/buckets/{meta.repo_id}"


def readable(call: Call, bid: str | None = None) -> RepoMeta:
    """The bucket, if the caller may read it."""
    authed = call.authorized()
    meta = call.store.buckets.get(named(bid) if bid else bucket_id(call))
    if meta.private and not authed:
        raise HttpError(401, "Invalid username or password.", code="RepoNotFound")
    return meta


def writable(call: Call) -> RepoMeta:
    call.require_write()
    return call.store.buckets.get(bucket_id(call))


def info_of(call: Call, meta: RepoMeta) -> dict[str, Any]:
    size, files = call.store.buckets.usage(meta.repo_id)
    return {"_id": hashlib.sha1(f"bucket/{meta.repo_id.lower()}".encode(), usedforsecurity=False).hexdigest()[:24],
            "id": meta.repo_id, "author": meta.repo_id.split("/")[0], "private": meta.private,
            "createdAt": meta.created_at, "updatedAt": call.store.buckets.updated_at(meta.repo_id, meta.created_at),
            "size": size, "totalFiles": files}


def create(call: Call) -> Response:
    call.require_write()
    bid = bucket_id(call)
    check_repo_id(bid)
    payload = call.json_object()
    visibility = payload.get("visibility", "private" if payload.get("private") else "public")
    if visibility not in ("public", "private"):
        raise HttpError(400, "visibility must be 'public' or 'private'")
    try:
        meta = call.store.buckets.create(bid, visibility == "private")
    except RepoExists as exc:
        url = bucket_url(call, exc.meta)
        return json_response({"error": str(exc), "url": url}, 409, {"X-Error-Message": str(exc)})
    return json_response({"url": bucket_url(call, meta), "id": meta.repo_id, "name": meta.repo_id})


def info(call: Call) -> Response:
    return json_response(info_of(call, readable(call)))


def delete(call: Call) -> Response:
    meta = writable(call)
    held = call.store.buckets.delete(meta.repo_id)
    collect_garbage(call.store, force=held)  # what no repo or other bucket names goes now
    return json_response({})


def settings(call: Call) -> Response:
    meta = writable(call)
    private = call.json_object().get("private")
    if not isinstance(private, bool):
        raise HttpError(400, "Expected {private: true|false}")
    call.store.buckets.set_private(meta.repo_id, private)
    return json_response({})


def move(call: Call, payload: dict[str, Any]) -> Response:
    """``POST /api/repos/move`` for a bucket (the caller checked write access)."""
    source, target = payload.get("fromRepo"), payload.get("toRepo")
    if not isinstance(source, str) or not isinstance(target, str):
        raise HttpError(400, "Expected fromRepo and toRepo")
    check_repo_id(target)
    moved = call.store.buckets.move(source, target)
    return json_response({"url": bucket_url(call, moved)})


def _known_namespace(call: Call, ns: str) -> bool:
    if ns.lower() in ("me", AUTHOR.lower()):
        return True
    store = call.store
    owners = {m.repo_id.split("/")[0].lower() for m in store.buckets.all()}
    for repo_type in ("model", "dataset", "space"):
        owners |= {m.repo_id.split("/")[0].lower() for m in store.list_repos(repo_type)}
    return ns.lower() in owners


def list_buckets(call: Call) -> Response:
    """``GET /api/buckets/{ns}``: a namespace's buckets the caller may see (``me``: the caller's)."""
    ns = call.params["ns"]
    authed = call.authorized()
    if ns == "me" and not call.req.headers.get("Authorization"):
        raise HttpError(401, "You must be authenticated to list your buckets")
    if not _known_namespace(call, ns):
        raise RepoNotFound(f"Namespace {ns} not found")
    owner = (AUTHOR if ns == "me" else ns).lower()
    search = call.req.param("search").lower()
    metas = [m for m in call.store.buckets.all()
             if m.repo_id.split("/")[0].lower() == owner and (authed or not m.private)
             and (not search or search in m.repo_id.split("/")[1].lower())]
    metas.sort(key=lambda m: m.repo_id.lower())
    try:
        offset = int(call.req.param("cursor") or 0)
    except ValueError:
        raise HttpError(400, "Invalid cursor") from None
    page = metas[offset:offset + LIST_PAGE]
    headers = {}
    if offset + LIST_PAGE < len(metas):
        query = f"search={quote(search)}&" if search else ""
        headers["Link"] = f'<{call.req.base_url}{call.req.path}?{query}cursor={offset + LIST_PAGE}>; rel="next"'
    return json_response([info_of(call, m) for m in page], headers=headers)


def xet_token(call: Call) -> Response:
    """``GET /api/buckets/{ns}/{name}/xet-{read|write}-token``: a CAS token for this bucket only."""
    xet = call.hub.xet
    if xet is None or call.hub.cas_url is None:
        raise HttpError(404, f"Not found: {call.req.method} {call.req.path}")
    scope = call.params["scope"]
    meta = writable(call) if scope == "write" else readable(call)
    access, exp = mint(call.hub.signer, scope, "bucket", meta.repo_id, call.hub.xet_token_ttl)
    cas_url = call.hub.cas_url + xet.cas_path()
    headers = {"X-Xet-Cas-Url": cas_url, "X-Xet-Access-Token": access, "X-Xet-Token-Expiration": str(exp)}
    return json_response({"casUrl": cas_url, "accessToken": access, "exp": exp}, headers=headers)


def read_token_url(call: Call, meta: RepoMeta) -> str:
    ns, name = meta.repo_id.split("/")
    return f"{call.req.base_url}/api/buckets/{quote(ns)}/{quote(name)}/xet-read-token"
