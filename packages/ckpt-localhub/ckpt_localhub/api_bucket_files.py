"""Endpoints about the files of a Storage Bucket: tree, paths-info, the batch, and resolve.

- ``GET /api/buckets/{id}/tree{/prefix}``: the files whose path starts with ``prefix``
  (lexically, as on the Hub: ``logs`` also matches ``logs.json``), sorted by path; with
  ``recursive=false`` one level below the prefix's directory, with ``directory`` entries.
  Pages of ``TREE_PAGE`` entries, the next one named by ``Link: <...>; rel="next"`` with a
  cursor that is the last path sent, so files added or removed between pages never shift one.
- ``POST /api/buckets/{id}/paths-info`` ``{"paths": [...]}``: the files among them.
- ``POST /api/buckets/{id}/batch``, NDJSON ``addFile`` / ``copyFile`` / ``deleteFile`` lines:
  an ``addFile`` names a Xet file that a shard uploaded with this bucket's write token
  registered (or that the bucket holds already); a ``copyFile`` names a file by Xet hash that
  the source repo or bucket, which the caller may read, holds. Operations that cannot be done
  are answered in ``failed`` (``{"path", "error"}``): 200 when some were done, 422 when none.
  The rest lands in one replacement of the bucket's index (:mod:`.buckets`); bytes no one
  names any more are freed at once. A malformed line refuses the whole batch (400). The body
  is read line by line as it arrives, each operation kept as only the fields it uses, and is
  bounded by bytes as well as by lines: past ``MAX_BATCH_BYTES`` (declared or read) or
  ``MAX_BATCH_LINES`` operations it is refused (413) with the bound in the reason, and the rest
  of it is never read.
- ``GET /api/buckets/{id}/events`` (``cursor=`` or ``since=``): the change feed as server-sent
  events, one session per request (see :mod:`.bucketfeed`).
- ``GET|HEAD /buckets/{id}/resolve/{path}``: as a repo's Xet file: ``X-Xet-Hash``, a ``Link``
  to the bucket's read-token route, ``X-Linked-Size``, and a redirect to the CDN listener,
  the bridge that serves the bytes (``Range`` works there and without redirects here).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import quote

from . import api_buckets, transfer
from .bucketfeed import HOLD_S, BadCursor
from .buckets import Put, check_bucket_path
from .context import Call
from .httpmessages import HttpError, Response, json_response
from .names import EntryNotFound, RepoMeta, RepoNotFound
from .objects import StorageError
from .usage import collect_garbage, lfs_held

TREE_PAGE = 1000
MAX_PATHS_INFO = 1000
MAX_BATCH_LINES = 10_000
MAX_BATCH_LINE = 64 * 1024
MAX_BATCH_BYTES = 16 * 1024 * 1024
MAX_MTIME_MS = 253_402_300_799_999  # the last millisecond of year 9999
_OP_FIELDS = ("type", "path", "xetHash", "mtime", "contentType", "sourceRepoType", "sourceRepoId")
_HASH = re.compile(r"[0-9a-f]{64}")
_SOURCE_TYPES = ("model", "dataset", "space", "bucket")


def file_item(path: str, entry: dict[str, Any]) -> dict[str, Any]:
    item = {"type": "file", "path": path, "size": entry["size"], "xetHash": entry["xetHash"],
            "mtime": entry["mtime"], "uploadedAt": entry["uploadedAt"]}
    if entry.get("contentType"):
        item["contentType"] = entry["contentType"]
    return item


def _level(files: dict[str, dict[str, Any]], prefix: str, recursive: bool) -> list[dict[str, Any]]:
    items: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in files if p.startswith(prefix)):
        entry = files[path]
        if recursive or path == prefix:
            items[path] = file_item(path, entry)
            continue
        if prefix.endswith("/") or not prefix:
            base = prefix
        elif path.startswith(prefix + "/"):
            base = prefix + "/"
        else:
            base = prefix[:prefix.rfind("/") + 1]
        head, sep, _ = path[len(base):].partition("/")
        if not sep:
            items[path] = file_item(path, entry)
            continue
        folder = base + head
        known = items.get(folder)
        if known is None or known["uploadedAt"] < entry["uploadedAt"]:
            items[folder] = {"type": "directory", "path": folder, "uploadedAt": entry["uploadedAt"]}
    return [items[k] for k in sorted(items)]


def tree(call: Call) -> Response:
    meta = api_buckets.readable(call)
    req = call.req
    prefix = call.params.get("path", "")
    # Recursive unless asked otherwise: the Hub lists a bucket whole when ``recursive`` is absent
    # (``list_bucket_tree`` sends it only when given; ``hf buckets list`` sends ``False``).
    recursive = req.param("recursive", "true").lower() in ("1", "true", "yes")
    items = _level(call.store.buckets.files(meta.repo_id), prefix, recursive)
    try:
        after = base64.urlsafe_b64decode(req.param("cursor")).decode() if req.param("cursor") else None
    except (ValueError, binascii.Error):
        raise HttpError(400, "Invalid cursor") from None
    if after is not None:
        items = [i for i in items if i["path"] > after]
    headers = {}
    if len(items) > TREE_PAGE:
        items = items[:TREE_PAGE]
        cursor = base64.urlsafe_b64encode(items[-1]["path"].encode()).decode()
        query = f"recursive={str(recursive).lower()}&cursor={quote(cursor)}"
        headers["Link"] = f'<{req.base_url}{req.path}?{query}>; rel="next"'
    req.notes["answer"] = "bucket-tree"  # a fault may add an entry (faultlayer)
    return json_response(items, headers=headers)


def paths_info(call: Call) -> Response:
    meta = api_buckets.readable(call)
    paths = call.json_object().get("paths")
    if not isinstance(paths, list) or len(paths) > MAX_PATHS_INFO or not all(isinstance(p, str) for p in paths):
        raise HttpError(400, f"Expected paths: [...] with at most {MAX_PATHS_INFO} strings")
    files = call.store.buckets.files(meta.repo_id)
    call.req.notes["answer"] = "bucket-tree"
    return json_response([file_item(p, files[p]) for p in dict.fromkeys(paths) if p in files])


# ------------------------------------------------------------------------------- the batch

def _too_large(call: Call, why: str) -> HttpError:
    call.req.body.abandon()
    return HttpError(413, why)


def _lines(call: Call) -> list[dict[str, Any]]:
    body = call.req.body
    too_many_bytes = f"A batch body holds at most {MAX_BATCH_BYTES} bytes: send its operations in smaller batches"
    if body.declared is not None and body.declared > MAX_BATCH_BYTES:
        raise _too_large(call, too_many_bytes)
    out: list[dict[str, Any]] = []
    while line := body.readline(MAX_BATCH_LINE):
        if body.count > MAX_BATCH_BYTES:
            raise _too_large(call, too_many_bytes)
        if not line.strip():
            continue
        if len(out) >= MAX_BATCH_LINES:
            raise _too_large(call, f"A batch holds at most {MAX_BATCH_LINES} operations")
        try:
            op = json.loads(line)
        except ValueError:  # not JSON, not UTF-8, or an integer past Python's digit limit
            raise HttpError(400, f"Line {len(out) + 1} of the batch is not valid JSON") from None
        if not isinstance(op, dict) or op.get("type") not in ("addFile", "copyFile", "deleteFile"):
            raise HttpError(400, f"Line {len(out) + 1}: expected type addFile, copyFile or deleteFile")
        try:
            check_bucket_path(op.get("path"))
        except StorageError as exc:
            raise HttpError(400, f"Line {len(out) + 1}: {exc}") from None
        mtime = op.get("mtime", 0)
        if op["type"] != "deleteFile" and not (isinstance(op.get("xetHash"), str) and type(mtime) is int
                                               and abs(mtime) <= MAX_MTIME_MS):
            raise HttpError(400, f"Line {len(out) + 1}: {op['type']} needs a xetHash and an integer mtime "
                                 f"(milliseconds, at most {MAX_MTIME_MS})")
        out.append({k: op[k] for k in _OP_FIELDS if k in op})  # nothing else of the line is held
    return out


def _source_holds(call: Call, op: dict[str, Any], file_hash: str, sha256: str) -> str | None:
    """Why the copy's source cannot give this file (None: it can)."""
    source_type, source_id = op.get("sourceRepoType"), op.get("sourceRepoId")
    if source_type not in _SOURCE_TYPES or not isinstance(source_id, str):
        return f"sourceRepoType must be one of {', '.join(_SOURCE_TYPES)}, with a sourceRepoId"
    try:
        if source_type == "bucket":
            source = api_buckets.readable(call, source_id)
            held = any(f["xetHash"] == file_hash for f in call.store.buckets.files(source.repo_id).values())
        else:
            meta = call.store.get_repo(source_type, source_id)
            if meta.private and not call.authorized():
                raise RepoNotFound("Repository not found")
            held = sha256 in lfs_held(call.store, source_type, meta.repo_id)
    except (StorageError, HttpError):
        return f"Source {source_type} {source_id} not found"
    return None if held else f"File {file_hash} not found in {source_type} {source_id}"


def _put(call: Call, meta: RepoMeta, op: dict[str, Any], files: dict[str, dict[str, Any]]) -> Put | str:
    """The file to name, or why it cannot be named."""
    xet = call.hub.xet
    file_hash = op["xetHash"].lower()
    record = xet.file_record(file_hash) if xet is not None and _HASH.fullmatch(file_hash) else None
    if record is None or call.store.objects.lfs_size(record.sha256) != record.size:
        return f"File {op['xetHash'][:80]} not found in Xet storage"
    if op["type"] == "addFile":
        held = any(f["xetHash"] == file_hash for f in files.values())
        assert xet is not None
        if not held and not xet.uploaded_by(f"bucket/{meta.repo_id}", file_hash):
            return f"File {file_hash} was not uploaded to this bucket"
    else:
        why = _source_holds(call, op, file_hash, record.sha256)
        if why is not None:
            return why
    content_type = op.get("contentType") if isinstance(op.get("contentType"), str) else None
    return Put(op["path"], file_hash, record.size, record.sha256, int(op.get("mtime") or 0), content_type)


def batch(call: Call) -> Response:
    meta = api_buckets.writable(call)
    ops = _lines(call)
    buckets = call.store.buckets
    with buckets.lock(meta.repo_id):
        files = buckets.files(meta.repo_id)
        puts: list[Put] = []
        deletes: list[str] = []
        failed: list[dict[str, str]] = []
        for op in ops:
            if op["type"] == "deleteFile":
                deletes.append(op["path"])
                continue
            put = _put(call, meta, op, files)
            if isinstance(put, str):
                failed.append({"path": op["path"], "error": put})
            else:
                puts.append(put)
        removed = buckets.apply(meta.repo_id, puts, deletes) if puts or deletes else []
    if removed:
        collect_garbage(call.store, force=removed)
    status = 422 if failed and not (puts or deletes) else 200
    return json_response({"success": not failed, "processed": len(ops), "succeeded": len(ops) - len(failed),
                          "failed": failed}, status)


# ------------------------------------------------------------------------------- downloads

def resolve(call: Call) -> Response:
    """``GET``/``HEAD /buckets/{ns}/{name}/resolve/{path}``."""
    meta = api_buckets.readable(call)
    path = call.params["path"]
    entry = call.store.buckets.files(meta.repo_id).get(path)
    if entry is None:
        raise EntryNotFound(f"Entry not found: {path}")
    sha256, size = entry["sha256"], int(entry["size"])
    headers = {"ETag": f'"{entry["xetHash"]}"', "X-Linked-Etag": f'"{entry["xetHash"]}"',
               "X-Linked-Size": str(size), "X-Xet-Hash": entry["xetHash"],
               "Link": f'<{api_buckets.read_token_url(call, meta)}>; rel="xet-auth"'}
    if call.hub.lfs_redirect and call.hub.cdn_url:
        ns, name = meta.repo_id.split("/")
        cdn_path = f"/buckets/{quote(ns)}/{quote(name)}/resolve/{quote(path)}"
        expires, sig = call.hub.signer.sign("cdn", cdn_path, sha256, size)
        headers["Location"] = (f"{call.hub.cdn_url}{cdn_path}?oid={sha256}&size={size}"
                               f"&expires={expires}&signature={sig}")
        return Response(302, b"", headers, "text/plain")
    return transfer.file_answer(call, call.store.objects.lfs_path(sha256), size, headers)


# ------------------------------------------------------------------------------- the change feed

def events(call: Call) -> Response:
    """``GET /api/buckets/{ns}/{name}/events``: one session of the change feed (:mod:`.bucketfeed`)."""
    meta = api_buckets.readable(call)
    req = call.req
    cursor = req.param("cursor") or None
    since_ms = None
    if req.param("since") and cursor is None:
        try:
            since_ms = int(datetime.fromisoformat(req.param("since").replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            raise HttpError(400, "since must be an ISO 8601 instant") from None
    try:
        session = call.store.buckets.feed.read(meta.repo_id, cursor, since_ms, HOLD_S)
    except BadCursor as exc:
        raise HttpError(400, str(exc)) from None
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in session)
    return Response(200, body.encode(), {"Cache-Control": "no-cache"}, "text/event-stream")
