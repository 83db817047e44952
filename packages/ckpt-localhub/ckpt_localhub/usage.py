"""What a repo stores, as the Hub accounts it, and the ways to free it.

A repo's storage is every unique object reachable from its refs through their whole
history: deleting a file in a commit frees nothing, because older commits still name its
bytes. ``used_storage`` sums LFS objects (by sha256) and regular blobs (by git id), each
once, however many paths and commits name it; objects are stored once for the whole local
Hub, but each repo counts its own, as on the Hub.

Freeing it, as the Hub offers:

- ``super_squash_history`` (in :mod:`.storage`) makes a branch one commit; the objects
  only its old history held are then garbage, and :func:`collect_garbage` removes them
  from disk (objects another ref or repo still reaches stay).
- :func:`permanently_delete` deletes LFS objects by sha256. With ``rewrite_history`` every
  commit whose tree names one is rewritten without those files (it and its descendants get
  new SHAs; refs move to the rewritten commits; commits before keep theirs). Without it no
  SHA changes, and a file whose object is gone answers ``410 Gone`` at every commit that
  still names it (trees and listings still show it: its pointer is in git). The Hub
  documents only that such commits are "affected"; 410 with a message saying the object
  was permanently deleted is this server's answer, chosen so a client can tell it from a
  file that never existed (404) and from corrupt bytes.

A walk is bounded by the repo's own history: each commit and tree is read once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .names import REPO_TYPES
from .objects import LRU, SHA1_RE, SHA256_RE, StorageError, TreeEntry
from .storage import Storage

GC_GRACE_S = 3600
"""An object no commit names is removed only once it is this old: an upload or a streamed
commit writes objects before the commit that names them lands."""
MAX_DELETIONS = 1000  # sha256s in one permanent deletion, the client's batch size


@dataclass(frozen=True)
class StoredObject:
    key: str
    """sha256 of an LFS object, or the git blob id of a regular file."""
    lfs: bool
    size: int
    path: str
    """A path that names it (the first met, walking from the oldest commit)."""
    ref: str
    """The first ref (``refs/heads/main`` first) whose history reaches it."""
    date: str
    """The date of the oldest commit met that names it."""


def _ordered_refs(refs: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    heads = sorted(refs["heads"].items(), key=lambda kv: (kv[0] != "main", kv[0]))
    return [(f"refs/heads/{n}", t) for n, t in heads] + [(f"refs/tags/{n}", t) for n, t in sorted(refs["tags"].items())]


def stored_objects(store: Storage, repo_type: str, repo_id: str, *, include_deleted: bool = False,
                   refs: dict[str, dict[str, str]] | None = None) -> dict[str, StoredObject]:
    """Every object the repo's refs reach through their history, by key (permanently deleted
    LFS objects left out unless ``include_deleted``)."""
    refs = refs if refs is not None else store.refs(repo_type, repo_id)
    deleted = frozenset() if include_deleted else store.deleted_lfs(repo_type, repo_id)
    found: dict[str, StoredObject] = {}
    seen_commits: set[str] = set()
    seen_trees: set[str] = set()
    for ref, tip in _ordered_refs(refs):
        # This ref's commits not met yet, oldest first: an object is dated by the commit bringing it.
        order: list[str] = []
        stack = [tip]
        while stack:
            oid = stack.pop()
            if oid in seen_commits:
                continue
            seen_commits.add(oid)
            order.append(oid)
            stack.extend(store.objects.read_commit(oid).parents)
        for oid in sorted(order, key=lambda o: store.objects.read_commit(o).time):
            commit = store.objects.read_commit(oid)
            trees = [(commit.tree, "")]
            while trees:
                tree, base = trees.pop()
                if tree in seen_trees:
                    continue
                seen_trees.add(tree)
                for entry in store.objects.read_tree(tree):
                    if entry.kind == "directory":
                        trees.append((entry.oid, f"{base}{entry.name}/"))
                        continue
                    key = entry.lfs or entry.oid
                    if key not in found and key not in deleted:
                        found[key] = StoredObject(key, entry.lfs is not None, entry.size, f"{base}{entry.name}",
                                                  ref, commit.date)
    return found


_HELD = LRU(64)


def lfs_held(store: Storage, repo_type: str, repo_id: str) -> frozenset[str]:
    """sha256s of the LFS objects a repo's refs reach (permanently deleted ones left out): what a
    CAS token of the repo may read. Cached by the refs and deletions it was computed from, so
    it is walked once per state of the repo, not once per read; none for a repo that is gone."""
    if repo_type == "bucket":
        return store.buckets.held_sha256(repo_id)
    try:
        refs = store.refs(repo_type, repo_id)
        deleted = store.deleted_lfs(repo_type, repo_id)
    except StorageError:
        return frozenset()
    tips = tuple(sorted({*refs["heads"].values(), *refs["tags"].values()}))
    key = (str(store.root), repo_type, repo_id.lower(), tips, deleted)
    held: frozenset[str] | None = _HELD.get(key)
    if held is None:
        found = stored_objects(store, repo_type, repo_id, refs=refs)
        held = frozenset(k for k, o in found.items() if o.lfs)
        _HELD.put(key, held)
    return held


def used_storage(store: Storage, repo_type: str, repo_id: str) -> int:
    return sum(o.size for o in stored_objects(store, repo_type, repo_id).values())


def _referenced_anywhere(store: Storage) -> set[str]:
    keys: set[str] = set()
    for repo_type in REPO_TYPES:
        for meta in store.list_repos(repo_type):
            keys.update(stored_objects(store, repo_type, meta.repo_id))
    keys.update(store.buckets.held_everywhere())  # a bucket's files name LFS objects too
    return keys


def collect_garbage(store: Storage, force: Iterable[str] = (), grace_s: float = GC_GRACE_S) -> int:
    """Remove from disk the objects no repo reaches: LFS objects in ``force`` (known to have
    been referenced until now, so no upload is in flight for them) at once, the rest once
    older than ``grace_s``. Regular blobs always wait out the grace: a commit streaming in
    may already count on an existing blob file (blobs are written once, shared by all repos).
    Returns the bytes freed."""
    forced = {key for key in force if SHA256_RE.fullmatch(key)}
    referenced = _referenced_anywhere(store)
    freed = 0
    now = time.time()
    removed: set[str] = set()
    for kind, pattern in (("lfs", SHA256_RE), ("blobs", SHA1_RE)):
        for path in (store.root / "objects" / kind).glob("*/*"):
            key = path.name
            if key in referenced or not pattern.fullmatch(key):
                continue
            try:
                st = path.stat()
                if key in forced or now - st.st_mtime > grace_s:
                    path.unlink()
                    freed += st.st_size
                    if kind == "lfs":
                        removed.add(key)
            except FileNotFoundError:
                continue
    if store.xet is not None:
        # A file pushed through Xet also lives in xorbs: it goes from the CAS with its object.
        freed += store.xet.collect(removed, grace_s)
    return freed


@contextmanager
def collecting(store: Storage, repo_type: str, repo_id: str) -> Iterator[None]:
    """Around a change that drops refs or history (a squash, a deleted branch or tag): what the
    repo reached before and no longer does is garbage, removed unless another repo holds it."""
    with store.repo_lock(repo_type, repo_id):
        before = stored_objects(store, repo_type, repo_id)
        yield
        after = stored_objects(store, repo_type, repo_id)
        collect_garbage(store, force=set(before) - set(after))


def _rewrite_tree(store: Storage, tree: str, shas: frozenset[str], memo: dict[str, str | None]) -> str | None:
    """The tree without files whose LFS object is in ``shas`` (None when nothing is left)."""
    if tree in memo:
        return memo[tree]
    entries: list[TreeEntry] = []
    changed = False
    for entry in store.objects.read_tree(tree):
        if entry.kind == "directory":
            sub = _rewrite_tree(store, entry.oid, shas, memo)
            changed |= sub != entry.oid
            if sub is not None:
                entries.append(entry._replace(oid=sub))
        elif entry.lfs in shas:
            changed = True
        else:
            entries.append(entry)
    result: str | None = tree
    if changed:
        result = store.objects.put_tree(entries) if entries else None
    memo[tree] = result
    return result


Refs = dict[str, dict[str, str]]


def _rewrite_history(store: Storage, refs: Refs, shas: frozenset[str]) -> Refs:
    trees: dict[str, str | None] = {}
    commits: dict[str, str] = {}
    empty = store.objects.put_tree([])

    def rewrite(tip: str) -> str:
        # Parents before children, without recursion (histories can be long).
        stack = [tip]
        while stack:
            oid = stack[-1]
            if oid in commits:
                stack.pop()
                continue
            commit = store.objects.read_commit(oid)
            todo = [p for p in commit.parents if p not in commits]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            tree = _rewrite_tree(store, commit.tree, shas, trees) or empty
            parents = [commits[p] for p in commit.parents]
            if tree == commit.tree and parents == list(commit.parents):
                commits[oid] = oid
            else:
                commits[oid] = store.objects.put_commit(tree, parents, commit.title, commit.message, when=commit.time)
        return commits[tip]

    return {kind: {name: rewrite(tip) for name, tip in refs[kind].items()} for kind in ("heads", "tags")}


def permanently_delete(store: Storage, repo_type: str, repo_id: str, shas: list[str], rewrite_history: bool) -> int:
    """Delete LFS objects from a repo for good (see the module docstring); returns the bytes
    freed on disk (objects another repo still reaches stay there)."""
    if len(shas) > MAX_DELETIONS or not all(isinstance(s, str) and SHA256_RE.fullmatch(s) for s in shas):
        raise StorageError(f"Expected at most {MAX_DELETIONS} sha256 object ids to delete")
    wanted = frozenset(shas)
    with store.repo_lock(repo_type, repo_id):
        refs = store.refs(repo_type, repo_id)
        held = stored_objects(store, repo_type, repo_id, refs=refs)
        targets = frozenset(s for s in wanted if s in held and held[s].lfs)
        if not targets:
            return 0
        if rewrite_history:
            store.write_refs(repo_type, repo_id, _rewrite_history(store, refs, targets))
        store.set_deleted_lfs(repo_type, repo_id, store.deleted_lfs(repo_type, repo_id) | targets)
        return collect_garbage(store, force=targets)

