"""Crash-safe storage of the local Hub's repos: metadata, refs, commits and trees.

Layout under ``data_dir`` (objects are described in :mod:`.objects`)::

    objects/...                                     content-addressed, shared by all repos
    repos/<type>s/<ns>/<name>/meta.json, refs.json  visibility, gating and branch/tag heads
    lock                                            held while a server uses the dir

Repo ids are case-insensitive as on the Hub: the directory is the lower-cased id and
``meta.json`` keeps the spelling the repo was created with, which every answer uses.
Refs are replaced last, so a crash mid-commit leaves the previous head intact and at
worst some unreferenced objects behind.

Example:

    >>> store = Storage("hubdata")
    >>> meta = store.create_repo("model", "me/ckpts", private=False)
    >>> blob = store.objects.put_blob(b"hi")
    >>> sha = store.commit("model", "me/ckpts", "main", [AddBlob("a.txt", blob)], title="add a")
    >>> store.resolve("model", "ME/Ckpts", sha[:7]) == sha
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING

from .filelock import try_lock
from .gitobjects import (
    DEFAULT_GITATTRIBUTES,
    GitAttributes,
    GitIgnore,
    lfs_pointer_oid,
    parse_gitattributes,
)
from .objects import (
    LRU,
    SHA1_RE,
    BadContent,
    Commit,
    ObjectStore,
    StorageError,
    StoredBlob,
    TreeEntry,
)

if TYPE_CHECKING:
    from .xet.store import XetStore

__all__ = ["AddBlob", "AddLfs", "BadContent", "Commit", "Delete", "Operation", "RepoMeta", "Storage",
           "StorageError", "TreeEntry"]

REPO_TYPES = ("model", "dataset", "space")
GATED = (False, "auto", "manual")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_HEX_RE = re.compile(r"[0-9a-f]{7,40}")
_REF_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}")
# A repo's own .gitattributes / .gitignore are read at most this far (the Hub's limit is
# similar in spirit: they are small text files).
_RULES_FILE_LIMIT = 1024 * 1024
_DELETED = "deleted-lfs.json"  # sha256s permanently deleted from a repo (a JSON list)
_MOVED = "moved.json"  # in the dir of a moved repo's old id: {"to": its new id}
_MAX_MOVES = 16  # a chain of renames followed this far, no further
STALE_PARENT = "The branch was updated since you opened this page. Please refresh and try again."


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


class RepoExists(Conflict):
    """Any spelling of the repo exists already; ``meta`` is the repo that does."""

    def __init__(self, message: str, meta: RepoMeta) -> None:
        super().__init__(message)
        self.meta = meta


class RepoMoved(RepoNotFound):
    """The id names a repo that was moved (renamed): ``to`` is its id now. The Hub answers such
    ids with a same-host redirect; where an answer cannot redirect, it is RepoNotFound."""

    def __init__(self, to: str) -> None:
        super().__init__("Repository not found")
        self.to = to


class Forbidden(StorageError):
    status = 403


class StaleParent(StorageError):
    status = 412


class InvalidPath(StorageError):
    status = 422


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def check_repo_id(repo_id: str) -> tuple[str, str]:
    """``namespace/name`` split in two, or StorageError; ids without a namespace are refused."""
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_NAME_RE.fullmatch(p) and ".." not in p for p in parts):
        raise StorageError(f"Invalid repo id {repo_id!r}: expected namespace/name")
    return parts[0], parts[1]


def check_path(path: str) -> str:
    """Refuse paths that could leave the repo or confuse git (absolute, ``..``, ``.git`` or empty parts).

    As on the Hub, ``\\`` is an ordinary character (``folder/..\\..\\file`` is one file);
    only a path that starts with ``..\\`` stays refused, as the Hub refuses ``..\\ddd``
    (huggingface_hub's test_create_file_with_relative_path): read on Windows it leaves the repo.
    """
    parts = path.split("/")
    if (
        not path
        or path.startswith(("/", "..\\"))
        or "\0" in path
        or any(p in ("", ".", "..", ".git") for p in parts)
    ):
        raise InvalidPath(f"Invalid path in repo: {path!r}")
    return path


def check_ref_name(name: str, kind: str) -> str:
    if not _REF_RE.fullmatch(name) or ".." in name or name.endswith(("/", ".lock")) or "//" in name \
            or name.startswith("refs/"):
        raise StorageError(f"Invalid reference for a {kind}: {name}")
    return name


@dataclass(frozen=True)
class RepoMeta:
    repo_type: str
    repo_id: str  # the spelling the repo was created (or moved) with
    private: bool
    created_at: str
    gated: bool | str = False


# Commit operations, already decoded from the wire format.
@dataclass(frozen=True)
class AddBlob:
    path: str
    blob: StoredBlob


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


class _MutDir:
    """A directory being edited by a commit; untouched subtrees stay as TreeEntry references."""

    def __init__(self, entries: list[TreeEntry]) -> None:
        self.children: dict[str, TreeEntry | _MutDir] = {e.name: e for e in entries}


class Storage:
    """All repos of one local Hub; safe for concurrent use by many threads of one process."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = Path(data_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fh: IO[bytes] | None = self._lock_data_dir()
        self.objects = ObjectStore(self.root)
        self.xet: XetStore | None = None
        """The Xet side of the same objects, when the server has Xet on (freeing reaches it too)."""
        (self.root / "repos").mkdir(exist_ok=True)
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._listings = LRU(64)
        self._reach = LRU(64)
        self._lower_case_repo_dirs()

    def _lock_data_dir(self) -> IO[bytes] | None:
        # Two servers on one data dir would each serialize commits on their own: refuse the second.
        fh = open(self.root / "lock", "ab")
        try:
            locked = try_lock(fh.fileno())
        except OSError:
            locked = False
        if not locked:
            fh.close()
            raise StorageError(f"data dir {self.root} is in use by another local hub") from None
        return fh

    def _lower_case_repo_dirs(self) -> None:
        """Data dirs written before ids were case-insensitive keep repos under their spelling:
        move them to the lower-cased directory, remembering the spelling in meta.json."""
        for meta_path in sorted(self.root.glob("repos/*/*/*/meta.json")):
            repo_dir = meta_path.parent
            ns, name = repo_dir.parent.name, repo_dir.name
            raw = json.loads(meta_path.read_bytes())
            if "id" in raw:
                continue
            raw["id"] = f"{ns}/{name}"
            target = repo_dir.parent.parent / ns.lower() / name.lower()
            if target != repo_dir:
                if target.exists():
                    print(f"local-hub: warning: {raw['id']} and {target.parent.name}/{target.name} differ only "
                          "in case; keeping the latter", file=sys.stderr)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(repo_dir, target)
            self.objects.write_json_atomic(target / "meta.json", raw)

    def close(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    # ---------------------------------------------------------------- repos
    def _repo_dir(self, repo_type: str, repo_id: str) -> Path:
        if repo_type not in REPO_TYPES:
            raise RepoNotFound(f"Unknown repo type {repo_type!r}")
        ns, name = check_repo_id(repo_id)
        return self.root / "repos" / f"{repo_type}s" / ns.lower() / name.lower()

    def repo_lock(self, repo_type: str, repo_id: str) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault((repo_type, repo_id.lower()), threading.RLock())

    def get_repo(self, repo_type: str, repo_id: str) -> RepoMeta:
        try:
            repo_dir = self._repo_dir(repo_type, repo_id)
            raw = json.loads((repo_dir / "meta.json").read_bytes())
        except (FileNotFoundError, StorageError):
            moved = self._moved_to(repo_type, repo_id)
            if moved is not None:
                raise RepoMoved(moved) from None
            raise RepoNotFound("Repository not found") from None
        return RepoMeta(repo_type, raw.get("id", repo_id), bool(raw["private"]), raw["createdAt"],
                        raw.get("gated", False))

    def _moved_to(self, repo_type: str, repo_id: str) -> str | None:
        """The id a moved repo has now, following a bounded chain of moves; None if it was never moved."""
        current, seen = repo_id, 0
        while seen < _MAX_MOVES:
            try:
                repo_dir = self._repo_dir(repo_type, current)
                raw = json.loads((repo_dir / _MOVED).read_bytes())
            except (FileNotFoundError, StorageError, ValueError):
                break
            current, seen = str(raw["to"]), seen + 1
            if (self._repo_dir(repo_type, current) / "meta.json").exists():
                return current
        return None

    def _clear_moved(self, repo_dir: Path) -> None:
        """A name taken again (created, or moved onto) is a repo of its own, no longer a redirect."""
        with contextlib.suppress(FileNotFoundError):
            (repo_dir / _MOVED).unlink()
        with contextlib.suppress(OSError):
            repo_dir.rmdir()  # only when nothing else is there

    def _write_meta(self, repo_dir: Path, meta: RepoMeta) -> None:
        self.objects.write_json_atomic(repo_dir / "meta.json", {
            "id": meta.repo_id, "private": meta.private, "createdAt": meta.created_at, "gated": meta.gated})

    def create_repo(self, repo_type: str, repo_id: str, private: bool) -> RepoMeta:
        """A new repo with one commit holding the Hub's .gitattributes; RepoExists when any
        spelling of it exists."""
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            if (repo_dir / "meta.json").exists():
                raise RepoExists(f"You already created this {repo_type} repo", self.get_repo(repo_type, repo_id))
            self._clear_moved(repo_dir)
            repo_dir.mkdir(parents=True, exist_ok=True)
            blob = self.objects.put_blob(DEFAULT_GITATTRIBUTES)
            tree = self.objects.put_tree([TreeEntry(".gitattributes", "file", blob.oid, blob.size, None)])
            head = self.objects.put_commit(tree, [], "initial commit", "")
            self._write_refs(repo_dir, {"heads": {"main": head}, "tags": {}})
            self._write_meta(repo_dir, RepoMeta(repo_type, repo_id, private, _now()))
        return self.get_repo(repo_type, repo_id)

    def update_settings(self, repo_type: str, repo_id: str, private: bool | None = None,
                        gated: bool | str | None = None) -> RepoMeta:
        if gated is not None and gated not in GATED:
            raise StorageError(f"Invalid gated value {gated!r}: expected false, 'auto' or 'manual'")
        with self.repo_lock(repo_type, repo_id):
            meta = self.get_repo(repo_type, repo_id)
            meta = RepoMeta(repo_type, meta.repo_id, meta.private if private is None else private,
                            meta.created_at, meta.gated if gated is None else gated)
            self._write_meta(self._repo_dir(repo_type, repo_id), meta)
        return meta

    def delete_repo(self, repo_type: str, repo_id: str) -> None:
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            self.get_repo(repo_type, repo_id)
            # Rename first so the repo vanishes atomically, then remove at leisure.
            graveyard = self.objects.tmp / f"deleted-{uuid.uuid4().hex}"
            os.replace(repo_dir, graveyard)
            shutil.rmtree(graveyard, ignore_errors=True)

    def move_repo(self, repo_type: str, from_id: str, to_id: str) -> RepoMeta:
        source, target = self._repo_dir(repo_type, from_id), self._repo_dir(repo_type, to_id)
        first, second = sorted([(repo_type, from_id.lower()), (repo_type, to_id.lower())])
        with self.repo_lock(*first), self.repo_lock(*second):
            meta = self.get_repo(repo_type, from_id)
            if target != source and (target / "meta.json").exists():
                raise Conflict(f"A {repo_type} repository called {self.get_repo(repo_type, to_id).repo_id} "
                               "already exists")
            if target != source:
                self._clear_moved(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
            moved = RepoMeta(repo_type, to_id, meta.private, meta.created_at, meta.gated)
            self._write_meta(target, moved)
            if target != source:
                # The old id keeps working, as on the Hub: it answers with a redirect to the new one.
                source.mkdir(parents=True, exist_ok=True)
                self.objects.write_json_atomic(source / _MOVED, {"to": to_id})
            return moved

    # ---------------------------------------------------------------- permanently deleted objects
    def deleted_lfs(self, repo_type: str, repo_id: str) -> frozenset[str]:
        """sha256s of LFS objects permanently deleted from this repo (commits may still name them)."""
        try:
            raw = json.loads((self._repo_dir(repo_type, repo_id) / _DELETED).read_bytes())
        except FileNotFoundError:
            return frozenset()
        return frozenset(str(s) for s in raw)

    def set_deleted_lfs(self, repo_type: str, repo_id: str, shas: frozenset[str] | set[str]) -> None:
        """Replace the set (callers hold the repo lock)."""
        self.objects.write_json_atomic(self._repo_dir(repo_type, repo_id) / _DELETED, sorted(shas))

    def write_refs(self, repo_type: str, repo_id: str, refs: dict[str, dict[str, str]]) -> None:
        """Replace every ref at once (a rewrite of history; callers hold the repo lock)."""
        self._write_refs(self._repo_dir(repo_type, repo_id), refs)

    def list_repos(self, repo_type: str) -> list[RepoMeta]:
        out = []
        for meta_path in sorted(self.root.glob(f"repos/{repo_type}s/*/*/meta.json")):
            raw = json.loads(meta_path.read_bytes())
            out.append(RepoMeta(repo_type, raw["id"], bool(raw["private"]), raw["createdAt"],
                                raw.get("gated", False)))
        return out

    # ---------------------------------------------------------------- refs
    def refs(self, repo_type: str, repo_id: str) -> dict[str, dict[str, str]]:
        self.get_repo(repo_type, repo_id)
        raw = json.loads((self._repo_dir(repo_type, repo_id) / "refs.json").read_bytes())
        return {"heads": dict(raw["heads"]), "tags": dict(raw["tags"])}

    def _write_refs(self, repo_dir: Path, refs: dict[str, dict[str, str]]) -> None:
        self.objects.write_json_atomic(repo_dir / "refs.json", refs)

    def resolve(self, repo_type: str, repo_id: str, revision: str) -> str:
        """Commit sha of a branch, a tag, or a commit sha (7 to 40 hex digits, as git takes
        it); raises RevisionNotFound."""
        refs = self.refs(repo_type, repo_id)
        for prefix, kind in (("refs/heads/", "heads"), ("refs/tags/", "tags")):
            if revision.startswith(prefix) and revision[len(prefix):] in refs[kind]:
                return refs[kind][revision[len(prefix):]]
        if revision in refs["heads"]:
            return refs["heads"][revision]
        if revision in refs["tags"]:
            return refs["tags"][revision]
        if _HEX_RE.fullmatch(revision):
            reachable = self._reachable(refs)
            if SHA1_RE.fullmatch(revision):
                if revision in reachable:
                    return revision
            else:
                # A sha is only visible through the repo that holds it (objects are shared).
                found = [oid for oid in reachable if oid.startswith(revision)]
                if len(found) == 1:
                    return found[0]
        raise RevisionNotFound(f"Invalid rev id: {revision}")

    def _reachable(self, refs: dict[str, dict[str, str]]) -> set[str]:
        # Cached by the ref tips it was computed from: a new commit or ref makes a new key.
        tips = tuple(sorted({*refs["heads"].values(), *refs["tags"].values()}))
        seen: set[str] | None = self._reach.get(tips)
        if seen is None:
            seen = set()
            stack = list(tips)
            while stack:
                current = stack.pop()
                if current in seen:
                    continue
                seen.add(current)
                stack.extend(self.objects.read_commit(current).parents)
            self._reach.put(tips, seen)
        return seen

    def create_branch(self, repo_type: str, repo_id: str, branch: str, start: str | None) -> None:
        check_ref_name(branch, "branch")
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if branch in refs["heads"]:
                raise Conflict(f"Reference refs/heads/{branch} already exists")
            refs["heads"][branch] = self.resolve(repo_type, repo_id, start or "main")
            self._write_refs(repo_dir, refs)

    def delete_branch(self, repo_type: str, repo_id: str, branch: str) -> None:
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if branch == "main":
                raise Forbidden("Cannot delete refs/heads/main")
            if branch not in refs["heads"]:
                raise RevisionNotFound(f"Invalid rev id: {branch}")
            del refs["heads"][branch]
            self._write_refs(repo_dir, refs)

    def create_tag(self, repo_type: str, repo_id: str, tag: str, revision: str) -> str:
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            # The Hub resolves the revision first: a missing one is a 404 even for a bad tag name.
            target = self.resolve(repo_type, repo_id, revision)
            check_ref_name(tag, "tag")
            refs = self.refs(repo_type, repo_id)
            if tag in refs["tags"]:
                raise Conflict(f"Reference refs/tags/{tag} already exists")
            refs["tags"][tag] = target
            self._write_refs(repo_dir, refs)
            return target

    def delete_tag(self, repo_type: str, repo_id: str, tag: str) -> None:
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if tag not in refs["tags"]:
                raise RevisionNotFound(f"Invalid rev id: {tag}")
            del refs["tags"][tag]
            self._write_refs(repo_dir, refs)

    def log(self, head: str) -> Iterator[Commit]:
        """First-parent history, newest first."""
        current: str | None = head
        while current:
            commit = self.objects.read_commit(current)
            yield commit
            current = commit.parents[0] if commit.parents else None

    # ---------------------------------------------------------------- trees
    def entry(self, commit_oid: str, path: str) -> TreeEntry | None:
        """The entry at ``path`` in a commit; ``path == ""`` is the root directory."""
        tree = self.objects.read_commit(commit_oid).tree
        current = TreeEntry("", "directory", tree, 0, None)
        for part in [p for p in path.split("/") if p]:
            if current.kind != "directory":
                return None
            match = next((e for e in self.objects.read_tree(current.oid) if e.name == part), None)
            if match is None:
                return None
            current = match
        return current

    def listing(self, tree_oid: str, prefix: str, recursive: bool) -> list[tuple[str, TreeEntry]]:
        """(full path, entry) pairs under a tree, directories before their contents.

        Cached by tree oid: trees are immutable, so a cached listing can never go stale.
        """
        key = (tree_oid, prefix, recursive)
        cached: list[tuple[str, TreeEntry]] | None = self._listings.get(key)
        if cached is not None:
            return cached
        out: list[tuple[str, TreeEntry]] = []

        def walk(oid: str, base: str) -> None:
            for e in self.objects.read_tree(oid):
                full = f"{base}{e.name}"
                out.append((full, e))
                if recursive and e.kind == "directory":
                    walk(e.oid, full + "/")

        walk(tree_oid, f"{prefix}/" if prefix else "")
        self._listings.put(key, out)
        return out

    def _rules_file(self, commit_oid: str, name: str) -> bytes | None:
        entry = self.entry(commit_oid, name)
        if entry is None or entry.kind != "file" or entry.lfs is not None:
            return None
        with open(self.objects.blob_path(entry.oid), "rb") as fh:
            return fh.read(_RULES_FILE_LIMIT)

    def attributes(self, commit_oid: str) -> GitAttributes:
        """The repo's .gitattributes at a commit (none: no attributes at all)."""
        return parse_gitattributes(self._rules_file(commit_oid, ".gitattributes") or b"")

    def gitignore(self, commit_oid: str) -> GitIgnore | None:
        data = self._rules_file(commit_oid, ".gitignore")
        return GitIgnore.parse(data) if data is not None else None

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
        """Apply ``operations`` on top of ``branch`` and move the branch; returns the new commit sha.

        Regular files that the resulting .gitattributes marks ``filter=lfs`` are stored as
        LFS objects, as git's clean filter would (the client sends them as regular content
        when its preupload was made against other attributes).
        """
        for op in operations:
            check_path(op.path.rstrip("/") if isinstance(op, Delete) else op.path)
        branch = branch.removeprefix("refs/heads/")
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            # Checked under the lock: a permanent deletion of the repo's objects takes it too.
            added: set[str] = set()
            for op in operations:
                if isinstance(op, AddLfs):
                    stored = self.objects.lfs_size(op.oid)
                    if stored is None:
                        raise BadContent(f"LFS object {op.oid} for {op.path} was never uploaded")
                    if op.size is not None and stored != op.size:
                        raise BadContent(f"LFS object {op.oid} has {stored} bytes, commit says {op.size}")
                    added.add(op.oid)
                elif isinstance(op, AddBlob):
                    added.add(op.blob.sha256)
            refs = self.refs(repo_type, repo_id)
            if branch not in refs["heads"]:
                raise RevisionNotFound(f"Invalid rev id: {branch}")
            head = refs["heads"][branch]
            if parent_commit is not None and not (len(parent_commit) >= 7 and head.startswith(parent_commit)):
                raise StaleParent(STALE_PARENT)
            attributes = self._attributes_after(head, operations)
            root = _MutDir(self.objects.read_tree(self.objects.read_commit(head).tree))
            for op in operations:
                self._apply(root, op, attributes)
            tree = self._write_mut(root) or self.objects.put_tree([])
            new = self.objects.put_commit(tree, [head], title, message)
            deleted = self.deleted_lfs(repo_type, repo_id)
            if deleted & added:
                # Pushed again: the object is stored once more, for every commit that names it.
                self.set_deleted_lfs(repo_type, repo_id, deleted - added)
            refs["heads"][branch] = new
            self._write_refs(repo_dir, refs)
            return new

    def _attributes_after(self, head: str, operations: list[Operation]) -> GitAttributes:
        for op in reversed(operations):
            if op.path.strip("/") == ".gitattributes":
                if isinstance(op, AddBlob):
                    with open(self.objects.blob_path(op.blob.oid), "rb") as fh:
                        return parse_gitattributes(fh.read(_RULES_FILE_LIMIT))
                return GitAttributes(())
        return self.attributes(head)

    def super_squash(self, repo_type: str, repo_id: str, branch: str, message: str) -> str:
        """Replace a branch's history by one commit holding its current tree."""
        repo_dir = self._repo_dir(repo_type, repo_id)
        with self.repo_lock(repo_type, repo_id):
            refs = self.refs(repo_type, repo_id)
            if branch not in refs["heads"]:
                if branch in refs["tags"]:
                    raise StorageError(f"Invalid reference for a branch: {branch}")
                raise RevisionNotFound(f"Invalid rev id: {branch}")
            tree = self.objects.read_commit(refs["heads"][branch]).tree
            title, _, body = message.strip().partition("\n")
            new = self.objects.put_commit(tree, [], title or "Super-squash", body.strip())
            refs["heads"][branch] = new
            self._write_refs(repo_dir, refs)
            return new

    def _load(self, node: TreeEntry | _MutDir) -> _MutDir:
        return node if isinstance(node, _MutDir) else _MutDir(self.objects.read_tree(node.oid))

    def _apply(self, root: _MutDir, op: Operation, attributes: GitAttributes) -> None:
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
            # A file delete naming a folder deletes the folder, as the Hub does since
            # huggingface_hub #2259 (the client sends deletedFile for a path without "/").
            if existing is None or (op.folder and not is_dir):
                raise EntryNotFound(self._missing_message(op))
            del node.children[name]
            return
        if is_dir:
            raise BadContent(f"Cannot write file {op.path}: a folder has that name")
        if isinstance(op, AddBlob):
            blob = op.blob
            # git-lfs leaves empty files alone and never tracks .gitattributes itself.
            if blob.size and op.path != ".gitattributes" and attributes.tracks_lfs(op.path):
                self.objects.blob_to_lfs(blob)
                entry = TreeEntry(name, "file", lfs_pointer_oid(blob.sha256, blob.size), blob.size, blob.sha256)
            else:
                entry = TreeEntry(name, "file", blob.oid, blob.size, None)
            node.children[name] = entry
        else:
            size = self.objects.lfs_size(op.oid)
            assert size is not None  # checked before taking the lock
            node.children[name] = TreeEntry(name, "file", lfs_pointer_oid(op.oid, size), size, op.oid)

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
        return self.objects.put_tree(entries) if entries else None
