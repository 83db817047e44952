"""The Hub's Xet endpoints: the CAS connection info that ``hf_xet`` asks for.

``GET /api/{type}s/{repo}/xet-{read|write}-token/{rev}`` answers ``casUrl``,
``accessToken`` and ``exp`` in JSON and the same in ``X-Xet-Cas-Url``,
``X-Xet-Access-Token`` and ``X-Xet-Token-Expiration`` headers. A write token needs write
access to the repo, a read token read access to the revision's files. ``resolve`` and
the listings name the same route (``Link: <...>; rel="xet-auth"``) for files in Xet.

``POST /api/{type}s/{repo}/lfs-files/duplicate`` is the Hub's server-side copy of Xet files
into another repo (``HfApi.copy_files`` across repos calls it on the source, then commits
the files by sha256): ``{"target": {"type", "name"}, "files": [{"xetHash", "sha256",
"filename"}]}`` answers ``success``, ``processed``, ``succeeded`` and ``failed`` (one
``{"sha256", "error"}`` per file whose pair of hashes the source repo does not hold).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from .context import Call
from .httpmessages import HttpError, Response, json_response
from .names import RepoNotFound
from .usage import lfs_held
from .xet.tokens import mint


def token(call: Call) -> Response:
    scope = call.params["scope"]
    if call.hub.xet is None or call.hub.cas_url is None:
        raise HttpError(404, f"Not found: {call.req.method} {call.req.path}")
    if scope == "write":
        meta = call.repo(write=True)
    else:
        call.head(call.params["rev"])
        assert call.meta is not None
        meta = call.meta
        call.require_file_access(meta)
    access, exp = mint(call.hub.signer, scope, meta.repo_type, meta.repo_id, call.hub.xet_token_ttl)
    cas_url = call.hub.cas_url + call.hub.xet.cas_path()
    headers = {"X-Xet-Cas-Url": cas_url, "X-Xet-Access-Token": access, "X-Xet-Token-Expiration": str(exp)}
    return json_response({"casUrl": cas_url, "accessToken": access, "exp": exp}, headers=headers)


# The client sends batches of 500 (DUPLICATE_LFS_BATCH_SIZE); a longer list is refused whole.
MAX_DUPLICATE_FILES = 1000
_HASH = re.compile(r"[0-9a-f]{64}")
_TARGET_TYPES = ("model", "dataset", "space")


def duplicate(call: Call) -> Response:
    xet = call.hub.xet
    if xet is None:
        raise HttpError(404, f"Not found: {call.req.method} {call.req.path}")
    source = call.repo()
    call.require_file_access(source)
    body = call.json_object()
    target, files = body.get("target"), body.get("files")
    if not isinstance(target, dict) or target.get("type") not in _TARGET_TYPES \
            or not isinstance(target.get("name"), str):
        raise HttpError(400, "Expected target: {type: model|dataset|space, name: namespace/repo}")
    if not isinstance(files, list) or not files or len(files) > MAX_DUPLICATE_FILES:
        raise HttpError(400, f"Expected files: [...] with 1 to {MAX_DUPLICATE_FILES} entries")
    name = target["name"]
    call.require_write((target["type"], name))
    if name.count("/") != 1:
        raise RepoNotFound("Repository not found")
    call.store.get_repo(target["type"], name)  # RepoNotFound as on the Hub
    failed: list[dict[str, Any]] = []
    held = lfs_held(call.store, source.repo_type, source.repo_id)
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("sha256"), str) \
                or not isinstance(item.get("xetHash"), str):
            raise HttpError(400, "Each file needs a sha256 and a xetHash")
        sha256, file_hash = item["sha256"].lower(), item["xetHash"].lower()
        # Checked before either names a path in the store: both come from the caller.
        if not (_HASH.fullmatch(sha256) and _HASH.fullmatch(file_hash)) or sha256 not in held \
                or xet.xet_hash_of(sha256) != file_hash:
            failed.append({"sha256": item["sha256"], "error": "No file stored in Xet with this sha256 and xetHash"})
    # Only files the source repo holds (the caller may read it): a pair of hashes is no key to
    # another repo's files. Objects are shared by every repo here, so that is all a later commit needs.
    return json_response({"success": not failed, "processed": len(files), "succeeded": len(files) - len(failed),
                          "failed": failed})


def read_token_url(call: Call, revision: str) -> str:
    repo_type, _ = call.repo_ref()
    return (f"{call.req.base_url}/api/{repo_type}s/{quote(call.params['ns'])}/{quote(call.params['name'])}"
            f"/xet-read-token/{quote(revision, safe='')}")


def xet_hash(call: Call, sha256: str | None) -> str | None:
    """The Xet file hash of an LFS object uploaded through Xet (None with Xet off)."""
    if sha256 is None or call.hub.xet is None:
        return None
    return call.hub.xet.xet_hash_of(sha256)
