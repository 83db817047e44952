"""prune's ``--free-storage``: give the Hub back the bytes only the pruned checkpoints held.

Deleting a folder in a commit frees nothing on the Hub: older commits still name its
objects. Of the Hub's two ways to free them, this uses the one that changes no commit:

1. every commit reachable from every branch and tag is read (bounded: past
   ``MAX_HISTORY_COMMITS`` it is refused before anything is written; each folder version
   is listed once), noting which LFS objects each top-level folder name held;
2. prune's own commit deletes the folders, pinned to the head it planned at (as without
   ``--free-storage``); the commits it landed over are read too;
3. the refs are read again: whatever commits that landed after it (a concurrent push)
   name stays, in whatever folder, and a pruned folder a branch head holds again is left
   alone;
4. an LFS object is chosen only if every path naming it, in every commit read, lies
   inside a folder this prune deleted (an object a kept checkpoint, a promoted copy such
   as ``release/``, which shares its source's objects, or any other path names stays),
   and ``permanently_delete_lfs_files(..., rewrite_history=False)`` deletes those.

No SHA changes, so every SHA a push reported (held by running jobs and W&B pointers) and
every tag still names the same commit and pulls verified. A pruned checkpoint's old SHA
still lists its files, but their bytes are gone: pull says so (exit 1). The other way,
``super_squash_history`` or ``rewrite_history=True``, would give every commit on the
branch a new SHA and break every pinned pointer at once.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field

from ckpt_action.errors import LimitError, param
from ckpt_action.stores.base import HistoryStore, Store

log = logging.getLogger(__name__)

MAX_HISTORY_COMMITS = 10_000
"""Commits read (over all refs) to find what only the pruned folders name; past it,
``--free-storage`` is refused rather than guessed."""
MAX_FOLDER_VERSIONS = 50_000
"""Distinct folder versions (tree ids) listed while reading the history; past it, refused too."""
MAX_CONCURRENT_ROUNDS = 5  # re-reads of the refs while other commits keep landing
DELETE_BATCH = 1000  # the client's own batch size for permanent deletions


@dataclass
class References:
    """What the repo's history names, by top-level folder: which LFS objects each folder name
    held in any commit read, and which objects anything else named."""

    named: dict[str, dict[str, int]] = field(default_factory=dict)
    """Top-level folder name -> {sha256: size} named under it somewhere in history."""
    elsewhere: set[str] = field(default_factory=set)
    """sha256s named by a top-level file, an unusable path, or a commit that landed after the prune."""
    commits: set[str] = field(default_factory=set)
    folders: dict[str, dict[str, int]] = field(default_factory=dict)
    """Folder tree id -> the LFS objects under it (each folder version is listed once)."""

    def only_in(self, pruned: Collection[str]) -> dict[str, int]:
        """The objects every path naming them lies inside one of the ``pruned`` folders."""
        kept = set(self.elsewhere)
        for name, objects in self.named.items():
            if name not in pruned:
                kept.update(objects)
        return {sha: size for name in pruned for sha, size in self.named.get(name, {}).items() if sha not in kept}


@dataclass(frozen=True)
class FreeReport:
    freed_bytes: int | None
    """The Hub's figure (usage before minus after) where it reports usage, else the sizes of the deleted objects."""
    objects: int
    """LFS objects deleted (or, dry run, that would be)."""
    used_before: int | None
    used_after: int | None
    dry_run: bool = False


def used_storage(remote: Store) -> int | None:
    """The store's storage as the Hub reports it (a repo: ``expand=["usedStorage"]``), None where it does not."""
    return remote.usage()


def _repo(store: Store) -> HistoryStore:
    """Freeing reads a repo's git history: a store with history only (a bucket frees on delete)."""
    assert isinstance(store, HistoryStore), "free-storage reads a repo's history"
    return store


def _read_commit(remote: HistoryStore, refs: References, sha: str, *, all_elsewhere: bool) -> None:
    root = remote.list_tree(sha, what="listing the repo's history")
    for entry, _why in root.unusable:
        if entry.lfs_sha256:
            refs.elsewhere.add(entry.lfs_sha256)  # a name we cannot classify keeps its object
    for entry in root.entries:
        if not entry.folder:
            if entry.lfs_sha256:
                refs.elsewhere.add(entry.lfs_sha256)
            continue
        objects = refs.folders.get(entry.oid)
        if objects is None:
            if len(refs.folders) >= MAX_FOLDER_VERSIONS:
                raise LimitError(f"{param('free_storage')} lists every version of every folder in the history,"
                                 f" and this repo has more than {MAX_FOLDER_VERSIONS}:"
                                 f" prune without {param('free_storage')}")
            listing = remote.list_tree(sha, entry.path, recursive=True, what=f"listing {entry.path}/ in history")
            objects = {e.lfs_sha256: e.size for e in [*listing.entries, *(u for u, _ in listing.unusable)]
                       if not e.folder and e.lfs_sha256}
            refs.folders[entry.oid] = objects
        if all_elsewhere:
            refs.elsewhere.update(objects)
        else:
            refs.named.setdefault(entry.path, {}).update(objects)


def _tips(remote: HistoryStore) -> set[str]:
    branches, tags = remote.refs()
    return set(branches.values()) | set(tags.values())


def _live(remote: HistoryStore, pruned: Collection[str], head: str | None) -> set[str]:
    """Pruned folders that a branch's head holds (pushed again since, or on another branch):
    their objects stay. ``head``: the commit prune left main at (for a dry run, the one it read)."""
    branches, _tags = remote.refs()
    live: set[str] = set()
    for tip in set(branches.values()) - {head}:
        live |= {e.path for e in remote.list_tree(tip, what="listing the branch heads").entries if e.folder}
    return live & set(pruned)


def read_references(store: Store, tips: set[str] | None = None, refs: References | None = None, *,
                    all_elsewhere: bool = False) -> References:
    """Walk the history of ``tips`` (default: every branch and tag; commits already in ``refs``
    are not read again). Raises LimitError past MAX_HISTORY_COMMITS, before prune writes anything.

    ``all_elsewhere``: every object these commits name counts as named elsewhere (commits that
    landed after the prune's own: whatever they hold stays, whatever folder it is in).
    """
    remote = _repo(store)
    refs = refs or References()
    for tip in sorted(tips if tips is not None else _tips(remote)):
        if tip in refs.commits:
            continue
        left = MAX_HISTORY_COMMITS - len(refs.commits)
        history = remote.history(tip, until=None, limit=left + 1)
        for sha, _message in history:
            if sha in refs.commits:
                continue
            if len(refs.commits) >= MAX_HISTORY_COMMITS:
                raise LimitError(f"{param('free_storage')} reads every commit to find what only the pruned"
                                 f" checkpoints hold, and this repo has more than {MAX_HISTORY_COMMITS}:"
                                 f" prune without {param('free_storage')}")
            refs.commits.add(sha)
            _read_commit(remote, refs, sha, all_elsewhere=all_elsewhere)
    return refs


def free_pruned(store: Store, pruned: Collection[str], refs: References, *, head: str | None,
                used_before: int | None, dry_run: bool = False) -> FreeReport:
    """Delete the LFS objects only ``pruned`` folders name across the history of every ref (see
    the module docstring). ``refs``: :func:`read_references` of the refs before the prune's
    commit; ``head``: the commit the prune left main at (dry run: the one it planned at);
    ``used_before``: the Hub's figure read before the prune's commit."""
    remote = _repo(store)
    if not pruned:
        return FreeReport(0, 0, used_before, None if dry_run else used_before, dry_run)
    if head is not None:
        read_references(remote, {head}, refs)  # the prune's commit and whatever it was re-planned over
    for _round in range(MAX_CONCURRENT_ROUNDS):
        new = _tips(remote) - refs.commits
        if not new:
            break
        # Something landed after the prune's commit (a push): what it names stays, wherever it is.
        log.info("the repo moved while prune read its history; reading the new commits too")
        read_references(remote, new, refs, all_elsewhere=True)
    else:
        raise LimitError("the repo kept moving while prune read its history: run prune with"
                         f" {param('free_storage')} again when pushes pause")
    live = _live(remote, pruned, head)
    if live:
        log.warning("not freeing %s: a branch's head holds them again", ", ".join(sorted(live)))
    chosen = refs.only_in(set(pruned) - live)
    total = sum(chosen.values())
    if dry_run or not chosen:
        return FreeReport(total, len(chosen), used_before, None if dry_run else used_before, dry_run)
    remote.delete_objects(chosen, batch=DELETE_BATCH)
    used_after = used_storage(remote)
    freed = used_before - used_after if used_before is not None and used_after is not None else total
    return FreeReport(freed, len(chosen), used_before, used_after)
