"""Endpoints that read and move a repo's git state: trees, paths-info, refs, commit history,
branches, tags and super-squash."""

from __future__ import annotations

import base64
import binascii
import html
from typing import Any
from urllib.parse import quote

from . import api_xet
from .context import Call
from .gitobjects import lfs_pointer
from .httpmessages import HttpError, Response, json_response
from .names import EntryNotFound
from .objects import Commit, TreeEntry
from .usage import collecting

TREE_PAGE = 1000  # entries per /tree page with expand=false, as on the Hub
TREE_PAGE_EXPANDED = 50
COMMITS_PAGE = 50


def _tree_item(path: str, entry: TreeEntry, xet_hash: str | None = None) -> dict[str, Any]:
    if entry.kind == "directory":
        return {"type": "directory", "oid": entry.oid, "size": 0, "path": path}
    item: dict[str, Any] = {"type": "file", "oid": entry.oid, "size": entry.size, "path": path}
    if entry.lfs is not None:
        item["lfs"] = {"oid": entry.lfs, "size": entry.size,
                       "pointerSize": len(lfs_pointer(entry.lfs, entry.size))}
    if xet_hash is not None:
        item["xetHash"] = xet_hash
    return item


def _last_commit(call: Call, head: str, path: str, oid: str) -> dict[str, str]:
    store = call.store
    last = store.objects.read_commit(head)
    for commit in store.log(head):
        entry = store.entry(commit.oid, path)
        if entry is None or entry.oid != oid:
            break
        last = commit
    return {"id": last.oid, "title": last.title, "date": last.date}


def _listing(call: Call, head: str, pairs: list[tuple[str, TreeEntry]], expand: bool,
             headers: dict[str, str] | None = None) -> Response:
    items = []
    for path, entry in pairs:
        item = _tree_item(path, entry, api_xet.xet_hash(call, entry.lfs))
        if expand:
            item["lastCommit"] = _last_commit(call, head, path, entry.oid)
        items.append(item)
    call.req.notes["answer"] = "tree"  # a fault may add an entry (faultlayer)
    return json_response(items, headers=headers)


def tree(call: Call) -> Response:
    revision = call.params["rev"]
    head = call.head(revision)
    path = call.params.get("path", "").strip("/")
    entry = call.store.entry(head, path)
    if entry is None or entry.kind != "directory":
        raise EntryNotFound(f"{path!r} does not exist or is not a directory at revision {revision}")
    req = call.req
    recursive, expand = req.flag("recursive"), req.flag("expand")
    pairs = call.store.listing(entry.oid, path, recursive)
    size = TREE_PAGE_EXPANDED if expand else TREE_PAGE
    try:
        offset = int(base64.urlsafe_b64decode(req.param("cursor") or "MA==").decode())
    except (ValueError, binascii.Error):
        raise HttpError(400, "Invalid cursor") from None
    headers = {}
    if offset + size < len(pairs):
        cursor = base64.urlsafe_b64encode(str(offset + size).encode()).decode()
        query = f"recursive={str(recursive).lower()}&expand={str(expand).lower()}&cursor={quote(cursor)}"
        headers["Link"] = f'<{req.base_url}{req.path}?{query}>; rel="next"'
    return _listing(call, head, pairs[offset:offset + size], expand, headers)


def paths_info(call: Call) -> Response:
    head = call.head(call.params["rev"])
    form = call.form()
    expand = (form.get("expand") or ["false"])[0].lower() in ("1", "true")
    pairs = []
    for path in dict.fromkeys(p.strip("/") for p in form.get("paths", [])):
        entry = call.store.entry(head, path) if path else None
        if entry is not None:
            pairs.append((path, entry))
    return _listing(call, head, pairs, expand)


def refs(call: Call) -> Response:
    meta = call.repo()
    found = call.store.refs(meta.repo_type, meta.repo_id)

    def fmt(kind: str, name: str, target: str) -> dict[str, str]:
        return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": target}

    answer: dict[str, Any] = {
        "branches": [fmt("heads", n, t) for n, t in sorted(found["heads"].items())],
        "converts": [],
        "tags": [fmt("tags", n, t) for n, t in sorted(found["tags"].items())],
    }
    if call.req.flag("include_prs"):
        answer["pullRequests"] = []
    return json_response(answer)


def _commit_item(commit: Commit, formatted: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"id": commit.oid, "title": commit.title, "message": commit.message,
                            "date": commit.date, "authors": [{"user": commit.author, "avatar": ""}]}
    if formatted:
        # The Hub renders titles and messages as HTML for its pages; plain text, escaped, is what
        # a message without markdown renders to.
        message = "".join(f"<p>{html.escape(p)}</p>" for p in commit.message.split("\n\n") if p.strip())
        item["formatted"] = {"title": html.escape(commit.title), "message": message}
    return item


def commits(call: Call) -> Response:
    head = call.head(call.params.get("rev") or "main")
    req = call.req
    try:
        page = max(0, int(req.param("p", "0")))
    except ValueError:
        raise HttpError(400, "Invalid page") from None
    formatted = "formatted" in req.query.get("expand[]", []) + req.query.get("expand", [])
    start = page * COMMITS_PAGE
    items: list[dict[str, Any]] = []
    more = False
    for i, commit in enumerate(call.store.log(head)):
        if i >= start + COMMITS_PAGE:
            more = True
            break
        if i >= start:
            items.append(_commit_item(commit, formatted))
    headers = {}
    if more:
        # The client follows this link as given: it must carry the query of the first page.
        query = "".join(f"{quote(k)}={quote(v)}&" for k, vs in req.query.items() if k != "p" for v in vs)
        headers["Link"] = f'<{req.base_url}{req.path}?{query}p={page + 1}>; rel="next"'
    return json_response(items, headers=headers)


def create_branch(call: Call) -> Response:
    meta = call.repo(write=True)
    start = call.json_object().get("startingPoint")
    call.store.create_branch(meta.repo_type, meta.repo_id, call.params["branch"],
                             str(start) if start else None)
    return json_response({})


def delete_branch(call: Call) -> Response:
    meta = call.repo(write=True)
    with collecting(call.store, meta.repo_type, meta.repo_id):
        call.store.delete_branch(meta.repo_type, meta.repo_id, call.params["branch"])
    return json_response({})


def create_tag(call: Call) -> Response:
    meta = call.repo(write=True)
    payload = call.json_object()
    tag = payload.get("tag")
    if not isinstance(tag, str) or not tag:
        raise HttpError(400, "Missing tag name")
    call.store.create_tag(meta.repo_type, meta.repo_id, tag, call.params["rev"])
    return json_response({})


def delete_tag(call: Call) -> Response:
    meta = call.repo(write=True)
    with collecting(call.store, meta.repo_type, meta.repo_id):
        call.store.delete_tag(meta.repo_type, meta.repo_id, call.params["tag"])
    return json_response({})


def super_squash(call: Call) -> Response:
    meta = call.repo(write=True)
    message = call.json_object().get("message")
    branch = call.params["branch"]
    with collecting(call.store, meta.repo_type, meta.repo_id):
        oid = call.store.super_squash(meta.repo_type, meta.repo_id, branch,
                                      str(message) if message else f"Super-squash branch '{branch}'")
    return json_response({"commitId": oid})
