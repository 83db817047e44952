"""Content-addressed, crash-safe storage for the local Hub.

Layout under ``data_dir``::

    objects/blobs/ab/<sha1>      regular file contents, keyed by git blob oid
    objects/lfs/ab/<sha256>      LFS object contents, keyed by sha256 (shared by all repos)
    objects/trees/ab/<sha1>      directory listings (JSON), keyed by git tree oid
    objects/commits/ab/<sha1>    commits (JSON), keyed by a git-like commit sha1
    repos/<type>s/<ns>/<name>/meta.json, refs.json    visibility and branch/tag heads
    tmp/                         partial writes; wiped at startup

Every object is written to ``tmp/``, fsynced and moved into place with ``os.replace``;
refs are replaced last, so a crash mid-commit leaves the previous head intact and at
worst some unreferenced objects behind.

Example:

    >>> store = Storage("/tmp/hubdata")
    >>> store.create_repo("model", "me/ckpts", private=False)
    >>> head = store.resolve("model", "me/ckpts", "main")
    >>> sha = store.commit("model", "me/ckpts", "main",
    ...                    [AddBlob("a.txt", b"hi")], title="add a")
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, BinaryIO, NamedTuple

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock; the lock is best effort
    fcntl = None  # type: ignore[assignment]

AUTHOR = "local-user"
EMPTY_TREE_OID = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
REPO_TYPES = ("model", "dataset", "space")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_REF_RE = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}$")
COPY_CHUNK = 8 * 1024 * 1024

# Mirrors the .gitattributes the Hub puts in every new repo.
LFS_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib",
    "*.lfs.*", "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot",
    "*.parquet", "*.pb", "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors",
    "saved_model/**/*", "*.tar.*", "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip",
    "*.zst", "*tfevents*",
)
GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in LFS_PATTERNS).encode()


class StorageError(Exception):
    """An operation was refused; ``status`` and ``code`` say how to report it over HTTP."""

    status = 400
    code: str | None = None


class RepoNotFound(StorageError):
    status = 404
    code = "RepoNotFound"


class RevisionNotFound(StorageError):
    status = 404
    code = "RevisionNotFound"


class EntryNotFound(StorageError):
    status = 404
    code = "EntryNotFound"


class Conflict(StorageError):
    status = 409


class StaleParent(StorageError):
    status = 412


class BadContent(StorageError):
    status = 400


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git object id


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def check_repo_id(repo_id: str) -> tuple[str, str]:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_NAME_RE.match(p) and ".." not in p for p in parts):
        raise StorageError(f"Invalid repo id {repo_id!r}: expected namespace/name")
    return parts[0], parts[1]


def check_path(path: str) -> str:
    """Refuse paths that could leave the repo or confuse git (absolute, ``..``, empty parts)."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\0" in path
        or any(p in ("", ".", "..", ".git") for p in parts)
    ):
        raise StorageError(f"Invalid path in repo: {path!r}")
    return path


def check_ref_name(name: str) -> str:
    if not _REF_RE.match(name) or ".." in name or name.endswith(("/", ".lock")) or "//" in name:
        raise StorageError(f"Invalid ref name {name!r}")
    return name


class TreeEntry(NamedTuple):
    name: str
    kind: str  # "file" or "directory"
    oid: str  # git blob oid (of the LFS pointer for LFS files) or git tree oid
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
class RepoMeta:
    repo_type: str
    repo_id: str
    private: bool
    created_at: str


# Commit operations, already decoded from the wire format.
@dataclass(frozen=True)
class AddBlob:
    path: str
    data: bytes


@dataclass(frozen=True)
class AddLfs:
    path: str
    oid: str
    size: int | None  # None: a copy of an object already stored


@dataclass(frozen=True)
class Delete:
    path: str
    folder: bool


Operation = AddBlob | AddLfs | Delete


class _LRU:
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


def _git_tree_sort_key(entry: TreeEntry) -> bytes:
    name = entry.name.encode()
    return name + b"/" if entry.kind == "directory" else name


def _tree_oid(entries: list[TreeEntry]) -> str:
    body = b"".join(
        (b"40000 " if e.kind == "directory" else b"100644 ") + e.name.encode() + b"\0" + bytes.fromhex(e.oid)
        for e in sorted(entries, key=_git_tree_sort_key)
    )
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()  # noqa: S324 - git object id


class _MutDir:
    """A directory being edited by a commit; untouched subtrees stay as TreeEntry references."""

    def __init__(self, entries: list[TreeEntry]) -> None:
        self.children: dict[str, TreeEntry | _MutDir] = {e.name: e for e in entries}


class Storage:
    """All repos of one local Hub; safe for concurrent use by many threads of one process."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = Path(data_dir)
        self.tmp = self.root / "tmp"
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fh: IO[bytes] | None = self._lock_data_dir()
        for sub in ("objects/blobs", "objects/lfs", "objects/trees", "objects/commits", "repos"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # Leftovers of writes torn by a crash: never referenced, safe to drop.
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._trees = _LRU(8192)
        self._listings = _LRU(64)
        self._commits = _LRU(4096)
        self._reach = _LRU(64)
        self._write_object(self.root / "objects/trees" / EMPTY_TREE_OID[:2] / EMPTY_TREE_OID, b"[]")

    def _lock_data_dir(self) -> IO[bytes] | None:
        # Two servers on one data dir would each serialize commits on their own: refuse the second.
        if fcntl is None:
            return None
        fh = open(self.root / "lock", "ab")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise StorageError(f"data dir {self.root} is in use by another local hub") from None
        return fh

    def close(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    # ---------------------------------------------------------------- low-level writes
    def tmp_file(self) -> tuple[Path, BinaryIO]:
        path = self.tmp / uuid.uuid4().hex
        return path, open(path, "xb")

    def _install(self, tmp_path: Path, fh: BinaryIO, dest: Path) -> None:
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp_path, dest)

    def _write_object(self, dest: Path, data: bytes) -> None:
        if dest.exists():
            return
        tmp_path, fh = self.tmp_file()
        try:
            fh.write(data)
            self._install(tmp_path, fh, dest)
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()

    def _write_json_atomic(self, dest: Path, value: Any) -> None:
        tmp_path, fh = self.tmp_file()
        try:
            fh.write(json.dumps(value, indent=1, sort_keys=True).encode())
            self._install(tmp_path, fh, dest)
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()
        # Refs and metadata are what make a commit visible: make the rename itself durable.
        with contextlib.suppress(OSError):
            dir_fd = os.open(dest.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    # ---------------------------------------------------------------- objects
    def blob_path(self, oid: str) -> Path:
        return self.root / "objects/blobs" / oid[:2] / oid

    def lfs_path(self, sha256: str) -> Path:
        return self.root / "objects/lfs" / sha256[:2] / sha256

    def lfs_size(self, sha256: str) -> int | None:
        if not _SHA256_RE.match(sha256):
            return None
        try:
            return self.lfs_path(sha256).stat().st_size
        except FileNotFoundError:
            return None

    def put_blob(self, data: bytes) -> str:
        oid = git_blob_oid(data)
        self._write_object(self.blob_path(oid), data)
        return oid

    def put_lfs_stream(self, sha256: str, size: int, read: Callable[[int], bytes]) -> None:
        """Store an LFS object from ``read`` (a socket reader), refusing it unless it hashes to ``sha256``.

        Nothing is stored when the bytes are short, long or wrong.
        """
        if not _SHA256_RE.match(sha256):
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
            self._install(tmp_path, fh, self.lfs_path(sha256))
        finally:
            fh.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()

    def read_tree(self, oid: str) -> list[TreeEntry]:
        cached = self._trees.get(oid)
        if cached is not None:
            return cached
        raw = json.loads((self.root / "objects/trees" / oid[:2] / oid).read_bytes())
        entries = [TreeEntry(*item) for item in raw]
        self._trees.put(oid, entries)
        return entries

    def _put_tree(self, entries: list[TreeEntry]) -> str:
        entries = sorted(entries, key=lambda e: e.name)
        oid = _tree_oid(entries)
        self._write_object(self.root / "objects/trees" / oid[:2] / oid, json.dumps(entries).encode())
        self._trees.put(oid, entries)
        return oid

    def read_commit(self, oid: str) -> Commit:
        cached = self._commits.get(oid)
        if cached is not None:
            return cached
        raw = json.loads((self.root / "objects/commits" / oid[:2] / oid).read_bytes())
        commit = Commit(
            oid=oid,
            tree=raw["tree"],
            parents=tuple(raw["parents"]),
            author=raw["author"],
            time=raw["time"],
            title=raw["title"],
            message=raw["message"],
        )
        self._commits.put(oid, commit)
        return commit

    def _put_commit(self, tree: str, parents: list[str], title: str, message: str) -> str:
        now = int(time.time())
        body = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        ident = f"{AUTHOR} <{AUTHOR}@localhub> {now} +0000"
        body += f"author {ident}\ncommitter {ident}\n\n{title}\n"
        if message:
            body += f"\n{message}\n"
        raw = body.encode()
        oid = hashlib.sha1(b"commit %d\0" % len(raw) + raw).hexdigest()  # noqa: S324 - git object id
        record = {"tree": tree, "parents": parents, "author": AUTHOR, "time": now, "title": title,
                  "message": message}
        self._write_object(self.root / "objects/commits" / oid[:2] / oid, json.dumps(record).encode())
        return oid

    def commit_exists(self, oid: str) -> bool:
        return bool(_SHA1_RE.match(oid)) and (self.root / "objects/commits" / oid[:2] / oid).exists()

    # ---------------------------------------------------------------- repos and refs
    def _repo_dir(self, repo_type: str, repo_id: str) -> Path:
        if repo_type not in REPO_TYPES:
            raise RepoNotFound(f"Unknown repo type {repo_type!r}")
        ns, name = check_repo_id(repo_id)
        return self.root / "repos" / f"{repo_type}s" / ns / name

    def repo_lock(self, repo_type: str, repo_id: str) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault((repo_type, repo_id), threading.RLock())

    def get_repo(self, repo_type: str, repo_id: str) -> RepoMeta:
        try:
            raw = json.loads((self._repo_dir(repo_type, repo_id) / "meta.json").read_bytes())
        except (FileNotFoundError, StorageError):
            raise RepoNotFound(f"Repository {repo_id} not found") from None
        return RepoMeta(repo_type, repo_id, bool(raw["private"]), raw["createdAt"])

    def create_repo(self, repo_type: str, repo_id: str, private: bool) -> RepoMeta:
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            if (repo_dir / "meta.json").exists():
                raise Conflict("You already created this model repo")
            repo_dir.mkdir(parents=True, exist_ok=True)
            # Like the Hub: a new repo starts with one commit holding .gitattributes.
            blob = self.put_blob(GITATTRIBUTES)
            tree = self._put_tree([TreeEntry(".gitattributes", "file", blob, len(GITATTRIBUTES), None)])
            head = self._put_commit(tree, [], "initial commit", "")
            self._write_json_atomic(repo_dir / "refs.json", {"heads": {"main": head}, "tags": {}})
            created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            self._write_json_atomic(repo_dir / "meta.json", {"private": private, "createdAt": created})
        return self.get_repo(repo_type, repo_id)

    def set_private(self, repo_type: str, repo_id: str, private: bool) -> None:
        with self.repo_lock(repo_type, repo_id):
            meta = self.get_repo(repo_type, repo_id)
            self._write_json_atomic(
                self._repo_dir(repo_type, repo_id) / "meta.json",
                {"private": private, "createdAt": meta.created_at},
            )

    def delete_repo(self, repo_type: str, repo_id: str) -> None:
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            self.get_repo(repo_type, repo_id)
            # Rename first so the repo vanishes atomically, then remove at leisure.
            graveyard = self.tmp / f"deleted-{uuid.uuid4().hex}"
            os.replace(repo_dir, graveyard)
            shutil.rmtree(graveyard, ignore_errors=True)

    def refs(self, repo_type: str, repo_id: str) -> dict[str, dict[str, str]]:
        self.get_repo(repo_type, repo_id)
        raw = json.loads((self._repo_dir(repo_type, repo_id) / "refs.json").read_bytes())
        return {"heads": dict(raw["heads"]), "tags": dict(raw["tags"])}

    def _write_refs(self, repo_type: str, repo_id: str, refs: dict[str, dict[str, str]]) -> None:
        self._write_json_atomic(self._repo_dir(repo_type, repo_id) / "refs.json", refs)

    def resolve(self, repo_type: str, repo_id: str, revision: str) -> str:
        """Commit sha of a branch, tag or (full) commit sha; raises RevisionNotFound."""
        refs = self.refs(repo_type, repo_id)
        for prefix, kind in (("refs/heads/", "heads"), ("refs/tags/", "tags")):
            if revision.startswith(prefix) and revision[len(prefix):] in refs[kind]:
                return refs[kind][revision[len(prefix):]]
        if revision in refs["heads"]:
            return refs["heads"][revision]
        if revision in refs["tags"]:
            return refs["tags"][revision]
        if self.commit_exists(revision) and self._reachable(refs, revision):
            return revision
        raise RevisionNotFound(f"Invalid rev id: {revision}")

    def _reachable(self, refs: dict[str, dict[str, str]], oid: str) -> bool:
        # A sha is only visible through the repo that holds it (objects are shared between repos).
        # The reachable set is cached by the ref tips it was computed from.
        tips = tuple(sorted({*refs["heads"].values(), *refs["tags"].values()}))
        seen = self._reach.get(tips)
        if seen is None:
            seen = set()
            stack = list(tips)
            while stack:
                current = stack.pop()
                if current in seen:
                    continue
                seen.add(current)
                stack.extend(self.read_commit(current).parents)
            self._reach.put(tips, seen)
        return oid in seen

    def create_branch(self, repo_type: str, repo_id: str, branch: str, start: str | None) -> None:
        check_ref_name(branch)
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if branch in refs["heads"]:
                raise Conflict(f"Reference already exists: refs/heads/{branch}")
            refs["heads"][branch] = self.resolve(repo_type, repo_id, start or "main")
            self._write_refs(repo_type, repo_id, refs)

    def delete_branch(self, repo_type: str, repo_id: str, branch: str) -> None:
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if branch not in refs["heads"]:
                raise RevisionNotFound(f"Branch {branch} not found")
            if branch == "main":
                raise StorageError("Cannot delete the default branch")
            del refs["heads"][branch]
            self._write_refs(repo_type, repo_id, refs)

    def create_tag(self, repo_type: str, repo_id: str, tag: str, revision: str) -> str:
        check_ref_name(tag)
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if tag in refs["tags"]:
                raise Conflict(f"Tag {tag} already exists")
            target = self.resolve(repo_type, repo_id, revision)
            refs["tags"][tag] = target
            self._write_refs(repo_type, repo_id, refs)
            return target

    def delete_tag(self, repo_type: str, repo_id: str, tag: str) -> None:
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if tag not in refs["tags"]:
                raise RevisionNotFound(f"Tag {tag} not found")
            del refs["tags"][tag]
            self._write_refs(repo_type, repo_id, refs)

    def log(self, head: str) -> Iterator[Commit]:
        """First-parent history, newest first."""
        current: str | None = head
        while current:
            commit = self.read_commit(current)
            yield commit
            current = commit.parents[0] if commit.parents else None

    # ---------------------------------------------------------------- trees
    def entry(self, commit_oid: str, path: str) -> TreeEntry | None:
        """The entry at ``path`` in a commit; ``path == ""`` is the root directory."""
        tree = self.read_commit(commit_oid).tree
        current = TreeEntry("", "directory", tree, 0, None)
        for part in [p for p in path.split("/") if p]:
            if current.kind != "directory":
                return None
            match = next((e for e in self.read_tree(current.oid) if e.name == part), None)
            if match is None:
                return None
            current = match
        return current

    def listing(self, tree_oid: str, prefix: str, recursive: bool) -> list[tuple[str, TreeEntry]]:
        """(full path, entry) pairs under a tree, directories before their contents.

        Cached by tree oid: trees are immutable, so a cached listing can never go stale.
        """
        key = (tree_oid, prefix, recursive)
        cached = self._listings.get(key)
        if cached is not None:
            return cached
        out: list[tuple[str, TreeEntry]] = []

        def walk(oid: str, base: str) -> None:
            for e in self.read_tree(oid):
                full = f"{base}{e.name}"
                out.append((full, e))
                if recursive and e.kind == "directory":
                    walk(e.oid, full + "/")

        walk(tree_oid, f"{prefix}/" if prefix else "")
        self._listings.put(key, out)
        return out

    # ---------------------------------------------------------------- commits
    def commit(
        self,
        repo_type: str,
        repo_id: str,
        branch: str,
        operations: list[Operation],
        title: str,
        message: str = "",
        parent_commit: str | None = None,
    ) -> str:
        """Apply ``operations`` on top of ``branch`` and move the branch; returns the new commit sha."""
        for op in operations:
            check_path(op.path.rstrip("/") if isinstance(op, Delete) else op.path)
            if isinstance(op, AddLfs):
                stored = self.lfs_size(op.oid)
                if stored is None:
                    raise BadContent(f"LFS object {op.oid} for {op.path} was never uploaded")
                if op.size is not None and stored != op.size:
                    raise BadContent(f"LFS object {op.oid} has {stored} bytes, commit says {op.size}")
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if branch not in refs["heads"]:
                raise RevisionNotFound(f"Invalid rev id: {branch} is not a branch")
            head = refs["heads"][branch]
            if parent_commit is not None and not (len(parent_commit) >= 5 and head.startswith(parent_commit)):
                raise StaleParent("A commit has happened since. Please refresh and try again.")
            root = _MutDir(self.read_tree(self.read_commit(head).tree))
            for op in operations:
                self._apply(root, op)
            tree = self._write_mut(root) or self._put_tree([])
            new = self._put_commit(tree, [head], title, message)
            refs["heads"][branch] = new
            self._write_refs(repo_type, repo_id, refs)
            return new

    def _load(self, node: TreeEntry | _MutDir) -> _MutDir:
        return node if isinstance(node, _MutDir) else _MutDir(self.read_tree(node.oid))

    def _apply(self, root: _MutDir, op: Operation) -> None:
        parts = op.path.strip("/").split("/")
        node = root
        for i, part in enumerate(parts[:-1]):
            child = node.children.get(part)
            if child is None:
                if isinstance(op, Delete):
                    raise EntryNotFound(self._missing_message(op))
                child = _MutDir([])
            elif isinstance(child, TreeEntry) and child.kind == "file":
                raise BadContent(f"Cannot write {op.path}: {'/'.join(parts[: i + 1])} is a file")
            child = self._load(child)
            node.children[part] = child
            node = child
        name = parts[-1]
        existing = node.children.get(name)
        is_dir = isinstance(existing, _MutDir) or (
            isinstance(existing, TreeEntry) and existing.kind == "directory"
        )
        if isinstance(op, Delete):
            if existing is None or is_dir != op.folder:
                raise EntryNotFound(self._missing_message(op))
            del node.children[name]
            return
        if is_dir:
            raise BadContent(f"Cannot write file {op.path}: a folder has that name")
        if isinstance(op, AddBlob):
            oid = self.put_blob(op.data)
            node.children[name] = TreeEntry(name, "file", oid, len(op.data), None)
        else:
            size = self.lfs_size(op.oid)
            assert size is not None  # checked before taking the lock
            pointer_oid = git_blob_oid(lfs_pointer(op.oid, size))
            node.children[name] = TreeEntry(name, "file", pointer_oid, size, op.oid)

    @staticmethod
    def _missing_message(op: Delete) -> str:
        kind = "folder" if op.folder else "file"
        return f"A {kind} with this name doesn't exist: {op.path}"

    def _write_mut(self, node: _MutDir) -> str | None:
        entries: list[TreeEntry] = []
        for name, child in node.children.items():
            if isinstance(child, _MutDir):
                oid = self._write_mut(child)
                if oid is not None:  # git has no empty directories
                    entries.append(TreeEntry(name, "directory", oid, 0, None))
            else:
                entries.append(child)
        return self._put_tree(entries) if entries else None
