"""Endpoints about repos as a whole: who am I, create, delete, move, settings, info, listings,
and the model-card check the client runs before committing a root ``README.md``."""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import quote

from . import api_buckets
from .context import Call, repo_url
from .gitobjects import lfs_pointer
from .httpmessages import HttpError, Response, json_response
from .names import REPO_TYPES, RepoExists, RepoMeta, check_repo_id
from .objects import AUTHOR
from .usage import used_storage

LIST_PAGE = 1000
_SORT_KEYS = {"lastModified", "createdAt", "id", "downloads", "likes", "trendingScore"}


def whoami(call: Call) -> Response:
    if not call.authorized() or not call.req.headers.get("Authorization"):
        raise HttpError(401, "Invalid credentials in Authorization header")
    return json_response({
        "type": "user", "id": AUTHOR, "name": AUTHOR, "fullname": "Local Hub user",
        "email": None, "emailVerified": False, "isPro": False, "canPay": False, "orgs": [],
        "avatarUrl": "", "periodEnd": None,
        "auth": {"type": "access_token", "accessToken": {"displayName": "local-hub", "role": "write"}},
    })


def _repo_type(value: Any) -> str:
    repo_type = value or "model"
    if repo_type not in REPO_TYPES:
        raise HttpError(400, f"Unsupported repo type {repo_type!r}")
    return str(repo_type)


def create_repo(call: Call) -> Response:
    if call.grant() is None:  # an exchanged token is checked on the repo the body names, below
        call.require_write()
    payload = call.json_object()
    repo_type = _repo_type(payload.get("type"))
    name = payload.get("name")
    if not isinstance(name, str):
        raise HttpError(400, "Missing repo name")
    repo_id = f"{payload.get('organization') or AUTHOR}/{name}"
    check_repo_id(repo_id)
    call.require_write((repo_type, repo_id))
    private = payload.get("visibility", "private" if payload.get("private") else "public") != "public"
    try:
        meta = call.store.create_repo(repo_type, repo_id, private)
    except RepoExists as exc:
        # The Hub's 409 carries the url (of the spelling that exists); create_repo(exist_ok=True) reads it.
        url = repo_url(call.req.base_url, repo_type, exc.meta.repo_id)
        return json_response({"error": str(exc), "url": url}, 409, {"X-Error-Message": str(exc)})
    return json_response({"url": repo_url(call.req.base_url, repo_type, meta.repo_id), "name": meta.repo_id,
                          "id": meta.repo_id})


def delete_repo(call: Call) -> Response:
    call.require_write()
    payload = call.json_object()
    repo_type = _repo_type(payload.get("type"))
    call.store.delete_repo(repo_type, f"{payload.get('organization') or AUTHOR}/{payload.get('name')}")
    return json_response({})


def move_repo(call: Call) -> Response:
    call.require_write()
    payload = call.json_object()
    if payload.get("type") == "bucket":
        return api_buckets.move(call, payload)
    repo_type = _repo_type(payload.get("type"))
    source, target = payload.get("fromRepo"), payload.get("toRepo")
    if not isinstance(source, str) or not isinstance(target, str):
        raise HttpError(400, "Expected fromRepo and toRepo")
    check_repo_id(target)
    moved = call.store.move_repo(repo_type, source, target)
    return json_response({"url": repo_url(call.req.base_url, repo_type, moved.repo_id)})


def settings(call: Call) -> Response:
    meta = call.repo(write=True)
    payload = call.json_object()
    private = payload.get("private")
    if "visibility" in payload:
        private = payload["visibility"] != "public"
    gated = payload.get("gated")
    call.store.update_settings(meta.repo_type, meta.repo_id, None if private is None else bool(private), gated)
    return json_response({})


def _summary(call: Call, meta: RepoMeta, sha: str | None = None) -> dict[str, Any]:
    """What the Hub says about a repo in listings and (with more) in its info."""
    store = call.store
    sha = sha or store.resolve(meta.repo_type, meta.repo_id, "main")
    commit = store.objects.read_commit(sha)
    info: dict[str, Any] = {
        "_id": hashlib.sha1(f"{meta.repo_type}/{meta.repo_id.lower()}".encode(), usedforsecurity=False)
        .hexdigest()[:24],
        "id": meta.repo_id, "author": meta.repo_id.split("/")[0], "sha": sha, "lastModified": commit.date,
        "createdAt": meta.created_at, "private": meta.private, "gated": meta.gated, "disabled": False,
        "downloads": 0, "likes": 0, "tags": [],
    }
    if meta.repo_type == "model":
        info["modelId"] = meta.repo_id
    if meta.repo_type == "space":
        info.update(sdk="static", runtime={"stage": "NO_APP_FILE"})
    return info


def repo_info(call: Call) -> Response:
    meta = call.repo()
    store = call.store
    sha = call.head(call.params.get("rev") or "main")
    blobs = call.req.flag("blobs")
    siblings = []
    for path, entry in store.listing(store.objects.read_commit(sha).tree, "", True):
        if entry.kind != "file":
            continue
        sibling: dict[str, Any] = {"rfilename": path}
        if blobs:
            sibling.update(size=entry.size, blobId=entry.oid)
            if entry.lfs:
                sibling["lfs"] = {"sha256": entry.lfs, "size": entry.size,
                                  "pointerSize": len(lfs_pointer(entry.lfs, entry.size))}
        siblings.append(sibling)
    info = {**_summary(call, meta, sha), "siblings": siblings}
    expand = call.req.query.get("expand", []) + call.req.query.get("expand[]", [])
    if not expand:
        return json_response(info)
    # As on the Hub, expand= answers only what it names (and the ids).
    if "usedStorage" in expand:
        info["usedStorage"] = used_storage(store, meta.repo_type, meta.repo_id)
    return json_response({k: v for k, v in info.items() if k in ("_id", "id", *expand)})


def list_repos(call: Call) -> Response:
    """``GET /api/models`` (datasets, spaces): ``list_models(author=, search=, sort=, limit=)``."""
    repo_type = call.params["types"][:-1]
    req = call.req
    author, search, gated = req.param("author").lower(), req.param("search").lower(), req.param("gated").lower()
    authed = call.authorized()
    metas = [m for m in call.store.list_repos(repo_type)
             if (authed or not m.private)
             and (not author or m.repo_id.split("/")[0].lower() == author)
             and (not search or search in m.repo_id.lower())
             and (not gated or bool(m.gated) == (gated == "true"))]
    items = [_summary(call, m) for m in metas]
    sort = req.param("sort") or "id"
    if sort not in _SORT_KEYS:
        raise HttpError(400, f"Invalid sort key {sort!r}")
    items.sort(key=lambda item: (item.get(sort, 0), item["id"]), reverse=req.param("direction") == "-1")
    try:
        limit = int(req.param("limit") or LIST_PAGE)
        offset = int(req.param("cursor") or 0)
    except ValueError:
        raise HttpError(400, "Invalid limit or cursor") from None
    size = max(1, min(limit, LIST_PAGE))
    page = items[offset:offset + size]
    headers = {}
    if offset + size < len(items) and offset + size < limit:
        query = "&".join(f"{k}={quote(v[0])}" for k, v in req.query.items() if k != "cursor")
        headers["Link"] = f'<{req.base_url}{req.path}?{query}&cursor={offset + size}>; rel="next"'
    return json_response(page, headers=headers)


def user_repos(call: Call) -> Response:
    """What ``hf repos ls`` reads: the caller's (or an organization's) repos with their storage."""
    if not call.authorized() or not call.req.headers.get("Authorization"):
        raise HttpError(401, "Invalid credentials in Authorization header")
    namespace = (call.params.get("ns") or AUTHOR).lower()
    store = call.store
    rows: list[dict[str, Any]] = []
    for repo_type in REPO_TYPES:
        for meta in store.list_repos(repo_type):
            if meta.repo_id.split("/")[0].lower() != namespace:
                continue
            sha = store.resolve(repo_type, meta.repo_id, "main")
            commit = store.objects.read_commit(sha)
            size = sum(e.size for _p, e in store.listing(commit.tree, "", True) if e.kind == "file")
            rows.append({"id": meta.repo_id, "type": repo_type, "updatedAt": commit.date,
                         "visibility": "private" if meta.private else "public", "storage": size})
    total = sum(int(r["storage"]) for r in rows) or 1
    for row in rows:
        row["storagePercent"] = round(100 * row["storage"] / total, 2)
    return json_response(rows)


# ------------------------------------------------------------------------------- model cards

# The front matter huggingface_hub itself finds in a README.md (leading blank lines allowed).
_FRONT_MATTER = re.compile(r"^(\s*---[\r\n]+)([\S\s]*?)([\r\n]+---(\r\n|\n|$))")
_STRING_OR_LIST = ("tags", "datasets", "language", "metrics", "base_model", "pipeline_tag", "library_name",
                   "license")


def card_problems(content: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) about a README.md's YAML metadata, as the Hub's check reports them."""
    import yaml  # PyYAML comes with huggingface_hub; only this endpoint needs it

    match = _FRONT_MATTER.match(content)
    if match is None:
        return [], ["empty or missing yaml metadata in repo card"]
    try:
        data = yaml.safe_load(match.group(2))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        return [f"Invalid YAML in README.md metadata{line}: {getattr(exc, 'problem', None) or exc}"], []
    if data is None:
        return [], ["empty or missing yaml metadata in repo card"]
    if not isinstance(data, dict):
        return ['"metadata" must be an object'], []
    errors = []
    if "model-index" in data and not isinstance(data["model-index"], list):
        errors.append('"model-index" must be an array')
    for key in _STRING_OR_LIST:
        value = data.get(key)
        if value is not None and not isinstance(value, str) and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)):
            errors.append(f'"{key}" must be a string or an array of strings')
    return errors, []


def validate_yaml(call: Call) -> Response:
    # Open to anonymous callers, also with a server token, as on the Hub: huggingface_hub's
    # RepoCard.validate (run by ModelCard.push_to_hub) posts here without any Authorization
    # header. What bounds it is the body cap (413 past MAX_JSON_BODY, never read whole) and the
    # connection cap. A wrong token is still refused (401), as everywhere.
    call.authorized()
    payload = call.json_object()
    content = payload.get("content")
    if not isinstance(content, str):
        raise HttpError(400, "Expected {content: string, repoType}")
    errors, warnings = card_problems(content)
    body: dict[str, Any] = {"errors": [{"message": m} for m in errors],
                            "warnings": [{"message": m, "property": ""} for m in warnings]}
    if errors:
        return json_response({"error": errors[0], **body}, 400, {"X-Error-Message": errors[0]})
    return json_response(body)
