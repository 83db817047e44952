"""Repos and refs of the local Hub's storage: metadata, moves, branches and tags.

Layout under ``data_dir`` (objects are described in :mod:`.objects`)::

    objects/...                                     content-addressed, shared by all repos
    repos/<type>s/<ns>/<name>/meta.json, refs.json  visibility, gating and branch/tag heads
    lock                                            held while a server uses the dir

Repo ids are case-insensitive as on the Hub: the directory is the lower-cased id and
``meta.json`` keeps the spelling the repo was created with, which every answer uses.
Refs are replaced last, so a crash mid-commit leaves the previous head intact and at
worst some unreferenced objects behind. :class:`RepoStore` is the lower half of
:class:`~.storage.Storage`, which adds trees and commits; apart so that each half reads
on its own.
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
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from .filelock import try_lock
from .gitobjects import DEFAULT_GITATTRIBUTES
from .names import (
    GATED,
    REPO_TYPES,
    Conflict,
    Forbidden,
    RepoExists,
    RepoMeta,
    RepoMoved,
    RepoNotFound,
    RevisionNotFound,
    check_ref_name,
    check_repo_id,
)
from .objects import LRU, SHA1_RE, Collector, ObjectStore, StorageError, TreeEntry

_HEX_RE = re.compile(r"[0-9a-f]{7,40}")
_DELETED = "deleted-lfs.json"  # sha256s permanently deleted from a repo (a JSON list)
_MOVED = "moved.json"  # in the dir of a moved repo's old id: {"to": its new id}
_MAX_MOVES = 16  # a chain of renames followed this far, no further


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")



class RepoStore:
    """The repos and refs of one local Hub; safe for concurrent use by many threads of one process."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = Path(data_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fh: IO[bytes] | None = self._lock_data_dir()
        self.objects = ObjectStore(self.root)
        self.xet: Collector | None = None
        """The Xet side of the same objects, when the server has Xet on (freeing reaches it too)."""
        (self.root / "repos").mkdir(exist_ok=True)
        self._locks: dict[tuple[str, str], threading.RLock] = {}
        self._locks_guard = threading.Lock()
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
