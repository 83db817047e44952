"""The local Hub's storage: its repos (from :mod:`.repos`) with their trees and commits.

A commit applies its operations (already decoded from the wire format) to the branch's tree,
storing files that ``.gitattributes`` marks as LFS the way git's clean filter would, writes
the new trees bottom up, and moves the branch last (the layout and the crash promise are in
:mod:`.repos`; the names and refusals in :mod:`.names`).

Example:

    >>> store = Storage("hubdata")
    >>> meta = store.create_repo("model", "me/ckpts", private=False)
    >>> blob = store.objects.put_blob(b"hi")
    >>> sha = store.commit("model", "me/ckpts", "main", [AddBlob("a.txt", blob)], title="add a")
    >>> store.resolve("model", "ME/Ckpts", sha[:7]) == sha
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from .buckets import BucketStore
from .gitobjects import GitAttributes, GitIgnore, lfs_pointer_oid, parse_gitattributes
from .names import STALE_PARENT, EntryNotFound, RevisionNotFound, StaleParent, check_path
from .objects import LRU, BadContent, Commit, StorageError, StoredBlob, TreeEntry
from .repos import RepoStore

__all__ = ["AddBlob", "AddLfs", "Delete", "Operation", "Storage"]

# A repo's own .gitattributes / .gitignore are read at most this far (the Hub's limit is
# similar in spirit: they are small text files).
_RULES_FILE_LIMIT = 1024 * 1024


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


class Storage(RepoStore):
    """All repos of one local Hub; safe for concurrent use by many threads of one process."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        super().__init__(data_dir)
        self._listings = LRU(64)
        self.buckets = BucketStore(self.objects)
        """Storage Buckets: their files name objects of the same store."""

    # ---------------------------------------------------------------- history
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
