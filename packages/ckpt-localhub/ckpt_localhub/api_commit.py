"""The two steps of a commit: ``preupload`` (which files go through LFS, which are ignored,
which are already there) and the NDJSON ``commit`` itself."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from .context import Call, repo_url
from .gitobjects import GitIgnore, is_lfs
from .httpmessages import HttpError, Response, json_response
from .names import InvalidPath, check_path
from .storage import AddBlob, AddLfs, Delete, Operation

# One NDJSON line holds one regular file, base64-encoded; the client sends files of 10 MiB
# and more through LFS, so a line this long is not a commit the Hub would take either.
MAX_COMMIT_LINE = 64 * 1024 * 1024
MAX_PREUPLOAD_FILES = 1000


def preupload(call: Call) -> Response:
    meta = call.repo(write=True)
    store = call.store
    head = store.resolve(meta.repo_type, meta.repo_id, call.params["rev"])
    payload = call.json_object()
    files = payload.get("files")
    if not isinstance(files, list) or len(files) > MAX_PREUPLOAD_FILES:
        raise HttpError(400, f"Expected {{files: [...]}} with at most {MAX_PREUPLOAD_FILES} files")
    given = payload.get("gitIgnore")
    # A .gitignore in the commit (sent as gitIgnore) wins over the one in the repo.
    ignore = GitIgnore.parse(given) if isinstance(given, str) else store.gitignore(head)
    attributes = store.attributes(head)
    answer = []
    for item in files:
        if not isinstance(item, dict):
            raise HttpError(400, "Each file needs a path and a size")
        path, size = item.get("path"), item.get("size", 0)
        if not isinstance(path, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise HttpError(400, "Each file needs a path and a size")
        check_path(path)
        try:
            sample = base64.b64decode(item.get("sample") or "")
        except (ValueError, binascii.Error):
            raise HttpError(400, f"Invalid sample for {path}") from None
        result: dict[str, Any] = {
            "path": path,
            "uploadMode": "lfs" if is_lfs(path, size, sample, attributes) else "regular",
            "shouldIgnore": ignore is not None and ignore.ignores(path),
        }
        entry = store.entry(head, path)
        if entry is not None and entry.kind == "file":
            result["oid"] = entry.lfs or entry.oid
        answer.append(result)
    return json_response({"files": answer, "commitOid": head})


def _operation(call: Call, key: str, value: dict[str, Any]) -> Operation | dict[str, Any]:
    """One decoded NDJSON line: an operation, or the header's value."""
    if key == "header":
        return value
    path = value["path"]
    if not isinstance(path, str):
        raise TypeError("path")
    if key == "file":
        if value.get("encoding", "base64") != "base64":
            raise HttpError(400, f"Unsupported encoding for {path}")
        # Stored as it streams in: the commit holds ids, not bytes (unused objects are harmless).
        return AddBlob(path, call.store.objects.put_blob(base64.b64decode(value["content"], validate=True)))
    if key == "lfsFile":
        if value.get("algo", "sha256") != "sha256":
            raise HttpError(400, f"Unsupported LFS algo for {path}")
        size = value.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
            raise TypeError("size")
        return AddLfs(path, str(value["oid"]), size)
    if key in ("deletedFile", "deletedFolder"):
        return Delete(path, folder=key == "deletedFolder")
    raise HttpError(400, f"Unknown commit operation {key!r}")


def commit(call: Call) -> Response:
    meta = call.repo(write=True)
    if call.req.flag("create_pr"):
        raise HttpError(400, "Pull requests are not supported by the local Hub")
    header: dict[str, Any] | None = None
    operations: list[Operation] = []
    n = 0
    while line := call.req.body.readline(MAX_COMMIT_LINE):
        n += 1
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            decoded = _operation(call, item["key"], item["value"])
        except (HttpError, InvalidPath):
            raise
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
            raise HttpError(400, f"Malformed commit payload at line {n}") from None
        if isinstance(decoded, dict):
            header = decoded
        else:
            operations.append(decoded)
    if header is None or not str(header.get("summary") or "").strip():
        raise HttpError(400, "A commit needs a header line with a non-empty summary")
    parent = header.get("parentCommit")
    oid = call.store.commit(
        meta.repo_type, meta.repo_id, call.params["rev"], operations,
        title=str(header["summary"]), message=str(header.get("description") or ""),
        parent_commit=str(parent) if parent else None,
    )
    url = f"{repo_url(call.req.base_url, meta.repo_type, meta.repo_id)}/commit/{oid}"
    return json_response({"success": True, "commitOid": oid, "commitUrl": url, "hookOutput": ""})
