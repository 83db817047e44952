"""A Hub-compatible HTTP server that the real ``huggingface_hub`` client talks to unchanged.

It speaks the subset of the Hugging Face Hub API that huggingface_hub 2.x uses for
model (and dataset/space) repos: repo create/info/delete, tree listing, paths-info,
refs, commits, branches, tags, preupload, the LFS batch API with uploads to this
server, the NDJSON commit endpoint and ``/resolve`` downloads with Range support. No
Xet: clients must set ``HF_HUB_DISABLE_XET=1`` to upload.

Example (in-process, e.g. in a test or a demo):

    >>> from huggingface_hub import HfApi
    >>> with LocalHub("/tmp/hubdata") as hub:
    ...     api = HfApi(endpoint=hub.url, token="anything")
    ...     api.create_repo("me/ckpts")
    ...     api.upload_file(path_or_fileobj=b"hi", path_in_repo="a.txt", repo_id="me/ckpts")

Example (a separate process; prints its URL as the first stdout line):

    $ python -m ckpt_action.localhub --data-dir /tmp/hubdata --port 0 --port-file /tmp/port
    http://127.0.0.1:41233

Auth: with ``token`` set, a wrong bearer token gets 401; anonymous requests may read
public repos only (private ones answer 404 RepoNotFound) and every write gets 401.
Without ``token`` everything is open. LFS upload hrefs carry an HMAC signature
instead of a token, as the real protocol sends those PUTs unauthenticated.

Access log: one JSON line per request ``{"ts", "method", "path", "status", "bytes_in",
"bytes_out", "ms"}``; a connection dropped by a ``reset`` fault logs status ``"reset"``.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from .faults import FaultSet, Rule
from .storage import (
    AUTHOR,
    LFS_PATTERNS,
    REPO_TYPES,
    AddBlob,
    AddLfs,
    Commit,
    Conflict,
    Delete,
    EntryNotFound,
    Operation,
    RepoMeta,
    RepoNotFound,
    Storage,
    StorageError,
    TreeEntry,
    lfs_pointer,
)

TREE_PAGE = 1000
TREE_PAGE_EXPANDED = 50
COMMITS_PAGE = 50
LFS_THRESHOLD = 10 * 1024 * 1024
UPLOAD_URL_TTL_S = 24 * 3600
_DRAIN_LIMIT = 64 * 1024 * 1024
_SEND_CHUNK = 4 * 1024 * 1024


class HttpError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}


class _Reset(Exception):
    """Raised to drop the connection on purpose (a ``reset`` fault)."""


@dataclass
class FileBody:
    path: Path
    offset: int
    length: int


@dataclass
class Response:
    status: int = 200
    body: bytes | FileBody = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


def _json(value: Any, status: int = 200, headers: dict[str, str] | None = None,
          content_type: str = "application/json") -> Response:
    return Response(status, json.dumps(value).encode(), headers or {}, content_type)


class _Body:
    """The request body, de-chunked, counted, and optionally cut short by a reset fault."""

    def __init__(self, rfile: Any, length: int | None, chunked: bool) -> None:
        self._rfile = rfile
        self._left = length if length is not None else 0
        self._chunked = chunked
        self._chunk_left = 0
        self._done = not chunked and not self._left
        self.count = 0
        self.cut_after: int | None = None

    @property
    def present(self) -> bool:
        return self._chunked or self._left > 0

    def _raw(self, n: int) -> bytes:
        data = self._rfile.read(n)
        if not data:
            raise ConnectionError("client closed the connection mid-body")
        return data

    def read(self, n: int = -1) -> bytes:
        if self._done:
            return b""
        if n < 0:
            parts = []
            while chunk := self.read(_SEND_CHUNK):
                parts.append(chunk)
            return b"".join(parts)
        if self.cut_after is not None:
            if self.count >= self.cut_after:
                raise _Reset()
            n = min(n, self.cut_after - self.count)
        if self._chunked:
            if self._chunk_left == 0:
                line = self._rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self._rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    self._done = True
                    return b""
                self._chunk_left = size
            data = self._raw(min(n, self._chunk_left))
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                self._rfile.readline(16)
        else:
            data = self._raw(min(n, self._left))
            self._left -= len(data)
            self._done = self._left == 0
        self.count += len(data)
        return data

    def drain(self) -> bool:
        """Discard what is left; False when too much is left to be worth reading."""
        if not self._chunked and self._left > _DRAIN_LIMIT:
            return False
        total = 0
        while chunk := self.read(_SEND_CHUNK):
            total += len(chunk)
            if total > _DRAIN_LIMIT:
                return False
        return True


def _is_lfs_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    for pattern in LFS_PATTERNS:
        if "/" in pattern:
            if fnmatch.fnmatch(path, pattern.replace("**/", "*")):
                return True
        elif fnmatch.fnmatch(name, pattern):
            return True
    return False


def _tree_item(path: str, entry: TreeEntry) -> dict[str, Any]:
    if entry.kind == "directory":
        return {"type": "directory", "oid": entry.oid, "size": 0, "path": path}
    item: dict[str, Any] = {"type": "file", "oid": entry.oid, "size": entry.size, "path": path}
    if entry.lfs is not None:
        item["lfs"] = {"oid": entry.lfs, "size": entry.size,
                       "pointerSize": len(lfs_pointer(entry.lfs, entry.size))}
    return item


def _commit_item(commit: Commit) -> dict[str, Any]:
    return {"id": commit.oid, "title": commit.title, "message": commit.message, "date": commit.date,
            "authors": [{"user": commit.author, "avatar": ""}]}


class HubApp:
    """Request handling independent of the socket plumbing: storage, auth, faults, logging."""

    def __init__(self, data_dir: str | os.PathLike[str], token: str | None = None,
                 faults: str | os.PathLike[str] | None = None,
                 access_log: str | os.PathLike[str] | None = None) -> None:
        self.store = Storage(data_dir)
        self.token = token
        self.faults = FaultSet(faults)
        self.secret = secrets.token_bytes(32)
        self._log_lock = threading.Lock()
        self._log: IO[str] | None = (
            open(access_log, "a", encoding="utf-8") if access_log else None
        )

    def close(self) -> None:
        self.store.close()
        with self._log_lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def log(self, record: dict[str, Any]) -> None:
        if self._log is None:
            return
        with self._log_lock:
            if self._log is not None:
                self._log.write(json.dumps(record) + "\n")
                self._log.flush()

    def sign(self, oid: str, size: int, expires: int) -> str:
        return hmac.new(self.secret, f"{oid}:{size}:{expires}".encode(), hashlib.sha256).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ckpt-action-localhub/1"
    timeout = 300
    # Headers and body go out in separate writes; with Nagle on, each small answer waits
    # for the client's delayed ACK (~40 ms per request on loopback).
    disable_nagle_algorithm = True
    server: _HubServer

    # ------------------------------------------------------------------ plumbing
    def log_message(self, format: str, *args: Any) -> None:
        pass  # the JSON access log replaces the stdlib's stderr lines

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    @property
    def app(self) -> HubApp:
        return self.server.app

    def _handle(self) -> None:
        started = time.monotonic()
        url = urlsplit(self.path)
        self.raw_path = url.path
        self.query = parse_qs(url.query, keep_blank_values=True)
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        self.body = _Body(self.rfile, max(length, 0) if not chunked else None, chunked)
        self.bytes_out = 0
        self.headers_sent = False
        self.repo_commit: str | None = None
        self.rule: Rule | None = None
        status: int | str = 0
        rule: Rule | None = None
        if length < 0:
            self.close_connection = True
            self._send(self._error(400, "Invalid Content-Length"), None)
            return
        try:
            rule = self.app.faults.take(self.command, self.raw_path)
            self.rule = rule
            if rule is not None and rule.delay_s:
                time.sleep(rule.delay_s)
            if rule is not None and rule.reset is not None and self.body.present:
                self.body.cut_after = rule.reset
                self.body.read()  # raises _Reset once N bytes are in
                raise _Reset()
            if rule is not None and rule.status is not None:
                extra: dict[str, str] = {}
                if rule.retry_after is not None:
                    extra["Retry-After"] = str(rule.retry_after)
                response = _json({"error": f"Injected fault: HTTP {rule.status}"}, rule.status, extra)
            else:
                try:
                    response = self._route()
                except HttpError as exc:
                    response = self._error(exc.status, exc.message, exc.code, exc.headers)
                except StorageError as exc:
                    headers: dict[str, str] = {}
                    if isinstance(exc, EntryNotFound) and self.repo_commit:
                        headers["X-Repo-Commit"] = self.repo_commit
                    response = self._error(exc.status, str(exc), exc.code, headers)
            if not self.body.drain():
                self.close_connection = True
            status = response.status
            self._send(response, rule)
        except _Reset:
            status = "reset"
            self._abort()
        except (ConnectionError, TimeoutError):
            status = status or "disconnected"
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill the server
            traceback.print_exc(file=sys.stderr)
            status = 500
            self.close_connection = True
            if not self.headers_sent:  # else the answer is already half out: just hang up
                try:
                    self._send(self._error(500, f"Internal error: {exc}"), None)
                except Exception:  # noqa: BLE001, S110 - the client is gone; nothing left to tell it
                    pass
        finally:
            self.app.log({
                "ts": round(time.time(), 3),
                "method": self.command,
                "path": self.path,
                "status": status,
                "bytes_in": self.body.count,
                "bytes_out": self.bytes_out,
                "ms": round((time.monotonic() - started) * 1000, 1),
            })

    def _abort(self) -> None:
        # A FIN, not an RST: the client sees a truncated message ("peer closed connection"),
        # which is what a flaky network looks like to it.
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _error(self, status: int, message: str, code: str | None = None,
               headers: dict[str, str] | None = None) -> Response:
        headers = dict(headers or {})
        if code:
            headers["X-Error-Code"] = code
        safe = message.encode("ascii", "replace").decode()[:500]
        headers["X-Error-Message"] = safe.replace("\r", " ").replace("\n", " ")
        return _json({"error": message}, status, headers)

    def _send(self, response: Response, rule: Rule | None) -> None:
        body = response.body
        length = body.length if isinstance(body, FileBody) else len(body)
        self.send_response(response.status)
        headers = {"Content-Type": response.content_type, **response.headers, "Content-Length": str(length)}
        if rule is not None and rule.etag is not None:
            for key in ("ETag", "X-Linked-Etag"):
                headers[key] = rule.etag
        for key, value in headers.items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        cut = rule.reset if rule is not None and rule.reset is not None else None
        if self.command == "HEAD" and cut is not None:
            raise _Reset()
        self.end_headers()
        self.headers_sent = True
        if self.command == "HEAD":
            return
        flip = length // 2 if rule is not None and rule.corrupt and length else None
        if isinstance(body, bytes):
            if flip is not None:
                body = body[:flip] + bytes([body[flip] ^ 0xFF]) + body[flip + 1:]
            if cut is not None:
                body = body[:cut]
            self.wfile.write(body)
            self.bytes_out += len(body)
        else:
            self._send_file(body, flip, cut)
        if cut is not None and cut < length:
            raise _Reset()

    def _send_file(self, body: FileBody, flip: int | None, cut: int | None) -> None:
        total = body.length if cut is None else min(cut, body.length)
        with open(body.path, "rb") as fh:
            if flip is None:
                sent = self.connection.sendfile(fh, body.offset, total)
                self.bytes_out += sent
                if sent != total:
                    raise ConnectionError("short sendfile")
                return
            fh.seek(body.offset)
            pos = 0
            while pos < total:
                chunk = fh.read(min(_SEND_CHUNK, total - pos))
                if not chunk:
                    raise ConnectionError("file shrank while sending")
                if pos <= flip < pos + len(chunk):
                    i = flip - pos
                    chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                self.wfile.write(chunk)
                pos += len(chunk)
                self.bytes_out += len(chunk)

    # ------------------------------------------------------------------ helpers
    @property
    def base_url(self) -> str:
        host = self.headers.get("Host")
        return f"http://{host}" if host else self.server.url

    def _auth(self) -> bool:
        """True when the caller is the (or any, without a server token) user; raises on a bad token."""
        header = self.headers.get("Authorization", "")
        given = header[7:].strip() if header.lower().startswith("bearer ") else None
        if self.app.token is None:
            return True
        if given is None:
            return False
        if not hmac.compare_digest(given.encode(), self.app.token.encode()):
            raise HttpError(401, "Invalid credentials in Authorization header")
        return True

    def _require_write(self) -> None:
        if not self._auth():
            raise HttpError(401, "You must be authenticated to perform this action (Invalid credentials)")

    def _repo(self, repo_type: str, repo_id: str, write: bool = False) -> RepoMeta:
        if write:
            self._require_write()
            return self.app.store.get_repo(repo_type, repo_id)
        authed = self._auth()
        meta = self.app.store.get_repo(repo_type, repo_id)
        if meta.private and not authed:
            raise RepoNotFound(f"Repository {repo_id} not found")
        return meta

    def _read_json(self) -> Any:
        raw = self.body.read()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise HttpError(400, "Request body is not valid JSON") from None

    def _param(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def _flag(self, name: str) -> bool:
        return self._param(name).lower() in ("1", "true", "yes")

    # ------------------------------------------------------------------ routing
    def _route(self) -> Response:
        raw = [s for s in self.raw_path.split("/")[1:]]
        if raw and raw[-1] == "" and len(raw) > 1:
            raw = raw[:-1]
        seg = [unquote(s) for s in raw]
        method = self.command
        if seg[:1] == ["api"]:
            return self._route_api(seg[1:], raw[1:], method)
        if seg[:1] == ["localhub-lfs"] and len(seg) == 2 and method == "PUT":
            return self._lfs_put(seg[1])
        repo_type = "model"
        if seg and seg[0] in ("datasets", "spaces"):
            repo_type = seg[0][:-1]
            seg, raw = seg[1:], raw[1:]
        if len(seg) == 6 and seg[1].endswith(".git") and seg[2:] == ["info", "lfs", "objects", "batch"]:
            if method == "POST":
                return self._lfs_batch(repo_type, f"{seg[0]}/{seg[1][:-4]}")
        if len(seg) >= 5 and seg[2] == "resolve" and method in ("GET", "HEAD"):
            path = "/".join(seg[4:])
            return self._resolve(repo_type, f"{seg[0]}/{seg[1]}", seg[3], path)
        raise HttpError(404, f"Not found: {method} {self.raw_path}")

    def _route_api(self, seg: list[str], raw: list[str], method: str) -> Response:
        if seg == ["whoami-v2"] and method == "GET":
            return self._whoami()
        if seg == ["repos", "create"] and method == "POST":
            return self._create_repo()
        if seg == ["repos", "delete"] and method == "DELETE":
            return self._delete_repo()
        if len(seg) >= 3 and seg[0].endswith("s") and seg[0][:-1] in REPO_TYPES:
            repo_type, repo_id, rest = seg[0][:-1], f"{seg[1]}/{seg[2]}", seg[3:]
            action = rest[0] if rest else ""
            arg = "/".join(rest[1:])
            routes: dict[tuple[str, str], Callable[[], Response]] = {
                ("GET", ""): lambda: self._repo_info(repo_type, repo_id, None),
                ("GET", "revision"): lambda: self._repo_info(repo_type, repo_id, arg),
                ("GET", "tree"): lambda: self._tree(repo_type, repo_id, rest[1], "/".join(rest[2:])),
                ("POST", "paths-info"): lambda: self._paths_info(repo_type, repo_id, arg),
                ("GET", "refs"): lambda: self._refs(repo_type, repo_id),
                ("GET", "commits"): lambda: self._commits(repo_type, repo_id, arg),
                ("POST", "branch"): lambda: self._create_branch(repo_type, repo_id, arg),
                ("DELETE", "branch"): lambda: self._delete_branch(repo_type, repo_id, arg),
                ("POST", "tag"): lambda: self._create_tag(repo_type, repo_id, arg),
                ("DELETE", "tag"): lambda: self._delete_tag(repo_type, repo_id, arg),
                ("POST", "preupload"): lambda: self._preupload(repo_type, repo_id, arg),
                ("POST", "commit"): lambda: self._commit(repo_type, repo_id, arg),
                ("PUT", "settings"): lambda: self._settings(repo_type, repo_id),
            }
            handler = routes.get((method, action))
            if handler is not None and (action != "tree" or len(rest) >= 2):
                return handler()
        raise HttpError(404, f"Not found: {method} {self.raw_path}")

    # ------------------------------------------------------------------ account and repos
    def _whoami(self) -> Response:
        if not self._auth() or not self.headers.get("Authorization"):
            raise HttpError(401, "Invalid credentials in Authorization header")
        return _json({
            "type": "user", "id": AUTHOR, "name": AUTHOR, "fullname": "Local Hub user",
            "email": None, "emailVerified": False, "isPro": False, "canPay": False, "orgs": [],
            "avatarUrl": "", "periodEnd": None,
            "auth": {"type": "access_token", "accessToken": {"displayName": "local-hub", "role": "write"}},
        })

    def _create_repo(self) -> Response:
        self._require_write()
        payload = self._read_json()
        repo_type = payload.get("type") or "model"
        if repo_type not in REPO_TYPES:
            raise HttpError(400, f"Unsupported repo type {repo_type!r}")
        name = payload.get("name")
        if not isinstance(name, str):
            raise HttpError(400, "Missing repo name")
        repo_id = f"{payload.get('organization') or AUTHOR}/{name}"
        private = payload.get("visibility", "private" if payload.get("private") else "public") != "public"
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        url = f"{self.base_url}/{prefix}{repo_id}"
        try:
            self.app.store.create_repo(repo_type, repo_id, private)
        except Conflict as exc:
            # The Hub's 409 carries the url too; create_repo(exist_ok=True) reads it.
            return _json({"error": str(exc), "url": url}, 409, {"X-Error-Message": str(exc)})
        return _json({"url": url, "name": repo_id, "id": repo_id})

    def _delete_repo(self) -> Response:
        self._require_write()
        payload = self._read_json()
        repo_type = payload.get("type") or "model"
        repo_id = f"{payload.get('organization') or AUTHOR}/{payload.get('name')}"
        self.app.store.delete_repo(repo_type, repo_id)
        return _json({})

    def _settings(self, repo_type: str, repo_id: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        payload = self._read_json()
        private = payload.get("private")
        if "visibility" in payload:
            private = payload["visibility"] != "public"
        if private is not None:
            self.app.store.set_private(repo_type, repo_id, bool(private))
        return _json({})

    def _repo_info(self, repo_type: str, repo_id: str, revision: str | None) -> Response:
        meta = self._repo(repo_type, repo_id)
        store = self.app.store
        sha = store.resolve(repo_type, repo_id, revision or "main")
        commit = store.read_commit(sha)
        blobs = self._flag("blobs")
        siblings = []
        for path, entry in store.listing(commit.tree, "", True):
            if entry.kind != "file":
                continue
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                sibling.update(size=entry.size, blobId=entry.oid)
                if entry.lfs:
                    sibling["lfs"] = {"sha256": entry.lfs, "size": entry.size,
                                      "pointerSize": len(lfs_pointer(entry.lfs, entry.size))}
            siblings.append(sibling)
        ns = repo_id.split("/")[0]
        info: dict[str, Any] = {
            "_id": hashlib.sha1(f"{repo_type}/{repo_id}".encode()).hexdigest()[:24],  # noqa: S324 - an id
            "id": repo_id, "author": ns, "sha": sha, "lastModified": commit.date,
            "createdAt": meta.created_at, "private": meta.private, "gated": False, "disabled": False,
            "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
        }
        if repo_type == "model":
            info["modelId"] = repo_id
        if repo_type == "space":
            info.update(sdk="static", runtime={"stage": "NO_APP_FILE"})
        return _json(info)

    # ------------------------------------------------------------------ reading trees
    def _head(self, repo_type: str, repo_id: str, revision: str) -> str:
        self._repo(repo_type, repo_id)
        sha = self.app.store.resolve(repo_type, repo_id, revision)
        self.repo_commit = sha
        return sha

    def _last_commit(self, head: str, path: str, oid: str) -> dict[str, str]:
        store = self.app.store
        last = store.read_commit(head)
        for commit in store.log(head):
            entry = store.entry(commit.oid, path)
            if entry is None or entry.oid != oid:
                break
            last = commit
        return {"id": last.oid, "title": last.title, "date": last.date}

    def _items(self, head: str, pairs: list[tuple[str, TreeEntry]], expand: bool) -> list[dict[str, Any]]:
        items = []
        for path, entry in pairs:
            item = _tree_item(path, entry)
            if expand:
                item["lastCommit"] = self._last_commit(head, path, entry.oid)
            items.append(item)
        rule = self.rule
        if rule is not None and rule.tree_escape is not None:
            data = b"escape\n"
            items.append({"type": "file", "oid": hashlib.sha1(data).hexdigest(),  # noqa: S324
                          "size": len(data), "path": rule.tree_escape})
        return items

    def _tree(self, repo_type: str, repo_id: str, revision: str, path: str) -> Response:
        head = self._head(repo_type, repo_id, revision)
        path = path.strip("/")
        entry = self.app.store.entry(head, path)
        if entry is None or entry.kind != "directory":
            raise EntryNotFound(f"{path!r} does not exist or is not a directory at revision {revision}")
        recursive, expand = self._flag("recursive"), self._flag("expand")
        pairs = self.app.store.listing(entry.oid, path, recursive)
        size = TREE_PAGE_EXPANDED if expand else TREE_PAGE
        try:
            offset = int(base64.urlsafe_b64decode(self._param("cursor") or "MA==").decode())
        except (ValueError, binascii.Error):
            raise HttpError(400, "Invalid cursor") from None
        page = pairs[offset:offset + size]
        headers = {}
        if offset + size < len(pairs):
            cursor = base64.urlsafe_b64encode(str(offset + size).encode()).decode()
            query = (f"recursive={str(recursive).lower()}&expand={str(expand).lower()}"
                     f"&cursor={quote(cursor)}")
            headers["Link"] = f'<{self.base_url}{self.raw_path}?{query}>; rel="next"'
        return _json(self._items(head, page, expand), headers=headers)

    def _paths_info(self, repo_type: str, repo_id: str, revision: str) -> Response:
        head = self._head(repo_type, repo_id, revision)
        form = parse_qs(self.body.read().decode(), keep_blank_values=True)
        expand = (form.get("expand") or ["false"])[0].lower() in ("1", "true")
        pairs = []
        for path in dict.fromkeys(p.strip("/") for p in form.get("paths", [])):
            entry = self.app.store.entry(head, path) if path else None
            if entry is not None:
                pairs.append((path, entry))
        return _json(self._items(head, pairs, expand))

    def _refs(self, repo_type: str, repo_id: str) -> Response:
        self._repo(repo_type, repo_id)
        refs = self.app.store.refs(repo_type, repo_id)

        def fmt(kind: str, name: str, target: str) -> dict[str, str]:
            return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": target}

        answer: dict[str, Any] = {
            "branches": [fmt("heads", n, t) for n, t in sorted(refs["heads"].items())],
            "converts": [],
            "tags": [fmt("tags", n, t) for n, t in sorted(refs["tags"].items())],
        }
        if self._flag("include_prs"):
            answer["pullRequests"] = []
        return _json(answer)

    def _commits(self, repo_type: str, repo_id: str, revision: str) -> Response:
        head = self._head(repo_type, repo_id, revision or "main")
        try:
            page = max(0, int(self._param("p", "0")))
        except ValueError:
            raise HttpError(400, "Invalid page") from None
        start = page * COMMITS_PAGE
        items: list[dict[str, Any]] = []
        more = False
        for i, commit in enumerate(self.app.store.log(head)):
            if i >= start + COMMITS_PAGE:
                more = True
                break
            if i >= start:
                items.append(_commit_item(commit))
        headers = {}
        if more:
            headers["Link"] = f'<{self.base_url}{self.raw_path}?p={page + 1}>; rel="next"'
        return _json(items, headers=headers)

    # ------------------------------------------------------------------ refs
    def _create_branch(self, repo_type: str, repo_id: str, branch: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        payload = self._read_json()
        self.app.store.create_branch(repo_type, repo_id, branch, payload.get("startingPoint"))
        return _json({})

    def _delete_branch(self, repo_type: str, repo_id: str, branch: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        self.app.store.delete_branch(repo_type, repo_id, branch)
        return _json({})

    def _create_tag(self, repo_type: str, repo_id: str, revision: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        payload = self._read_json()
        tag = payload.get("tag")
        if not isinstance(tag, str) or not tag:
            raise HttpError(400, "Missing tag name")
        self.app.store.create_tag(repo_type, repo_id, tag, revision)
        return _json({})

    def _delete_tag(self, repo_type: str, repo_id: str, tag: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        self.app.store.delete_tag(repo_type, repo_id, tag)
        return _json({})

    # ------------------------------------------------------------------ uploads
    def _preupload(self, repo_type: str, repo_id: str, revision: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        head = self.app.store.resolve(repo_type, repo_id, revision)
        payload = self._read_json()
        files = payload.get("files")
        if not isinstance(files, list):
            raise HttpError(400, "Expected {files: [...]}")
        answer = []
        for item in files:
            path, size = item.get("path"), item.get("size", 0)
            if not isinstance(path, str) or not isinstance(size, int):
                raise HttpError(400, "Each file needs a path and a size")
            try:
                sample = base64.b64decode(item.get("sample") or "")
            except (ValueError, binascii.Error):
                raise HttpError(400, f"Invalid sample for {path}") from None
            lfs = size >= LFS_THRESHOLD or b"\0" in sample or _is_lfs_path(path)
            result: dict[str, Any] = {"path": path, "uploadMode": "lfs" if lfs else "regular",
                                      "shouldIgnore": False}
            entry = self.app.store.entry(head, path.strip("/"))
            if entry is not None and entry.kind == "file":
                result["oid"] = entry.lfs or entry.oid
            answer.append(result)
        return _json({"files": answer, "commitOid": head})

    def _lfs_batch(self, repo_type: str, repo_id: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        payload = self._read_json()
        if payload.get("operation") != "upload":
            raise HttpError(400, "Only the upload operation is supported")
        expires = int(time.time()) + UPLOAD_URL_TTL_S
        objects = []
        for obj in payload.get("objects") or []:
            oid, size = obj.get("oid"), obj.get("size")
            if not isinstance(oid, str) or not isinstance(size, int) or size < 0 or len(oid) != 64:
                objects.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                                "error": {"code": 422, "message": "Invalid oid or size"}})
                continue
            answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if self.app.store.lfs_size(oid) != size:
                sig = self.app.sign(oid, size, expires)
                href = f"{self.base_url}/localhub-lfs/{oid}?size={size}&expires={expires}&sig={sig}"
                answer["actions"] = {"upload": {"href": href, "header": {}, "expires_in": UPLOAD_URL_TTL_S}}
            objects.append(answer)
        return _json({"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
                     content_type="application/vnd.git-lfs+json")

    def _lfs_put(self, oid: str) -> Response:
        try:
            size = int(self._param("size"))
            expires = int(self._param("expires"))
        except ValueError:
            self.close_connection = True
            raise HttpError(403, "Upload URL is not signed") from None
        signature_ok = hmac.compare_digest(self._param("sig"), self.app.sign(oid, size, expires))
        if not signature_ok or expires < time.time():
            self.close_connection = True
            raise HttpError(403, "Upload URL signature is invalid or expired")
        length = self.headers.get("Content-Length")
        if length is not None and not self.body._chunked and int(length) != size:
            self.close_connection = True
            raise HttpError(400, f"Upload has Content-Length {length}, {size} announced")
        try:
            self.app.store.put_lfs_stream(oid, size, self.body.read)
        except StorageError:
            self.close_connection = True
            raise
        return _json({})

    def _commit(self, repo_type: str, repo_id: str, revision: str) -> Response:
        self._repo(repo_type, repo_id, write=True)
        if self._flag("create_pr"):
            raise HttpError(400, "Pull requests are not supported by the local Hub")
        header: dict[str, Any] | None = None
        operations: list[Operation] = []
        for n, line in enumerate(self.body.read().splitlines()):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                key, value = item["key"], item["value"]
                if key == "header":
                    header = value
                elif key == "file":
                    if value.get("encoding", "base64") != "base64":
                        raise HttpError(400, f"Unsupported encoding for {value['path']}")
                    operations.append(AddBlob(value["path"], base64.b64decode(value["content"])))
                elif key == "lfsFile":
                    if value.get("algo", "sha256") != "sha256":
                        raise HttpError(400, f"Unsupported LFS algo for {value['path']}")
                    operations.append(AddLfs(value["path"], value["oid"], value.get("size")))
                elif key in ("deletedFile", "deletedFolder"):
                    operations.append(Delete(value["path"], folder=key == "deletedFolder"))
                else:
                    raise HttpError(400, f"Unknown commit operation {key!r}")
            except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
                raise HttpError(400, f"Malformed commit payload at line {n + 1}") from None
        if header is None or not str(header.get("summary") or "").strip():
            raise HttpError(400, "A commit needs a header line with a non-empty summary")
        parent = header.get("parentCommit")
        oid = self.app.store.commit(
            repo_type, repo_id, revision, operations,
            title=str(header["summary"]), message=str(header.get("description") or ""),
            parent_commit=str(parent) if parent else None,
        )
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        url = f"{self.base_url}/{prefix}{repo_id}/commit/{oid}"
        return _json({"success": True, "commitOid": oid, "commitUrl": url, "hookOutput": ""})

    # ------------------------------------------------------------------ downloads
    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str) -> Response:
        head = self._head(repo_type, repo_id, revision)
        entry = self.app.store.entry(head, path) if path else None
        if entry is None or entry.kind != "file":
            raise EntryNotFound(f"Entry not found: {path}")
        store = self.app.store
        file_path = store.lfs_path(entry.lfs) if entry.lfs else store.blob_path(entry.oid)
        headers = {"X-Repo-Commit": head, "Accept-Ranges": "bytes", "ETag": f'"{entry.lfs or entry.oid}"'}
        if entry.lfs:
            headers["X-Linked-Etag"] = f'"{entry.lfs}"'
            headers["X-Linked-Size"] = str(entry.size)
        size = entry.size
        start, end = 0, size - 1
        status = 200
        range_header = self.headers.get("Range")
        if range_header:
            start, end = self._parse_range(range_header, size)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        return Response(status, FileBody(file_path, start, max(0, end - start + 1)), headers,
                        "application/octet-stream")

    @staticmethod
    def _parse_range(value: str, size: int) -> tuple[int, int]:
        unsatisfiable = HttpError(416, f"Range {value} not satisfiable",
                                  headers={"Content-Range": f"bytes */{size}"})
        unit, _, spec = value.partition("=")
        if unit.strip() != "bytes" or "," in spec:
            raise unsatisfiable
        first, _, last = spec.strip().partition("-")
        try:
            if first == "":
                suffix = int(last)
                start, end = max(0, size - suffix), size - 1
            else:
                start = int(first)
                end = min(int(last), size - 1) if last else size - 1
        except ValueError:
            raise unsatisfiable from None
        if start >= size or start > end:
            raise unsatisfiable
        return start, end


class _HubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: HubApp) -> None:
        super().__init__(address, _Handler)
        self.app = app
        host, port = self.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else host
        self.url = f"http://{host_text}:{port}"


def _write_port_file(port_file: str | os.PathLike[str], port: int) -> None:
    target = Path(port_file)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, target)


class LocalHub:
    """The local Hub in a background thread of this process.

    Example:

        >>> with LocalHub("/tmp/hubdata", token="secret") as hub:
        ...     print(hub.url)          # http://127.0.0.1:PORT
    """

    def __init__(self, data_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0,
                 faults: str | os.PathLike[str] | None = None, token: str | None = None,
                 access_log: str | os.PathLike[str] | None = None) -> None:
        self.app = HubApp(data_dir, token=token, faults=faults, access_log=access_log)
        try:
            self._server = _HubServer((host, port), self.app)
        except BaseException:
            self.app.close()
            raise
        self.data_dir = Path(data_dir)
        self.access_log = Path(access_log) if access_log else None
        self.port: int = self._server.server_address[1]
        self.url: str = self._server.url
        self._thread = threading.Thread(target=self._server.serve_forever, name="localhub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
        self.app.close()

    def __enter__(self) -> LocalHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_server(data_dir: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 0,
               port_file: str | os.PathLike[str] | None = None,
               access_log: str | os.PathLike[str] | None = None,
               faults: str | os.PathLike[str] | None = None, token: str | None = None) -> None:
    """Serve until SIGTERM/SIGINT. Prints the base URL as the first stdout line once listening.

    Raises ``FaultFileError`` for an unusable faults file and ``OSError`` when the port is taken.
    """
    hub = LocalHub(data_dir, host=host, port=port, faults=faults, token=token, access_log=access_log)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if port_file is not None:
            _write_port_file(port_file, hub.port)
        print(hub.url, flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        hub.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
