"""The local Hub's content-addressed object store: blobs, LFS objects, trees and commits on disk.

Layout under ``data_dir``::

    objects/blobs/ab/<sha1>      regular file contents, keyed by git blob id
    objects/lfs/ab/<sha256>      LFS object contents, keyed by sha256 (shared by all repos)
    objects/trees/ab/<sha1>      directory listings (JSON), keyed by git tree id
    objects/commits/ab/<sha1>    commits (JSON), keyed by a git-like commit sha1
    tmp/                         partial writes; wiped at startup

Every object is written to ``tmp/``, fsynced and moved into place with ``os.replace``,
so an object file is either whole or absent. Objects are immutable and may be shared by
any number of repos; an object nobody references (a crash mid-commit) is harmless.

Example:

    >>> store = ObjectStore(Path("hubdata"))
    >>> blob = store.put_blob(b"hi")
    >>> store.blob_path(blob.oid).read_bytes()
    b'hi'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol

from .gitobjects import EMPTY_TREE_OID, TreeItem, blob_oid, tree_oid

AUTHOR = "local-user"
COPY_CHUNK = 8 * 1024 * 1024
SHA1_RE = re.compile(r"[0-9a-f]{40}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")


class Collector(Protocol):
    """Another holder of this store's objects that frees its share when they go: the Xet
    CAS (:class:`.xet.store.XetStore`), whose xorbs hold the bytes of LFS objects pushed
    through it. Declared here, at the bottom, so that the repos (above the objects, below
    the CAS) name what they hold without importing the layer above them."""

    def collect(self, removed: set[str], grace_s: float) -> int:
        """Free what only the objects ``removed`` (sha256s) used; bytes freed."""
        ...


class StorageError(Exception):
    """An operation was refused; ``status`` and ``code`` say how to report it over HTTP."""

    status = 400
    code: str | None = None


class BadContent(StorageError):
    status = 400


class TreeEntry(NamedTuple):
    name: str
    kind: str  # "file" or "directory"
    oid: str  # git blob id (of the LFS pointer for LFS files) or git tree id
    size: int
    lfs: str | None  # sha256 for LFS files


@dataclass(frozen=True)
class Commit:
    oid: str
    tree: str
    parents: tuple[str, ...]
    author: str
    time: int
    title: str
    message: str

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.time, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass(frozen=True)
class StoredBlob:
    """A regular file's bytes already in the store (written while a commit streamed in)."""

    oid: str
    size: int
    sha256: str


class LRU:
    """A small thread-safe LRU map; trees and commits are immutable, so entries never go stale."""

    def __init__(self, maxsize: int) -> None:
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._max = maxsize
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class ObjectStore:
    """Objects under ``root/objects``, written atomically; safe for many threads of one process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"
        for sub in ("objects/blobs", "objects/lfs", "objects/trees", "objects/commits"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        # Leftovers of writes torn by a crash: never referenced, safe to drop.
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self._trees = LRU(8192)
        self._commits = LRU(4096)
        self.write(self._path("trees", EMPTY_TREE_OID), b"[]")

    # ---------------------------------------------------------------- atomic writes
    def _path(self, kind: str, oid: str) -> Path:
        return self.root / "objects" / kind / oid[:2] / oid

    def tmp_file(self) -> tuple[Path, BinaryIO]:
        path = self.tmp / uuid.uuid4().hex
        return path, open(path, "xb")

    def install(self, tmp_path: Path, fh: BinaryIO, dest: Path) -> None:
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp_path, dest)

    def write(self, dest: Path, data: bytes) -> None:
        if dest.exists():
            return
        tmp_path, fh = self.tmp_file()
        try:
            fh.write(data)
            self.install(tmp_path, fh, dest)
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()

    def write_json_atomic(self, dest: Path, value: Any) -> None:
        """Replace a small mutable file (refs, repo metadata) so readers see old or new, whole."""
        tmp_path, fh = self.tmp_file()
        try:
            fh.write(json.dumps(value, indent=1, sort_keys=True).encode())
            self.install(tmp_path, fh, dest)
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()
        # Refs and metadata are what make a commit visible: make the rename itself durable.
        fsync_dir(dest.parent)

    # ---------------------------------------------------------------- blobs and LFS objects
    def blob_path(self, oid: str) -> Path:
        return self._path("blobs", oid)

    def lfs_path(self, sha256: str) -> Path:
        return self._path("lfs", sha256)

    def lfs_size(self, sha256: str) -> int | None:
        if not SHA256_RE.fullmatch(sha256):
            return None
        try:
            return self.lfs_path(sha256).stat().st_size
        except FileNotFoundError:
            return None

    def put_blob(self, data: bytes) -> StoredBlob:
        oid = blob_oid(data)
        self.write(self.blob_path(oid), data)
        return StoredBlob(oid, len(data), hashlib.sha256(data).hexdigest())

    def blob_to_lfs(self, blob: StoredBlob) -> None:
        """Store a regular blob's bytes as an LFS object too (git's clean filter, server side)."""
        dest = self.lfs_path(blob.sha256)
        if dest.exists():
            return
        tmp_path, fh = self.tmp_file()
        try:
            with open(self.blob_path(blob.oid), "rb") as src:
                shutil.copyfileobj(src, fh, COPY_CHUNK)
            self.install(tmp_path, fh, dest)
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()

    def put_lfs_stream(self, sha256: str, size: int, read: Callable[[int], bytes]) -> None:
        """Store an LFS object from ``read`` (a socket reader), refusing it unless it hashes to ``sha256``.

        Nothing is stored when the bytes are short, long or wrong.
        """
        if not SHA256_RE.fullmatch(sha256):
            raise BadContent(f"Invalid LFS oid {sha256!r}")
        tmp_path, fh = self.tmp_file()
        try:
            digest = hashlib.sha256()
            received = 0
            while True:
                chunk = read(COPY_CHUNK)
                if not chunk:
                    break
                received += len(chunk)
                if received > size:
                    raise BadContent(f"LFS upload is larger than the announced {size} bytes")
                digest.update(chunk)
                fh.write(chunk)
            if received != size:
                raise BadContent(f"LFS upload has {received} bytes, {size} announced")
            if digest.hexdigest() != sha256:
                raise BadContent(f"LFS upload does not hash to its oid {sha256}")
            self.install(tmp_path, fh, self.lfs_path(sha256))
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()

    # ---------------------------------------------------------------- trees
    def read_tree(self, oid: str) -> list[TreeEntry]:
        cached = self._trees.get(oid)
        if cached is not None:
            return cached
        raw = json.loads(self._path("trees", oid).read_bytes())
        entries = [TreeEntry(*item) for item in raw]
        self._trees.put(oid, entries)
        return entries

    def put_tree(self, entries: list[TreeEntry]) -> str:
        entries = sorted(entries, key=lambda e: e.name)
        oid = tree_oid(TreeItem(e.name, e.oid, e.kind == "directory") for e in entries)
        self.write(self._path("trees", oid), json.dumps(entries).encode())
        self._trees.put(oid, entries)
        return oid

    # ---------------------------------------------------------------- commits
    def read_commit(self, oid: str) -> Commit:
        cached = self._commits.get(oid)
        if cached is not None:
            return cached
        raw = json.loads(self._path("commits", oid).read_bytes())
        commit = Commit(oid=oid, tree=raw["tree"], parents=tuple(raw["parents"]), author=raw["author"],
                        time=raw["time"], title=raw["title"], message=raw["message"])
        self._commits.put(oid, commit)
        return commit

    def put_commit(self, tree: str, parents: list[str], title: str, message: str, when: int | None = None) -> str:
        """A new commit, dated now or ``when`` (a rewrite of history keeps each commit's date)."""
        now = int(time.time()) if when is None else when
        body = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        ident = f"{AUTHOR} <{AUTHOR}@localhub> {now} +0000"
        body += f"author {ident}\ncommitter {ident}\n\n{title}\n"
        if message:
            body += f"\n{message}\n"
        raw = body.encode()
        oid = hashlib.sha1(b"commit %d\0" % len(raw) + raw, usedforsecurity=False).hexdigest()
        record = {"tree": tree, "parents": parents, "author": AUTHOR, "time": now, "title": title,
                  "message": message}
        self.write(self._path("commits", oid), json.dumps(record).encode())
        return oid
