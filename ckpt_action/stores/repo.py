"""The model repo store: today's git-repo behaviour behind :class:`~ckpt_action.stores.base.Store`.

Reads go to :class:`~ckpt_action.stores.hub.repo.RemoteRepo` (every read at a pinned SHA,
bounded), file bodies to :func:`~ckpt_action.stores.hub.fetch.fetch_file`, and writes to
:func:`~ckpt_action.stores.hub.commits.commit` (one commit per :class:`~.base.Write`, pinned to
its parent). This is the one module that turns the store-neutral operations into
huggingface_hub's ``CommitOperation*``, and that calls the one finalize before a commit
that publishes a complete manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, FileDigest, RemoteFile, digest_bytes, predict_lfs
from ckpt_action.errors import quoted
from ckpt_action.progress import Ticker, bytes_read_since_now
from ckpt_action.stores.base import Uploaded
from ckpt_action.stores.catalog import group_checkpoints, owner_of
from ckpt_action.stores.finalize import Identity, finalize
from ckpt_action.stores.hub.commits import commit
from ckpt_action.stores.hub.fetch import fetch_file
from ckpt_action.stores.hub.listing import Entry, path_problem
from ckpt_action.stores.hub.repo import RemoteRepo, Snapshot, folder_problem, skip_name
from ckpt_action.stores.hub.transport import call
from ckpt_action.stores.inflight import each_file, upload_batches
from ckpt_action.stores.writes import Copy, Delete, Pin, Put, Write, WriteOutcome

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from ckpt_action.settings import Settings

DEFAULT_BRANCH = "main"


class RepoStore:
    """A model repo as a :class:`~ckpt_action.stores.base.Store`.

    >>> store = RepoStore.open(settings, "org/run")
    >>> pin = store.resolve(None)
    >>> sorted(store.folders(pin))
    ['checkpoint-200', 'checkpoint-300']
    """

    kind = "repo"
    fixed_pins = True

    def __init__(self, remote: RemoteRepo) -> None:
        self.remote = remote
        self.name = remote.repo
        self.settings: Settings = remote.settings

    @property
    def api(self) -> HfApi:
        """The huggingface_hub client this store calls (a second store can share it)."""
        return self.remote.api

    @classmethod
    def open(cls, settings: Settings, repo: str, api: HfApi | None = None) -> RepoStore:
        return cls(RemoteRepo(settings, repo, api=api))

    def identity(self, folder: str, step: int | None) -> Identity:
        return Identity(f"{self.settings.endpoint}/{self.name}", folder, step)

    # ------------------------------------------------------------------ reading

    def resolve(self, revision: str | None) -> Pin | None:
        return self.remote.resolve(revision)

    def head(self, revision: str | None) -> Pin | None:
        """The default branch by name (no request: :meth:`read_pinned` settles the commit, from
        the Hub's own answer); a named revision is resolved, so a name that is both a branch
        and a tag means the branch, as everywhere else."""
        return DEFAULT_BRANCH if revision is None else self.resolve(revision)

    def read_pinned(self, pin: Pin, path: str, *, missing_ok: bool = False) -> tuple[bytes | None, Pin]:
        """A commit reads at itself; the default branch's name at the commit the Hub answered from."""
        if pin == DEFAULT_BRANCH:
            return self.remote.read_at_head(pin, path, missing_ok=missing_ok)
        return self.read_small_file(pin, path, missing_ok=missing_ok), pin

    def pin_of(self, pin: Pin, folder: str, manifest_bytes: bytes | None) -> Pin:
        """A repo's folders are pinned by the commit they were read at."""
        return pin

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        return self.remote.refs()

    def folders(self, pin: Pin) -> dict[str, str]:
        return self.remote.top_level_folders(pin)

    def files(self, pin: Pin, folder: str) -> dict[str, RemoteFile]:
        return self.remote.files(pin, folder)

    def catalog(self, pin: Pin) -> tuple[dict[str, dict[str, RemoteFile]], dict[str, str]]:
        """Every checkpoint folder at ``pin`` with its files, from one recursive listing
        (paged, within the listing bounds): the top-level ``checkpoint-N`` folders and any
        folder holding a manifest; and, for a folder the Hub listed an unusable path in, why
        it cannot be described. A folder name that is not usable is skipped with a warning."""
        listing = self.remote.list_tree(pin, recursive=True)
        unusable = _unusable_paths(listing.unusable)
        grouped = group_checkpoints((e.path, RemoteFile(e.size, e.oid, e.lfs_sha256))
                                    for e in listing.entries if not e.folder)
        tainted: dict[str, str] = {}
        for path, why in unusable:
            if (owner := owner_of(path, grouped)) is not None:
                tainted.setdefault(owner, f"the Hub listed {quoted(path)} in it, which {why}")
        return grouped, tainted

    def existing(self, pin: Pin, paths: list[str]) -> set[str]:
        return self.remote.existing(pin, paths)

    def folder_id(self, pin: Pin, folder: str) -> str | None:
        return self.remote.folder_id(pin, folder)

    def read_small_file(self, pin: Pin, path: str, *, missing_ok: bool = False) -> bytes | None:
        return self.remote.read_small_file(pin, path, missing_ok=missing_ok)

    def snapshot(self, pin: Pin, folder: str, manifest_bytes: bytes | None = None,
                 files: dict[str, RemoteFile] | None = None) -> Snapshot:
        return self.remote.snapshot(pin, folder, manifest_bytes=manifest_bytes, files=files)

    def download(self, pin: Pin, path: str, dest: Path, want: FileDigest, stop: Callable[[], None] | None = None,
                 *, alone: bool = True) -> FileDigest:
        return fetch_file(self.remote, pin, path, dest, want, stop, alone=alone)

    def error(self, exc: BaseException, what: str) -> Exception:
        return self.remote.error(exc, what)

    # The git history and LFS objects of a repo (prune's free-storage, list): repo-only reads.
    def list_tree(self, pin: Pin, path: str | None = None, *, recursive: bool = False,
                  what: str = "listing the repo") -> Any:
        return self.remote.list_tree(pin, path, recursive=recursive, what=what)

    def history(self, pin: Pin, *, until: str | None, limit: int) -> list[tuple[str, str]]:
        return self.remote.history(pin, until=until, limit=limit)

    def call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """One call of the client's ``method`` on this repo, with retries and error translation."""
        return call(self.settings, what, getattr(self.remote.api, method), self.name, *args, repo=self.name,
                    **kwargs)

    # ------------------------------------------------------------------ writing

    def ensure(self, branch: str | None, private: bool) -> Pin | None:
        """The head of ``branch`` (None: main), creating the repo, private, if it does not exist."""
        from ckpt_action.errors import NotFoundError

        try:
            return self.remote.resolve(branch)
        except NotFoundError:
            # Only a missing repo gets created, so an existing one keeps its visibility.
            self.call("creating the repo", "create_repo", private=private, exist_ok=True)
            return self.remote.resolve(branch)

    def create_branch(self, branch: str, pin: Pin) -> None:
        self.call(f"creating branch {branch}", "create_branch", branch=branch, revision=pin, exist_ok=True)

    def create_tag(self, tag: str, pin: Pin, message: str | None = None) -> None:
        self.call(f"creating tag {tag}", "create_tag", tag=tag, revision=pin, tag_message=message)

    def usage(self) -> int | None:
        """The repo's storage as the Hub reports it (``expand=["usedStorage"]``), None where it does not."""
        info = self.call("reading the repo's storage", "model_info", expand=["usedStorage"])
        used = getattr(info, "used_storage", None)
        return used if isinstance(used, int) and not isinstance(used, bool) and used >= 0 else None

    def delete_objects(self, chosen: Mapping[str, int], *, batch: int) -> None:
        """Permanently delete these LFS objects (sha256 to size), ``batch`` per request,
        without rewriting history (prune's free-storage)."""
        from datetime import datetime, timezone

        from huggingface_hub.hf_api import LFSFileInfo

        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        # Only file_oid is sent; the rest is what the class requires.
        files = [LFSFileInfo(fileOid=sha, oid=sha, filename=sha, size=size, pushedAt=now)
                 for sha, size in chosen.items()]
        for start in range(0, len(files), batch):
            self.call("permanently deleting the pruned checkpoints' files", "permanently_delete_lfs_files",
                      files[start:start + batch], rewrite_history=False)

    def _add(self, path: str, local: str, digest: FileDigest | None) -> Any:
        from huggingface_hub import CommitOperationAdd

        op = CommitOperationAdd(path_in_repo=path, path_or_fileobj=local)
        if digest is not None:
            # Hashed once already, and the Hub must be told what was hashed: if the bytes
            # sent differ, the upload or the proof fails rather than the manifest lying.
            assert digest.sha256 is not None
            op.upload_info.sha256 = bytes.fromhex(digest.sha256)
            op.upload_info.size = digest.size
        return op

    def upload(self, folder: str, files: Mapping[str, tuple[str, FileDigest | None]], *, branch: str = "main",
               progress: str | None = None, what: str | None = None) -> dict[str, Uploaded]:
        """Preupload ``files`` (relative path to (a path to open, its digest if hashed
        already)) under ``folder``; each one's digest as uploaded (sha256 from the upload's
        own read when none was given) and token. ``what`` words a failure."""
        ops = {rel: self._add(f"{folder}/{rel}", local, digest) for rel, (local, digest) in sorted(files.items())}
        if not ops:
            return {}
        total = sum(op.upload_info.size for op in ops.values())
        with Ticker(progress, total, bytes_read_since_now()) if progress else nullcontext():
            # Retried whole after a transient failure: the files sent already are marked so and skipped.
            call(self.settings, what or f"uploading files of {folder}", self._preupload, list(ops.values()), branch,
                 repo=self.name)
        out = {}
        for rel, op in ops.items():
            info = op.upload_info  # sha256: what the upload read (back-filled), else what was given
            given = files[rel][1]
            digest = given or FileDigest(info.size, info.sha256.hex(), None, predict_lfs(rel, info.size, info.sample))
            out[rel] = Uploaded(digest, op, inline=op._upload_mode != "lfs")
        return out

    def _preupload(self, ops: list[Any], branch: str) -> None:
        """Send the LFS files among ``ops`` (``CommitOperationAdd``), a batch of at most
        ``upload_batch_bytes`` (or one bigger file) per call, ``upload_concurrency`` calls at
        once: each batch's LFS objects, or its Xet shard, are on the Hub as soon as its own call
        ends, so a re-run after a kill finds them and skips them (see
        :mod:`~ckpt_action.stores.inflight`). The commit that publishes them comes after, and
        sends only what is inline. Which files are LFS is asked in one request per 256. Failures
        are the client's own, for the caller to retry or translate (the commit's attempt does)."""
        from urllib.parse import quote

        from huggingface_hub import CommitOperationAdd
        from huggingface_hub._commit_api import _fetch_upload_modes

        api = self.remote.api
        adds = [op for op in ops if isinstance(op, CommitOperationAdd) and not op._is_uploaded]
        if not adds or any(op.path_in_repo == ".gitignore" for op in adds):
            return  # a .gitignore changes what is ignored: the commit's own preupload reads it
        unknown = [op for op in adds if op._upload_mode is None]
        for start in range(0, len(unknown), 256):
            _fetch_upload_modes(additions=unknown[start:start + 256], repo_type="model", repo_id=self.name,
                                headers=api._build_hf_headers(), revision=quote(branch, safe=""), endpoint=api.endpoint)
        lfs = [op for op in adds if op._upload_mode == "lfs" and not op._should_ignore]

        by_path = {op.path_in_repo: op for op in lfs}
        batches = upload_batches([(op.path_in_repo, op.upload_info.size) for op in lfs],
                                 self.settings.upload_batch_bytes)

        def send(batch: list[str]) -> None:
            api.preupload_lfs_files(self.name, additions=[by_path[p] for p in batch], revision=branch)

        each_file(batches, send, concurrency=self.settings.upload_concurrency)

    def _operation(self, op: Put | Delete | Copy) -> Any:
        from huggingface_hub import CommitOperationAdd, CommitOperationCopy, CommitOperationDelete
        from huggingface_hub.lfs import UploadInfo

        if isinstance(op, Delete):  # a path ending in "/" is a whole folder
            return CommitOperationDelete(op.path, is_folder=op.path.endswith("/"))
        if isinstance(op, Copy):
            return CommitOperationCopy(src_path_in_repo=op.src, path_in_repo=op.dst, src_revision=op.pin)
        if op.uploaded is not None:
            return op.uploaded
        if op.data is not None:
            added = CommitOperationAdd(op.path, op.data)
            if op.inline:
                added._upload_mode = "regular"
            return added
        if op.local is not None:
            return self._add(op.path, op.local, op.digest)
        # Uploaded by another contributor: the commit names it by its digest.
        assert op.digest is not None and op.digest.sha256 is not None
        added = CommitOperationAdd(op.path, b"")
        added.upload_info = UploadInfo(sha256=bytes.fromhex(op.digest.sha256), size=op.digest.size, sample=b"")
        added._upload_mode, added._is_uploaded, added._should_ignore = "lfs", True, False
        return added

    def _finalize(self, wanted: Write) -> None:
        """The one finalize, before the commit that publishes ``wanted``'s manifest."""
        final = wanted.finalizes
        assert final is not None
        prefix = final.identity.folder.rstrip("/") + "/"
        publishing: dict[str, FileDigest | RemoteFile] = dict(final.base)
        manifest: bytes | None = None
        for op in wanted.operations:
            path = op.path if isinstance(op, Delete | Put) else op.dst
            if not path.startswith(prefix):
                continue
            rel = path[len(prefix):]
            if isinstance(op, Delete):
                publishing.pop(rel, None)
            elif isinstance(op, Copy):
                publishing[rel] = op.file
            elif rel == MANIFEST_NAME:
                manifest = op.data
            elif op.data is not None:
                publishing[rel] = digest_bytes(rel, op.data)
            elif op.uploaded is not None:
                info = op.uploaded.upload_info
                publishing[rel] = FileDigest(info.size, info.sha256.hex())
            elif op.digest is not None:
                publishing[rel] = op.digest
            else:
                publishing.pop(rel, None)  # nothing says what it is: not there as listed
        if manifest is None:
            from ckpt_action.stores.finalize import FinalizeRefused

            raise FinalizeRefused(f"not publishing {final.identity.folder}/: the write carries no manifest;"
                                  " nothing was published")
        finalize(final.identity, manifest, contributors=final.contributors, publishing=publishing, who=final.who)

    def write(self, plan: Callable[[Pin | None], Write | None], *, what: str, branch: str = "main",
              head: Pin | None = None, max_writes: int = 1, replan_on: Callable[[BaseException], bool] | None = None,
              on_landed: Callable[[Pin, Write], None] | None = None) -> WriteOutcome:
        """Each :class:`~.base.Write` ``plan(head)`` answers, as one commit pinned to that
        head (:func:`~ckpt_action.stores.hub.commits.commit`); a write that finalizes passes the
        one finalize first, or nothing is committed."""
        sent: dict[int, Write] = {}

        def finalized(head: str | None) -> Write | None:
            wanted = plan(head)
            if wanted is None:
                return None
            if wanted.finalizes is not None:
                self._finalize(wanted)
            operations = [self._operation(op) for op in wanted.operations]
            # Every LFS file on the Hub, each registered as it ends, before the commit: a kill
            # in between leaves nothing visible, and a re-run sends none of them again. They are
            # sent as part of the commit's attempt (``prepare``): a file that changed after it
            # was hashed fails its upload, and that failure re-plans the push as a commit's would.
            # The commit then sends the very objects uploaded (their upload state is on them).
            made = replace(wanted, operations=operations, prepare=lambda: self._preupload(operations, branch))
            sent[id(made)] = wanted
            return made

        landed_cb = None if on_landed is None else (lambda oid, made: on_landed(oid, sent[id(made)]))
        outcome = commit(self.remote, finalized, what=what, branch=branch, head=head, max_commits=max_writes,
                         replan_on=replan_on, on_landed=landed_cb)
        return WriteOutcome(outcome.pin, [sent[id(w)] for w in outcome.landed],
                            None if outcome.last is None else sent[id(outcome.last)])


def _unusable_paths(unusable: list[tuple[Entry, str]]) -> list[tuple[str, str]]:
    """Entries of a recursive listing whose path cannot be used: under a top-level name
    that is not usable, the name is skipped with a warning (once); the others are
    returned (path, why), as the checkpoint holding one cannot be described."""
    inside: list[tuple[str, str]] = []
    skipped: set[str] = set()
    for entry, why in unusable:
        top = entry.path.split("/", 1)[0]
        top_why = path_problem(top) or folder_problem(top)
        if top_why is None:
            inside.append((entry.path, why))
        elif top not in skipped:
            skip_name(top, top_why)
            skipped.add(top)
    return inside

