"""Storage Buckets in the local Hub's data dir: mutable, unversioned maps from paths to Xet files.

Layout under ``data_dir``::

    buckets/<ns>/<name>/meta.json    the id as spelled at creation, visibility, creation date
    buckets/<ns>/<name>/files.json   every file: path -> xetHash, size, sha256, mtime, uploadedAt
    buckets/<ns>/<name>/moved.json   in the dir of a moved bucket's old id: {"to": its new id}

A file's bytes are not here: they are the Xet CAS's (``xet/``), rebuilt once into the LFS
store under their sha256, shared with every repo and bucket that names them, as everywhere in
the local Hub. A bucket only names them, so a copy by Xet hash costs no bytes.

``files.json`` is replaced whole (a temporary file, fsync, ``os.replace``) under the bucket's
lock, so a reader sees the bucket before or after a batch, never half of one; the Hub promises
less (its batches are not transactional), which no client can tell apart. Ids are
case-insensitive as repo ids are: the directory is the lower-cased id.

Example:

    >>> from .objects import ObjectStore
    >>> buckets = BucketStore(ObjectStore(Path("hubdata")))
    >>> buckets.create("me/ckpts", private=True).private
    True
    >>> buckets.apply("me/ckpts", [Put("a/b.bin", "ab" * 32, 3, "cd" * 32, 0, None)], [])
    []
    >>> sorted(buckets.files("ME/ckpts")), buckets.usage("me/ckpts")
    (['a/b.bin'], (3, 1))
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .bucketfeed import ChangeFeed
from .names import Conflict, RepoExists, RepoMeta, RepoMoved, RepoNotFound, check_repo_id
from .objects import LRU, ObjectStore, StorageError

MAX_BUCKET_PATH = 1024
_MOVED = "moved.json"


def iso(ms: float) -> str:
    """Milliseconds since the epoch as the Hub writes dates: ``2026-03-01T12:00:00.123Z``."""
    when = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def now_ms() -> int:
    return int(datetime.now(timezone.utc).timestamp() * 1000)


def check_bucket_path(path: Any) -> str:
    """A path in a bucket: relative, no empty, ``.`` or ``..`` parts, no NUL; StorageError otherwise."""
    if not isinstance(path, str) or not path or len(path) > MAX_BUCKET_PATH or path.startswith("/") \
            or "\0" in path or any(p in ("", ".", "..") for p in path.split("/")):
        raise StorageError(f"Invalid path in bucket: {str(path)[:200]!r}")
    return path


@dataclass(frozen=True)
class Put:
    """A file named into a bucket (an ``addFile`` or a ``copyFile``)."""

    path: str
    xet_hash: str
    size: int
    sha256: str
    mtime_ms: int
    content_type: str | None


class BucketStore:
    """The buckets of one local Hub; safe for concurrent use by many threads of one process."""

    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects
        self.root = objects.root / "buckets"
        self.root.mkdir(exist_ok=True)
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()
        self._files = LRU(32)
        self.feed = ChangeFeed()
        """What each batch changed, for ``/events`` (in memory: a restart answers old cursors ``reset``)."""

    # ---------------------------------------------------------------- buckets
    def _dir(self, bucket_id: str) -> Path:
        ns, name = check_repo_id(bucket_id)
        return self.root / ns.lower() / name.lower()

    def lock(self, bucket_id: str) -> threading.RLock:
        with self._guard:
            return self._locks.setdefault(bucket_id.lower(), threading.RLock())

    def get(self, bucket_id: str) -> RepoMeta:
        """The bucket's metadata; RepoMoved (its new id) or RepoNotFound."""
        try:
            raw = json.loads((self._dir(bucket_id) / "meta.json").read_bytes())
        except (FileNotFoundError, StorageError):
            moved = self._moved_to(bucket_id)
            if moved is not None:
                raise RepoMoved(moved) from None
            raise RepoNotFound("Bucket not found") from None
        return RepoMeta("bucket", str(raw["id"]), bool(raw["private"]), str(raw["createdAt"]))

    def _moved_to(self, bucket_id: str) -> str | None:
        current = bucket_id
        for _ in range(16):
            try:
                current = str(json.loads((self._dir(current) / _MOVED).read_bytes())["to"])
            except (FileNotFoundError, StorageError, ValueError, KeyError):
                return None
            if (self._dir(current) / "meta.json").exists():
                return current
        return None

    def _write_meta(self, meta: RepoMeta) -> None:
        self.objects.write_json_atomic(self._dir(meta.repo_id) / "meta.json",
                                       {"id": meta.repo_id, "private": meta.private, "createdAt": meta.created_at})

    def create(self, bucket_id: str, private: bool) -> RepoMeta:
        """A new, empty bucket; RepoExists when any spelling of it exists."""
        bucket_dir = self._dir(bucket_id)
        with self.lock(bucket_id):
            if (bucket_dir / "meta.json").exists():
                raise RepoExists("You already created this bucket", self.get(bucket_id))
            with contextlib.suppress(FileNotFoundError):
                (bucket_dir / _MOVED).unlink()
            bucket_dir.mkdir(parents=True, exist_ok=True)
            self.objects.write_json_atomic(bucket_dir / "files.json", {})
            meta = RepoMeta("bucket", bucket_id, private, iso(now_ms()))
            self._write_meta(meta)  # last: the bucket exists once it has its metadata
        return meta

    def set_private(self, bucket_id: str, private: bool) -> RepoMeta:
        with self.lock(bucket_id):
            meta = self.get(bucket_id)
            meta = RepoMeta("bucket", meta.repo_id, private, meta.created_at)
            self._write_meta(meta)
        return meta

    def delete(self, bucket_id: str) -> set[str]:
        """Remove the bucket at once (a rename), then its dir; the sha256s it named."""
        with self.lock(bucket_id):
            self.get(bucket_id)
            held = {f["sha256"] for f in self.files(bucket_id).values()}
            self.feed.forget(bucket_id)
            graveyard = self.objects.tmp / f"deleted-{uuid.uuid4().hex}"
            os.replace(self._dir(bucket_id), graveyard)
            shutil.rmtree(graveyard, ignore_errors=True)
        return held

    def move(self, from_id: str, to_id: str) -> RepoMeta:
        source, target = self._dir(from_id), self._dir(to_id)
        first, second = sorted([from_id.lower(), to_id.lower()])
        with self.lock(first), self.lock(second):
            meta = self.get(from_id)
            self.feed.forget(from_id)
            if target != source and (target / "meta.json").exists():
                raise Conflict(f"A bucket called {self.get(to_id).repo_id} already exists")
            if target != source:
                with contextlib.suppress(FileNotFoundError):
                    (target / _MOVED).unlink()
                with contextlib.suppress(OSError):
                    target.rmdir()
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
            moved = RepoMeta("bucket", to_id, meta.private, meta.created_at)
            self._write_meta(moved)
            if target != source:
                source.mkdir(parents=True, exist_ok=True)
                self.objects.write_json_atomic(source / _MOVED, {"to": to_id})
        return moved

    def all(self) -> list[RepoMeta]:
        out = []
        for meta_path in sorted(self.root.glob("*/*/meta.json")):
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                raw = json.loads(meta_path.read_bytes())
                out.append(RepoMeta("bucket", str(raw["id"]), bool(raw["private"]), str(raw["createdAt"])))
        return out

    # ---------------------------------------------------------------- files
    def files(self, bucket_id: str) -> dict[str, dict[str, Any]]:
        """Every file of the bucket, by path (read-only: cached by the index file's stamp)."""
        path = self._dir(bucket_id) / "files.json"
        try:
            st = path.stat()
        except FileNotFoundError:
            self.get(bucket_id)  # RepoMoved or RepoNotFound
            raise RepoNotFound("Bucket not found") from None
        key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
        found: dict[str, dict[str, Any]] | None = self._files.get(key)
        if found is None:
            found = json.loads(path.read_bytes())
            self._files.put(key, found)
        return found

    def apply(self, bucket_id: str, puts: list[Put], deletes: list[str]) -> list[str]:
        """Name ``puts`` and remove ``deletes`` in one replacement of the index; the sha256s no
        longer named by this bucket (to free, unless something else holds them)."""
        with self.lock(bucket_id):
            self.get(bucket_id)
            before = self.files(bucket_id)
            after = dict(before)
            uploaded = iso(now_ms())
            changes: list[dict[str, Any]] = []
            for path in deletes:
                if after.pop(path, None) is not None:
                    changes.append({"path": path, "op": "delete"})
            for put in puts:
                entry = {"xetHash": put.xet_hash, "size": put.size, "sha256": put.sha256,
                         "mtime": iso(put.mtime_ms), "uploadedAt": uploaded}
                if put.content_type:
                    entry["contentType"] = put.content_type
                changes.append({"path": put.path, "op": "update" if put.path in after else "add", "size": put.size,
                                "xetHash": put.xet_hash, "mtime": entry["mtime"], "uploadedAt": uploaded})
                after[put.path] = entry
            self.objects.write_json_atomic(self._dir(bucket_id) / "files.json", after)
            self.feed.record(bucket_id, changes)
        kept = {f["sha256"] for f in after.values()}
        return sorted({f["sha256"] for f in before.values()} - kept)

    def usage(self, bucket_id: str) -> tuple[int, int]:
        """(bytes, files) of the bucket as the Hub reports them: each file's size once per path."""
        files = self.files(bucket_id)
        return sum(int(f["size"]) for f in files.values()), len(files)

    def updated_at(self, bucket_id: str, created_at: str) -> str:
        """When the bucket last changed, as far as this server knows (the feed's ``since=``)."""
        last = self.feed.last_change_ms.get(bucket_id.lower())
        if last is not None:
            return iso(last)
        return max([created_at, *(str(f["uploadedAt"]) for f in self.files(bucket_id).values())])

    def held_sha256(self, bucket_id: str) -> frozenset[str]:
        try:
            return frozenset(f["sha256"] for f in self.files(bucket_id).values())
        except StorageError:
            return frozenset()

    def held_everywhere(self) -> set[str]:
        """sha256s any bucket names: what freeing must keep."""
        held: set[str] = set()
        for meta in self.all():
            held |= self.held_sha256(meta.repo_id)
        return held
