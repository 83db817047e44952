"""Endpoints about a repo's storage: the LFS files it holds (``list_lfs_files``) and their
permanent deletion (``permanently_delete_lfs_files``). Both are the owner's, as on the Hub;
what they mean is in :mod:`.usage`."""

from __future__ import annotations

from urllib.parse import quote

from .context import Call
from .httpmessages import HttpError, Response, json_response
from .usage import permanently_delete, stored_objects

LFS_FILES_PAGE = 1000


def list_lfs_files(call: Call) -> Response:
    """``GET /api/{type}s/{repo}/lfs-files``: pages of ``{fileOid, oid, filename, size, pushedAt, ref}``,
    followed through ``Link: <...>; rel="next"`` as the client's paginate() does."""
    meta = call.repo(write=True)
    items = sorted((o for o in stored_objects(call.store, meta.repo_type, meta.repo_id).values() if o.lfs),
                   key=lambda o: (o.date, o.path, o.key))
    try:
        offset = max(0, int(call.req.param("cursor") or 0))
    except ValueError:
        raise HttpError(400, "Invalid cursor") from None
    page = items[offset:offset + LFS_FILES_PAGE]
    headers = {}
    if offset + LFS_FILES_PAGE < len(items):
        headers["Link"] = f'<{call.req.base_url}{quote(call.req.path)}?cursor={offset + LFS_FILES_PAGE}>; rel="next"'
    return json_response([{"fileOid": o.key, "oid": o.key, "filename": o.path, "size": o.size, "pushedAt": o.date,
                           "ref": o.ref} for o in page], headers=headers)


def delete_lfs_files(call: Call) -> Response:
    """``POST /api/{type}s/{repo}/lfs-files/batch`` ``{"deletions": {"sha": [...], "rewriteHistory": bool}}``."""
    meta = call.repo(write=True)
    payload = call.json_object()
    deletions = payload.get("deletions")
    if not isinstance(deletions, dict) or not isinstance(deletions.get("sha"), list):
        raise HttpError(400, "Expected {deletions: {sha: [...], rewriteHistory: bool}}")
    rewrite = deletions.get("rewriteHistory", True)
    if not isinstance(rewrite, bool):
        raise HttpError(400, "rewriteHistory must be true or false")
    permanently_delete(call.store, meta.repo_type, meta.repo_id, deletions["sha"], rewrite)
    return json_response({})
