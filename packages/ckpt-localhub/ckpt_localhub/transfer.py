"""Moving file bytes: the LFS batch API and upload PUTs, ``resolve`` downloads, and the CDN.

As on the Hub, ``resolve`` serves a regular file itself but answers an LFS file with a
redirect to another origin, the CDN listener, with ``Location``, ``X-Linked-Etag``,
``X-Linked-Size`` and ``X-Repo-Commit``. The client reads those from the redirect and
follows it without its ``Authorization`` header. The CDN needs no token: its URLs are
signed and expire (see :mod:`.signing`). Its paths are the ``resolve`` paths they stand
for, at the commit they were resolved to, so fault rules and logs read the same on both
listeners. With ``lfs_redirect`` off the Hub serves LFS bytes directly.

Byte ranges (``Range: bytes=N-``) work on both, so clients resume after a dropped
connection; bytes always go out with ``sendfile``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from . import api_xet
from .context import Call
from .httpmessages import FileSlice, HttpError, Response, json_response, parse_range
from .names import EntryNotFound

UPLOAD_URL_TTL_S = 24 * 3600


def lfs_batch(call: Call) -> Response:
    call.repo(write=True)
    payload = call.json_object()
    if payload.get("operation") != "upload":
        raise HttpError(400, "Only the upload operation is supported")
    objects = []
    raw_objects = payload.get("objects") or []
    if not isinstance(raw_objects, list):
        raise HttpError(400, "Expected objects: [...]")
    for obj in raw_objects[:1000]:
        oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
        if not isinstance(oid, str) or not isinstance(size, int) or size < 0 or len(oid) != 64:
            objects.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                            "error": {"code": 422, "message": "Invalid oid or size"}})
            continue
        answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
        if call.store.objects.lfs_size(oid) != size:
            expires, sig = call.hub.signer.sign("put", oid, size, ttl_s=UPLOAD_URL_TTL_S)
            href = f"{call.req.base_url}/localhub-lfs/{oid}?size={size}&expires={expires}&sig={sig}"
            answer["actions"] = {"upload": {"href": href, "header": {}, "expires_in": UPLOAD_URL_TTL_S}}
        objects.append(answer)
    return json_response({"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
                         content_type="application/vnd.git-lfs+json")


def lfs_put(call: Call) -> Response:
    req = call.req
    oid = call.params["oid"]
    try:
        size, expires = int(req.param("size")), int(req.param("expires"))
    except ValueError:
        raise HttpError(403, "Upload URL is not signed") from None
    if not call.hub.signer.verify(req.param("sig"), expires, "put", oid, size):
        raise HttpError(403, "Upload URL signature is invalid or expired")
    if req.body.declared is not None and not req.body.chunked and req.body.declared != size:
        raise HttpError(400, f"Upload has Content-Length {req.body.declared}, {size} announced")
    call.store.objects.put_lfs_stream(oid, size, req.body.read)
    return json_response({})


def file_answer(call: Call, path: Path, size: int, headers: dict[str, str]) -> Response:
    """Bytes of a stored file, whole or the ``Range`` asked for."""
    start, end, status = 0, size - 1, 200
    range_header = call.req.headers.get("Range")
    if range_header:
        start, end = parse_range(range_header, size)
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Accept-Ranges"] = "bytes"
    return Response(status, FileSlice(path, start, max(0, end - start + 1)), headers, "application/octet-stream")


def resolve(call: Call) -> Response:
    """``GET``/``HEAD /{repo}/resolve/{rev}/{path}``."""
    head = call.head(call.params["rev"])
    assert call.meta is not None
    path = call.params["path"]
    store = call.store
    entry = store.entry(head, path) if path else None
    if entry is None or entry.kind != "file":
        raise EntryNotFound(f"Entry not found: {path}")
    call.require_file_access(call.meta)
    headers = {"X-Repo-Commit": head, "ETag": f'"{entry.lfs or entry.oid}"'}
    if entry.lfs is not None and entry.lfs in store.deleted_lfs(call.meta.repo_type, call.meta.repo_id):
        # The commit still names the file, but its bytes were deleted for good (see .usage).
        raise HttpError(410, f"{path} at {head}: its LFS object {entry.lfs} was permanently deleted from this "
                        "repo's storage", headers=headers)
    if entry.lfs is None:
        return file_answer(call, store.objects.blob_path(entry.oid), entry.size, headers)
    headers["X-Linked-Etag"] = f'"{entry.lfs}"'
    headers["X-Linked-Size"] = str(entry.size)
    xet_hash = api_xet.xet_hash(call, entry.lfs)
    if xet_hash is not None:
        # As the Hub: Xet clients reconstruct from the CAS, others follow the redirect to a
        # bridge that serves the reconstructed bytes (here the CDN listener, from the rebuilt object).
        headers["X-Xet-Hash"] = xet_hash
        headers["Link"] = f'<{api_xet.read_token_url(call, head)}>; rel="xet-auth"'
    if call.hub.lfs_redirect and call.hub.cdn_url:
        # The CDN path names the commit, not the revision asked for: a CDN URL never changes meaning.
        repo_type, _ = call.repo_ref()
        prefix = "" if repo_type == "model" else f"/{repo_type}s"
        cdn_path = (f"{prefix}/{quote(call.params['ns'])}/{quote(call.params['name'])}/resolve/{head}/"
                    f"{quote(path)}")
        expires, sig = call.hub.signer.sign("cdn", cdn_path, entry.lfs, entry.size)
        headers["Location"] = (f"{call.hub.cdn_url}{cdn_path}?oid={entry.lfs}&size={entry.size}"
                               f"&expires={expires}&signature={sig}")
        return Response(302, b"", headers, "text/plain")
    return file_answer(call, store.objects.lfs_path(entry.lfs), entry.size, headers)


def cdn_get(call: Call) -> Response:
    """The CDN listener: any path, if the query's signature vouches for it."""
    req = call.req
    oid = req.param("oid")
    try:
        size, expires = int(req.param("size")), int(req.param("expires"))
    except ValueError:
        raise HttpError(403, "Request has expired or is not signed") from None
    if not call.hub.signer.verify(req.param("signature"), expires, "cdn", req.path, oid, size):
        raise HttpError(403, "Request has expired or its signature does not match")
    if call.store.objects.lfs_size(oid) != size:
        raise HttpError(404, "Not found")
    raw_name = req.path.rsplit("/", 1)[-1]  # percent-encoded, so plain ASCII
    plain = "".join(c for c in unquote(raw_name) if c.isascii() and c.isprintable() and c not in '"\\')
    headers = {"ETag": f'"{oid}"', "Content-Disposition": f"inline; filename*=UTF-8''{raw_name}; filename=\"{plain}\";"}
    return file_answer(call, call.store.objects.lfs_path(oid), size, headers)
