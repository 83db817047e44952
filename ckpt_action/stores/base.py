"""The store seam: what push, latest, pull, promote, list and prune need of the place
checkpoints live, and the store-neutral writes they hand it.

Two kinds of store share it. Today's, :class:`~ckpt_action.stores.repo.RepoStore`, is a
model repo (git commits through huggingface_hub). The next, a Storage Bucket
(``hf://buckets/ORG/NAME``: mutable, unversioned, S3-like, Xet-backed), is written against
the same methods (:class:`~ckpt_action.stores.bucket.BucketStore`); this is how it implements each one:

``Pin``
    What a reader is pinned to. A repo: the 40-hex commit SHA of the snapshot read. A
    bucket has no commit: each checkpoint folder is pinned by ``sha256:<64 hex>`` of its
    manifest as stored, so a pin names one folder's content, and reading at it fails once
    the manifest no longer hashes to it ("overwritten since it was pinned").
``identity(folder, step)``
    Which checkpoint a writer writes, as the one finalize compares it (the store is the
    endpoint and the repo id, or the bucket URI with its prefix).
``resolve(revision)``
    The pin a command's reads are made at. A repo: the branch's or tag's SHA (None: a new
    repo without commits). A bucket has no snapshot of the whole: ``LIVE`` (the listing is
    read as it is now, and every folder it yields is pinned by its own manifest's digest),
    or the ``sha256:...`` a ``--revision`` names.
``pin_of(pin, folder, manifest_bytes)``
    The pin a handle of ``folder`` carries: a repo, the SHA read at; a bucket, the sha256
    of the manifest bytes read (``latest`` and ``list`` report it, ``pull`` checks it).
``refs()``
    Branches and tags, each to its pin (a bucket has none: two empty maps; ``--branch`` and
    ``--tag`` belong to a promote into a repo). ``create_branch``/``create_tag`` likewise.
``folders(pin)``
    The top-level checkpoint folders, one bounded listing (a repo: the tree at the SHA,
    with each folder's git tree id; a bucket: ``list_bucket_tree`` of the prefix, not
    recursive, with each folder's manifest path as its id).
``catalog(pin)`` (list)
    Every checkpoint folder with its files, from one recursive listing (a bucket:
    ``list_bucket_tree`` recursive under the prefix, grouped by folder).
``files(pin, folder)`` / ``snapshot(pin, folder)`` (and :func:`open_complete`, written once over them)
    The folder's files (size, and sha256 where the store knows it), bounded; a bucket
    lists the folder's paths (``list_bucket_tree``, recursive under the folder, paginated
    within the listing bounds) with each file's Xet hash, which the manifest's must match;
    its snapshot's ``revision`` is the manifest's digest, and ``open_complete`` at a
    ``sha256:`` pin refuses a folder whose manifest no longer hashes to it, or a file of
    which has another Xet hash than the manifest records (exit 1: overwritten since it was
    pinned), before any byte is handed over.
``existing(pin, paths)`` / ``folder_id(pin, folder)``
    Which of these files exist, in one request (a bucket: ``get_bucket_paths_info``); the
    folder's content id when the store has one (a repo: the git tree id, which push's proof
    and latest's fast path compare with the manifest's; a bucket: None, so both list the
    folder and compare file by file).
``read_small_file(pin, path)`` (a manifest, a statement)
    Bounded in bytes and time; a bucket reads through the bucket resolve route and, for a
    manifest, checks the bytes hash to the pin asked for.
``download(pin, path, dest, want)``
    One file streamed to disk, hashed as it arrives, checked against the manifest's digest
    (a bucket: the resolve route over Xet, with Range to resume).
``ensure(branch, private)``
    Create the store if missing, private (a repo: ``create_repo``; a bucket: ``create_bucket``).
``upload(folder, files)``
    Send files without publishing them (a repo: LFS/Xet preupload; a bucket: the Xet upload
    of ``batch_bucket_files`` adds, each file under its final path, the folder's manifest
    removed first on a re-push so that no old manifest stands over new files; each file's
    digest comes back with the Xet hash the manifest records). A push into a bucket uploads
    every file this way, small ones too, before it plans the manifest.
``write(plan)``
    Apply a plan's :class:`Put`/:class:`Delete`/:class:`Copy` operations. A repo: one commit
    per plan, pinned to its parent (412 on a race), re-planned on conflict
    (:func:`ckpt_action.stores.hub.commits.commit`). A bucket: the files' batch first, then, for a
    plan that finalizes, :func:`~ckpt_action.stores.finalize.finalize` against a fresh
    listing of the folder, then the manifest written **last, alone**, in a batch of its
    own; its pin is the sha256 of the manifest bytes written. Either way a plan that
    finalizes goes through :func:`~ckpt_action.stores.finalize.finalize` first.
``Delete("folder/")`` in a write (prune)
    A repo: one commit deleting the folders. A bucket: each folder's manifest deleted
    first, in a batch of its own (a half-deleted folder is then never complete), then its
    files; storage is freed at once.
``Copy`` in a write (promote within the store)
    A repo: ``CommitOperationCopy`` at the source SHA, in one commit. A bucket: server-side
    copies by Xet hash (``batch_bucket_files`` copy), 0 bytes sent, then the finalize and
    the manifest last.
``usage()``
    Bytes the store uses (a repo: ``usedStorage``; a bucket: its reported size).
``error(exc, what)``
    The client's exception as ckpt-action's error, in the store's words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, FileDigest, RemoteFile
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.errors import IntegrityError, NotFoundError, param
from ckpt_action.handle import CheckpointHandle, step_of
from ckpt_action.stores.finalize import Identity
from ckpt_action.stores.writes import Pin, Write, WriteOutcome

if TYPE_CHECKING:
    from ckpt_action.settings import Settings

@dataclass(frozen=True)
class Uploaded:
    """A file sent by :meth:`Store.upload`, not yet published: its digest (as the upload
    hashed it) and the store's token for a later :class:`Put`."""

    digest: FileDigest
    token: Any
    inline: bool = False
    """The store takes this file's bytes in the publishing write itself (a repo's small
    regular files), not from the upload."""


class Store(Protocol):
    """What the operations need of a store. Every read is bounded; every read at a pin."""

    kind: str
    """``repo`` or ``bucket``."""
    fixed_pins: bool
    """Whether a pin names a state that never changes (a repo's commit). False: a read at a
    pin sees the store as it is now (a bucket's listing), so what differs from a write just
    made was changed since by another writer."""
    name: str
    """The repo id or bucket URI, as handles and messages name it."""
    settings: Settings

    def identity(self, folder: str, step: int | None) -> Identity: ...

    # reading
    def resolve(self, revision: str | None) -> Pin | None: ...
    def head(self, revision: str | None) -> Pin | None:
        """What latest lists at: ``resolve(revision)``, or a pin the reads that follow settle
        (:meth:`read_pinned`), which saves the request that would resolve it first."""
    def read_pinned(self, pin: Pin, path: str, *, missing_ok: bool = False) -> tuple[bytes | None, Pin]:
        """``read_small_file``, with the pin the bytes were read at: ``pin``, or the one a
        :meth:`head` pin settled to for this read."""
    def pin_of(self, pin: Pin, folder: str, manifest_bytes: bytes | None) -> Pin: ...
    def refs(self) -> tuple[dict[str, str], dict[str, str]]: ...
    def folders(self, pin: Pin) -> dict[str, str]: ...
    def files(self, pin: Pin, folder: str) -> dict[str, RemoteFile]: ...
    def catalog(self, pin: Pin) -> tuple[dict[str, dict[str, RemoteFile]], dict[str, str]]: ...
    def existing(self, pin: Pin, paths: list[str]) -> set[str]: ...
    def folder_id(self, pin: Pin, folder: str) -> str | None: ...
    def read_small_file(self, pin: Pin, path: str, *, missing_ok: bool = False) -> bytes | None: ...
    def snapshot(self, pin: Pin, folder: str, manifest_bytes: bytes | None = None,
                 files: dict[str, RemoteFile] | None = None) -> Snapshot: ...
    def download(self, pin: Pin, path: str, dest: Path, want: FileDigest, stop: Callable[[], None] | None = None,
                 *, alone: bool = True) -> FileDigest: ...
    def error(self, exc: BaseException, what: str) -> Exception: ...

    # writing
    def ensure(self, branch: str | None, private: bool) -> Pin | None: ...
    def upload(self, folder: str, files: Mapping[str, tuple[str, FileDigest | None]], *, branch: str = "main",
               progress: str | None = None, what: str | None = None) -> dict[str, Uploaded]: ...
    def write(self, plan: Callable[[Pin | None], Write | None], *, what: str, branch: str = "main",
              head: Pin | None = None, max_writes: int = 1, replan_on: Callable[[BaseException], bool] | None = None,
              on_landed: Callable[[Pin, Write], None] | None = None) -> WriteOutcome: ...
    def create_branch(self, branch: str, pin: Pin) -> None: ...
    def create_tag(self, tag: str, pin: Pin, message: str | None = None) -> None: ...
    def usage(self) -> int | None: ...


@runtime_checkable
class HistoryStore(Store, Protocol):
    """A store with a history of commits and content-addressed objects (a model repo):
    what prune's ``--free-storage`` reads to find the objects only the pruned folders
    held. A bucket frees storage on delete and has none of these."""

    def list_tree(self, pin: Pin, path: str | None = None, *, recursive: bool = False,
                  what: str = "listing the repo") -> Any: ...
    def history(self, pin: Pin, *, until: str | None, limit: int) -> list[tuple[str, str]]: ...
    def delete_objects(self, chosen: Mapping[str, int], *, batch: int) -> None: ...


PATHS_PER_REQUEST = 100
"""Manifest paths asked about in one paths-info request (:func:`manifests_here` stops at the first found)."""


def manifests_here(store: Store, pin: Pin, names: list[str] | None = None) -> bool:
    """Whether a top-level ``checkpoint-N`` folder at ``pin`` (of ``names``, default: every
    one listed) has a manifest: what the verdict on a folder without one needs to know
    (:func:`~ckpt_action.checkpoint.verdict.no_manifest_problem`)."""
    if names is None:
        names = sorted((n for n in store.folders(pin) if step_of(n) is not None),
                       key=lambda n: step_of(n) or 0, reverse=True)
    paths = [f"{n}/{MANIFEST_NAME}" for n in names]
    return any(store.existing(pin, paths[i:i + PATHS_PER_REQUEST]) for i in range(0, len(paths), PATHS_PER_REQUEST))


def open_complete(store: Store, subfolder: str, sha: Pin | None, doing: str,
                  vet: Callable[[Snapshot], None] | None = None, *, read: Snapshot | None = None,
                  manifest_bytes: bytes | None = None) -> tuple[Snapshot, CheckpointHandle]:
    """``subfolder`` at ``sha`` (None: the repo has no commits), refused unless it is a
    complete checkpoint, with its handle (the step from its manifest, else from its name).
    ``vet`` sees the folder first (a pull refuses paths it could not write). ``doing``
    (``pull``, ``promote``) words the messages. What an earlier step read of this very
    folder at this SHA (``read``, the whole snapshot; or its ``manifest_bytes``) is taken
    instead of read again: at a pinned SHA it cannot have changed."""
    if sha is None:
        raise NotFoundError(f"{store.name} has no commits yet: nothing to {doing}")
    if read is not None and (read.revision, read.subfolder) == (sha, subfolder):
        snap = read
    else:
        snap = store.snapshot(sha, subfolder, manifest_bytes=manifest_bytes)
    if not snap.exists:
        raise NotFoundError(f"{subfolder}/ does not exist in {store.name} at {sha[:12]}: check {param('subfolder')}")
    if vet is not None:
        vet(snap)
    here = snap.manifest is None and bool(snap.files) and store.kind == "repo" and step_of(subfolder) is not None
    problems = snap.problems(manifests_here=here and manifests_here(store, sha))
    if problems:
        raise IntegrityError(f"{subfolder}/ at {sha[:12]} is not a complete checkpoint: {problems[0]}")
    step = snap.manifest.step if snap.manifest and snap.manifest.step is not None else step_of(subfolder)
    return snap, CheckpointHandle(store.name, subfolder, store.pin_of(sha, subfolder, snap.manifest_bytes), step,
                                  store.settings.endpoint)
