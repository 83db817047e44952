"""The Storage Bucket store: ``hf://buckets/ORG/NAME[/PREFIX]`` behind :class:`~.base.Store`.

A bucket is mutable and unversioned: no commit pins what a reader saw, and no write is
transactional. What stands in for them:

- **the pin** of a checkpoint is ``sha256:<64 hex>`` of its manifest's bytes as stored. A
  reader pinned to it reads the folder only while the manifest still hashes to it, and
  otherwise fails: "overwritten since it was pinned". Every byte a pull takes is checked
  against the manifest's sha256 (:func:`~ckpt_action.stores.hub.fetch.fetch_file`, through the
  bucket's resolve route and Xet), so a file swapped under the manifest is refused too;
- **complete or invisible**: a write uploads every file first (after taking the folder's old
  manifest away, so no old manifest stands over new files), lists the folder afresh, holds
  it to the manifest through the one finalize (:func:`~.finalize.finalize`: every file
  present with its size and the Xet hash this store uploaded), and only then writes the
  manifest, last and alone. It then lists the folder once more: a concurrent writer that
  changed a file in between makes it take its own manifest away again and fail, so no
  manifest is left that matches neither push. A folder without a manifest is never complete.

The bucket listing gives each file's size and Xet hash, not its sha256. So the manifest
records each file's Xet hash as its upload answered it (every file is uploaded before the
manifest is planned), and a reader in any process holds the listing to the manifest by size
and Xet hash: a file overwritten after the manifest was written, even with other bytes of the
same size, makes the folder incomplete (latest passes over it, list says why, a pull at its
pin fails: overwritten since it was pinned); then every byte by sha256 as it downloads. A
manifest without Xet hashes (written before they were recorded) is held by size alone, then
by sha256. This store also maps the Xet hashes of the bytes it uploaded to their sha256, so a
push can prove what it wrote and a re-push in the same process skips what is there.

About 650 lines in one module on purpose: every method of the store interface for one
store, read side by side with :mod:`.repo` and the interface's own notes on buckets.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from ckpt_action import names
from ckpt_action.checkpoint.manifest import (
    GIT_OID_LIMIT,
    MANIFEST_NAME,
    FileDigest,
    Hasher,
    Manifest,
    RemoteFile,
    digest_bytes,
    predict_lfs,
)
from ckpt_action.checkpoint.signing import SIGNATURE_NAME
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.checkpoint.verdict import confirmed, file_problem, overwritten_file, xet_differs
from ckpt_action.errors import (
    InputError,
    IntegrityError,
    NotFoundError,
    UnreadableManifest,
    param,
    quoted,
)
from ckpt_action.handle import BUCKET_PIN_RE
from ckpt_action.stores.base import Uploaded
from ckpt_action.stores.catalog import group_checkpoints
from ckpt_action.stores.finalize import FinalizeRefused, Identity, finalize
from ckpt_action.stores.hub.bucketbatch import Add, post_batch
from ckpt_action.stores.hub.bucketreads import Listed, bucket_info, get_bucket_paths_info, list_bucket_tree
from ckpt_action.stores.hub.cas import CasUpload, Read, send_to_cas
from ckpt_action.stores.hub.failures import status_of
from ckpt_action.stores.hub.fetch import fetch_file
from ckpt_action.stores.hub.repo import folder_problem, skip_name, small_file_reader
from ckpt_action.stores.hub.transport import bind_shared_client, call, client_headers, make_api, translate
from ckpt_action.stores.inflight import upload_batches
from ckpt_action.stores.writes import LIVE, Copy, Delete, Final, Pin, Put, Write, WriteOutcome

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from ckpt_action.settings import Settings

def manifest_pin(data: bytes) -> str:
    """The pin of a checkpoint whose manifest is ``data``.

    >>> manifest_pin(b"{}")[:15]
    'sha256:44136fa3'
    """
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class BucketSnapshot(Snapshot):
    """A bucket folder's files and manifest: without a manifest it is never complete (a push
    cut short, or another tool's files), whatever it holds."""

    bucket = True


@dataclass
class _Pending:
    """The last batch of an upload inside a write, its Xet session still open."""

    cas: CasUpload
    adds: list[Add]
    known: dict[str, str | None]
    what: str


def _digest_opened(local: str, rel: str) -> FileDigest:
    """The digest of a file the push handed over as checked (often its own open file,
    ``/proc/self/fd/N``, which reopens that very inode: followed, not refused as a link)."""
    with open(local, "rb", buffering=0) as fh:
        hasher = Hasher(os.fstat(fh.fileno()).st_size)
        while chunk := fh.read(8 * 2**20):
            hasher.update(chunk)
    return hasher.digest(rel)


def _digest_sent(local: str, rel: str, sent: Read) -> FileDigest:
    """The digest of a file uploaded without one: the sha256 and size of what the upload
    read; a file small enough for a git blob id in the manifest is read again for it."""
    if sent.size > GIT_OID_LIMIT:
        with open(local, "rb", buffering=0) as fh:
            sample = fh.read(512)
        return FileDigest(sent.size, sent.sha256, None, predict_lfs(rel, sent.size, sample))
    digest = _digest_opened(local, rel)
    if digest.sha256 != sent.sha256:
        raise IntegrityError(f"{rel} changed while it was uploaded: stop writing to it before pushing it")
    return digest


def can_leave_idle(euid: int | None = None, nice_limit: int | None = None, nice: int | None = None) -> bool:
    """Whether a thread of this process put at the idle CPU policy may go back to the usual
    one (Linux): root may, and so may a user whose ``RLIMIT_NICE`` allows its nice value
    (the default limit, 0, does not). A thread that could not come back is not put there,
    so that it never waits for a core for good.

    >>> can_leave_idle(euid=0, nice_limit=0, nice=0), can_leave_idle(euid=1000, nice_limit=0, nice=0)
    (True, False)
    >>> can_leave_idle(euid=1000, nice_limit=20, nice=0)
    True
    """
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else 0
    if euid == 0:
        return True
    if nice_limit is None or nice is None:
        try:
            import resource

            nice_limit = resource.getrlimit(resource.RLIMIT_NICE)[0]
            nice = os.getpriority(os.PRIO_PROCESS, 0)
        except (ImportError, AttributeError, OSError):
            return False
    return nice_limit == -1 or 20 - nice <= nice_limit  # -1: no limit


class _IdleHash:
    """The digest of each source (:func:`_digest_opened`), taken in a thread of its own that runs, until
    :meth:`hurry`, at the idle CPU policy (Linux): on what the upload's chunking leaves of
    the cores. Hurried, it runs at the policy it started with (the caller's): on a machine
    another process keeps busy (a trainer), an idle thread could wait for a core for good;
    where it could not be brought back (:func:`can_leave_idle`), it runs at the caller's."""

    def __init__(self, sources: dict[str, tuple[str | bytes, str]]) -> None:
        """``sources``: by name, a path to open (or bytes) and the path in the checkpoint."""
        self.future: Future[dict[str, FileDigest]] = Future()
        self._lock = threading.Lock()
        self._tid: int | None = None
        self._hurried = False
        self._started_with: int | None = None
        """The policy the thread inherited: a process that yields already (watch's uploader,
        at the idle policy) keeps its hashing there when it is hurried."""
        self._sources = sources
        threading.Thread(target=self._run, name="ckpt-hash", daemon=True).start()

    def _run(self) -> None:
        with self._lock:
            self._tid = threading.get_native_id()
            if hasattr(os, "sched_getscheduler"):
                with contextlib.suppress(OSError):
                    self._started_with = os.sched_getscheduler(0)
            if not self._hurried and can_leave_idle():
                self._policy(os.SCHED_IDLE if hasattr(os, "SCHED_IDLE") else None)
        try:
            self.future.set_result({name: digest_bytes(rel, source) if isinstance(source, bytes)
                                    else _digest_opened(source, rel) for name, (source, rel) in self._sources.items()})
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread as the result
            self.future.set_exception(exc)

    def _policy(self, policy: int | None, tid: int = 0) -> None:
        if policy is not None and hasattr(os, "sched_setscheduler"):
            with contextlib.suppress(OSError):  # on Linux a thread's own policy (tid 0: the caller)
                os.sched_setscheduler(tid, policy, os.sched_param(0))

    def hurry(self) -> dict[str, FileDigest]:
        """Back to the policy the thread started with (its caller's), and the result once
        the thread has it."""
        with self._lock:
            self._hurried = True
            if self._tid is not None:
                self._policy(self._started_with, self._tid)
        return self.future.result()


_XET_UPLOADS = threading.Lock()
"""One Xet upload session at a time in this process: sessions running side by side (ranks
in one process) deduplicate against each other's xorbs before those are stored, and the
CAS then refuses the shard that names them."""


def _size_of(local: str, given: FileDigest | None) -> int:
    return given.size if given is not None else os.stat(local).st_size


def overwritten(folder: str, pin: str, why: str | None = None) -> IntegrityError:
    """A folder read at ``pin`` that no longer holds it: its manifest changed (no ``why``), or
    ``why``, a file the manifest names was replaced under it."""
    if why is not None:
        return IntegrityError(f"{folder}/ was overwritten since it was pinned ({pin[:19]}…): {why}; pull it again"
                              " by --latest")
    return IntegrityError(f"{folder}/ was overwritten since it was pinned ({pin[:19]}…): its manifest no longer"
                          " hashes to the pin; pull it again by --latest or by its new pin")


class BucketStore:
    """A Storage Bucket (or a path prefix in one) as a :class:`~ckpt_action.stores.base.Store`.

    >>> store = BucketStore(settings, "hf://buckets/org/ckpts/run-7")
    >>> store.bucket_id, store.prefix
    ('org/ckpts', 'run-7')
    """

    kind = "bucket"
    fixed_pins = False

    def __init__(self, settings: Settings, uri: str, api: HfApi | None = None) -> None:
        parsed = names.bucket(uri)
        if parsed is None:
            raise InputError(f"{param('repo')} {quoted(uri)} is not a bucket (hf://buckets/OWNER/NAME)")
        if settings.auth == "oidc":
            from ckpt_action.stores.hub.keyless import refuse_bucket

            raise refuse_bucket(uri)
        self.settings = settings
        self.name = self.repo = uri
        self.bucket_id, self.prefix = parsed
        self._api = api
        """huggingface_hub's client, made when first needed (:attr:`api`: creating a bucket);
        the reads and the batch go without it (:mod:`~ckpt_action.stores.hub.bucketreads`,
        :mod:`~ckpt_action.stores.hub.bucketbatch`)."""
        if api is None:
            bind_shared_client()
        self._sha: dict[str, str] = {}
        """Xet hash -> sha256 of the bytes this store uploaded or verified."""
        self._last_read: bytes | None = None
        self._manifests: dict[str, tuple[str, Manifest]] = {}
        """Manifests read, by pin: what a server-side copy of their files copies."""
        self._unanswered: float | None = None
        """When a batch that adds or deletes a manifest last went unanswered (a timeout or a
        dropped connection): the Hub may still carry it out, later than our retry."""
        self._writing = False
        """Inside :meth:`write`: an upload's last batch waits for the manifest (:meth:`_start_pending`)."""
        self._pending: _Pending | None = None
        self._staged: dict[str, Add] = {}
        """Manifests whose bytes are in the CAS already, by path, until their write."""
        self._cleared: set[str] = set()
        """Folders whose manifest an upload inside the current write took away."""
        self._bare: set[str] = set()
        """Folders listed inside the current write without a manifest: an upload into one
        has none to take away first."""

    # ------------------------------------------------------------------ plumbing

    def path(self, rel: str) -> str:
        """A path from the store's root (the prefix) as the bucket names it."""
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(self.settings, what, fn, *args, repo=self.name, **kwargs)
        except Exception as exc:
            error = self.error(exc, what)
            if error is exc:  # ours already: its cause stays the client's error
                raise
            raise error from exc

    @property
    def api(self) -> HfApi:
        """huggingface_hub's client for this store's endpoint and token, made on first use."""
        if self._api is None:
            self._api = make_api(self.settings)
        return self._api

    def _headers(self) -> dict[str, str]:
        """The headers of a read: the client's own where there is one, the same without it."""
        if self._api is not None:
            return self._api._build_hf_headers()
        return client_headers(self.settings.endpoint, self.settings.token or None)

    def error(self, exc: BaseException, what: str) -> Exception:
        from huggingface_hub.errors import BucketNotFoundError

        cause = exc.__cause__ if exc.__cause__ is not None else exc
        if isinstance(exc, BucketNotFoundError) or isinstance(cause, BucketNotFoundError):
            return NotFoundError(f"{what}: bucket {self.bucket_id} not found at {self.settings.endpoint}, or not"
                                 f" visible to this token: check {param('repo')} and HF_TOKEN")
        return translate(exc, what, self.settings, self.name)

    def file_url(self, pin: str, path: str) -> str:
        return f"{self.settings.endpoint}/buckets/{self.bucket_id}/resolve/{quote(self.path(path))}"

    def headers(self) -> dict[str, str]:
        headers = self._headers()
        headers["Accept-Encoding"] = "identity"
        return headers

    def identity(self, folder: str, step: int | None) -> Identity:
        return Identity(f"{self.settings.endpoint}/{self.name}", folder, step)

    def _list(self, rel: str | None, *, recursive: bool, what: str) -> list[tuple[str, Listed]]:
        """Entries under ``rel`` (from the store's root; None: the root), every page, within
        the listing bounds; each path checked to lie under it and made relative to the root."""
        under = self.path(rel) if rel else self.prefix
        prefix = under + "/" if under else None
        # Each page is retried on its own (read_pages); _call words what still fails for a bucket.
        entries = self._call(what, lambda: list_bucket_tree(self.settings, self._headers(), self.bucket_id, prefix,
                                                            recursive=recursive, what=what))
        root = self.prefix + "/" if self.prefix else ""
        checked = []
        for entry in entries:
            path = str(entry.path)
            if (prefix and not path.startswith(prefix)) or not path.startswith(root):
                raise IntegrityError(f"the Hub listed {quoted(path)} under {prefix or '/'}: refusing a listing that"
                                     " escapes the folder")
            rel_path = path[len(root):]
            if not entry.folder and (not names.safe_relative(rel_path) or names.file_name_problem(rel_path)):
                raise IntegrityError(f"the Hub listed {quoted(path)} in {self.name}, which is not a usable"
                                     " path: refusing the listing")
            checked.append((rel_path, entry))
        return checked

    # ------------------------------------------------------------------ reading

    def resolve(self, revision: str | None) -> Pin | None:
        """``LIVE`` (the bucket is read now; it must exist), or the pin ``revision`` names."""
        if revision is None:
            # No request of its own: the listing or read that follows answers 404 for a
            # missing bucket, and says so (latest then costs a request less).
            return LIVE
        if revision == LIVE:
            return LIVE
        if BUCKET_PIN_RE.match(revision):
            return revision
        raise InputError(f"{param('revision')} {quoted(revision)}: a bucket has no branches, tags or commits; give"
                         " a checkpoint's pin sha256:<64 hex>, or leave it out", param="revision")

    def head(self, revision: str | None) -> Pin | None:
        return self.resolve(revision)

    def read_pinned(self, pin: Pin, path: str, *, missing_ok: bool = False) -> tuple[bytes | None, Pin]:
        """Read at ``pin``: a folder's own pin is its manifest's sha256 (:meth:`pin_of`)."""
        return self.read_small_file(pin, path, missing_ok=missing_ok), pin

    def pin_of(self, pin: Pin, folder: str, manifest_bytes: bytes | None) -> Pin:
        """A folder is pinned by its manifest's sha256."""
        return manifest_pin(manifest_bytes) if manifest_bytes is not None else pin

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """A bucket has no branches nor tags."""
        return {}, {}

    def create_tag(self, tag: str, pin: Pin, message: str | None = None) -> None:
        raise InputError(f"{param('tag')} {quoted(tag)}: a bucket has no tags; promote into a model repo"
                         f" ({param('to_repo')}) to tag a release", param="tag")

    def create_branch(self, branch: str, pin: Pin) -> None:
        raise InputError(f"{param('branch')} {quoted(branch)}: a bucket has no branches; leave it out",
                         param="branch")

    def info(self) -> Any:
        return self._call(f"reading bucket {self.bucket_id}", bucket_info, self.settings, self._headers(),
                          self.bucket_id)

    def folders(self, pin: Pin) -> dict[str, str]:
        """The top-level folders, one non-recursive listing; each one's id is its manifest path."""
        out: dict[str, str] = {}
        for rel, entry in self._list(None, recursive=False, what=f"listing {self.name}"):
            if entry.folder:
                why = folder_problem(rel)
                if why is None:
                    out[rel] = f"{rel}/{MANIFEST_NAME}"
                else:
                    skip_name(rel, why)
        return out

    def _remote_file(self, entry: Listed) -> RemoteFile:
        """A listed file: its size, its Xet hash (compared with the manifest's), and its
        sha256 where this store uploaded or verified those very bytes."""
        assert entry.size is not None  # a file's, checked by the listing (bucketreads._listed)
        xet = entry.xet_hash
        return RemoteFile(entry.size, None, self._sha.get(xet) if xet else None, xet)

    def files(self, pin: Pin, folder: str) -> dict[str, RemoteFile]:
        out: dict[str, RemoteFile] = {}
        for rel, entry in self._list(folder, recursive=True, what=f"listing {folder}/"):
            if not entry.folder:
                out[rel[len(folder) + 1:]] = self._remote_file(entry)
        if self._writing:
            (self._bare.add if MANIFEST_NAME not in out else self._bare.discard)(folder)
        return out

    def xet_hashes(self, folder: str) -> dict[str, tuple[int, str]]:
        """The folder's files (relative) with their size and Xet hash, from one fresh listing."""
        listing = self._list(folder, recursive=True, what=f"listing {folder}/")
        return {rel[len(folder) + 1:]: (self._remote_file(e).size, str(e.xet_hash)) for rel, e in listing
                if not e.folder}

    def catalog(self, pin: Pin) -> tuple[dict[str, dict[str, RemoteFile]], dict[str, str]]:
        return group_checkpoints((rel, self._remote_file(e)) for rel, e in
                                 self._list(None, recursive=True, what=f"listing {self.name}")
                                 if not e.folder), {}

    def existing(self, pin: Pin, paths: list[str]) -> set[str]:
        if not paths:
            return set()
        found = self._call(f"reading {len(paths)} path(s)",
                           lambda: list(self._paths_info([self.path(p) for p in paths])))
        wanted = {self.path(p): p for p in paths}
        return {wanted[str(e.path)] for e in found if str(e.path) in wanted}

    def _paths_info(self, paths: list[str]) -> list[Listed]:
        """The files of ``paths`` that exist."""
        return list(get_bucket_paths_info(self.settings, self._headers(), self.bucket_id, paths))

    def folder_id(self, pin: Pin, folder: str) -> str | None:
        return None  # a bucket has no tree ids: readers list the folder

    def read_small_file(self, pin: Pin, path: str, *, missing_ok: bool = False) -> bytes | None:
        """GET one small file through the bucket's resolve route, bounded; a manifest read at
        a pin must hash to it."""
        read = small_file_reader(self.settings, self.file_url(pin, path), self.headers(), path, missing_ok=missing_ok)
        data = cast("bytes | None", self._call(f"reading {path}", read))
        if posixpath.basename(path) == MANIFEST_NAME:
            if data is not None and BUCKET_PIN_RE.match(pin) and manifest_pin(data) != pin:
                raise overwritten(posixpath.dirname(path), pin)
            self._last_read = data
        return data

    def snapshot(self, pin: Pin, folder: str, manifest_bytes: bytes | None = None,
                 files: dict[str, RemoteFile] | None = None) -> Snapshot:
        """The folder's files and manifest; its ``revision`` is the manifest's pin (``pin``
        when it has none)."""
        files = dict(files) if files is not None else self.files(pin, folder)
        manifest, data, revision = None, None, pin
        if MANIFEST_NAME in files:
            data = manifest_bytes or self.read_small_file(pin, f"{folder}/{MANIFEST_NAME}")
            assert data is not None
            revision = manifest_pin(data)
            if BUCKET_PIN_RE.match(pin) and revision != pin:
                raise overwritten(folder, pin)
            try:
                manifest = Manifest.from_json(data)
            except UnreadableManifest as exc:
                raise UnreadableManifest(f"{folder}/: {exc}") from exc
            del files[MANIFEST_NAME]
            if BUCKET_PIN_RE.match(pin):
                for rel, want in sorted(manifest.files.items()):
                    if (got := files.get(rel)) is not None and xet_differs(want, got):
                        raise overwritten(folder, pin, overwritten_file(rel, got, want))
            self._last_read = data
            self._manifests[revision] = (folder, manifest)
        elif BUCKET_PIN_RE.match(pin):
            raise overwritten(folder, pin)
        sig = files.get(SIGNATURE_NAME)
        if manifest is not None and sig is not None and sig.lfs_sha256 is None:
            # The one file a manifest cannot list, and a bucket lists no sha256: read it once, so
            # what is verified and what a pull then takes are the same bytes.
            signature = self.read_small_file(pin, f"{folder}/{SIGNATURE_NAME}")
            assert signature is not None
            files[SIGNATURE_NAME] = RemoteFile(len(signature), None, hashlib.sha256(signature).hexdigest())
        return BucketSnapshot(revision, folder, files, manifest, data)

    def download(self, pin: Pin, path: str, dest: Path, want: FileDigest, stop: Callable[[], None] | None = None,
                 *, alone: bool = True) -> FileDigest:
        """One file through the bucket's resolve route (Xet), every byte checked against
        the pinned manifest's digest; bytes that differ mean the file was overwritten."""
        try:
            return fetch_file(self, pin, path, dest, want, stop, alone=alone)
        except IntegrityError as exc:
            if BUCKET_PIN_RE.match(pin) and "does not match" in str(exc):
                raise IntegrityError(f"{path} was overwritten since it was pinned ({pin[:19]}…): {exc}") from exc
            raise

    def usage(self) -> int | None:
        size = self.info().get("size")
        return size if isinstance(size, int) else None

    # ------------------------------------------------------------------ writing

    def ensure(self, branch: str | None, private: bool) -> Pin | None:
        """``LIVE``, creating the bucket, private, if it does not exist."""
        if branch is not None:
            raise InputError(f"{param('branch')} {quoted(branch)}: a bucket has no branches; leave it out",
                             param="branch")
        try:
            self.info()
        except NotFoundError:
            self._call(f"creating bucket {self.bucket_id}", self.api.create_bucket, self.bucket_id,
                       private=private, exist_ok=True)
        return LIVE

    def _clear_manifest(self, folder: str) -> None:
        """Take ``folder``'s manifest away (one paths-info, and a delete when there is one),
        before any of its files is written: no old manifest over new files."""
        path = f"{folder}/{MANIFEST_NAME}"
        if self.existing(LIVE, [path]):
            self._batch([Delete(path)], f"taking {path} away before writing {folder}/")

    def _copies(self, ops: list[Copy]) -> list[tuple[str, str, str, str]]:
        """Server-side copies by Xet hash (0 bytes sent), each of a file whose identity the
        one verdict confirmed: its size and Xet hash now (one paths-info) are the pinned
        manifest's. A manifest without Xet hashes (written before they were recorded)
        vouches for sha256 only, which the listing cannot show: those bytes are read and
        checked first (:meth:`_confirm_by_reading`), never copied on trust."""
        if not ops:
            return []
        sources = [self.path(o.src) for o in ops]
        found = self._call(f"reading {len(ops)} path(s) to copy",
                           lambda: list(self._paths_info(sources)))
        by_path = {str(e.path): e for e in found}
        out = []
        for op in ops:
            entry = by_path.get(self.path(op.src))
            folder, manifest = self._manifests.get(op.pin, ("", None))
            want = manifest.files.get(op.src[len(folder) + 1:]) if manifest is not None else None
            if want is None:
                raise IntegrityError(f"{op.src} was not read under a pinned manifest ({op.pin[:19]}…): nothing copied")
            listed = None if entry is None else self._remote_file(entry)
            if entry is None or listed is None or file_problem(op.src, want, listed) is not None:
                raise IntegrityError(f"{op.src} changed since it was pinned ({op.pin[:19]}…): nothing copied")
            if not confirmed(want, listed):
                self._confirm_by_reading(op, want, str(entry.xet_hash))
            if want.sha256 is not None:
                self._sha[str(entry.xet_hash)] = want.sha256
            out.append(("bucket", self.bucket_id, str(entry.xet_hash), self.path(op.dst)))
        return out

    def _confirm_by_reading(self, op: Copy, want: FileDigest, xet: str) -> None:
        """Read ``op.src`` whole and hold its bytes to ``want`` (sha256, through the one
        verdict on bytes the download applies); then its Xet hash must still be ``xet``, so
        the bytes read are the ones the copy names."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="ckpt-promote-") as tmp:
            try:
                self.download(op.pin, op.src, Path(tmp) / "file", want)
            except IntegrityError as exc:
                raise IntegrityError(f"{op.src}: its bytes are not the pinned manifest's, read to check them because"
                                     f" the manifest records no Xet hash ({exc}); nothing copied") from exc
        again = self._call(f"reading {op.src}",
                           lambda: list(self._paths_info([self.path(op.src)])))
        if [str(e.xet_hash) for e in again] != [xet]:
            raise IntegrityError(f"{op.src} changed while it was read to check it ({op.pin[:19]}…): nothing copied")

    def _batch(self, ops: Sequence[Put | Delete | Copy], what: str) -> dict[str, Read]:
        """One batch of adds, copies and deletes; what was read of each added path."""
        adds, known = self._adds(ops)
        copies = self._copies([op for op in ops if isinstance(op, Copy)])
        deletes = [self.path(op.path) for op in ops if isinstance(op, Delete)]
        return self._send(adds, known, copies, deletes, what)

    def _adds(self, ops: Sequence[Put | Delete | Copy]) -> tuple[list[Add], dict[str, str | None]]:
        """The adds for the files of ``ops``, and the sha256 known of each; a manifest whose
        bytes are in the CAS already (:meth:`_settle_pending`) is not sent again."""
        adds: list[Add] = []
        known: dict[str, str | None] = {}
        for op in ops:
            if not isinstance(op, Put) or op.uploaded is not None:
                continue  # a Put with a token: sent by upload() under its final path already
            dest = self.path(op.path)
            staged = self._staged.pop(dest, None)
            if staged is not None and op.data is not None and staged.source == op.data:
                adds.append(staged)
                known[dest] = hashlib.sha256(op.data).hexdigest()
            elif (source := op.data if op.data is not None else op.local) is not None:
                adds.append(Add(source if isinstance(source, bytes) else str(source), dest))
                known[dest] = op.digest.sha256 if op.digest is not None else None
            else:
                raise IntegrityError(f"{op.path}: a bucket write needs the file's bytes (uploaded by another"
                                     " writer is not supported here)")
        return adds, known

    def _send(self, adds: list[Add], known: dict[str, str | None], copies: list[Any], deletes: list[str],
              what: str) -> dict[str, Read]:
        """Send the bytes of ``adds`` that are not in the CAS yet, then the batch; retried
        whole as any call (a retry sends only the bytes that have no Xet hash yet)."""
        if adds and self._pending is not None:
            self._settle_pending([])  # its session holds the one Xet upload lock
        if adds or copies or deletes:
            manifest = any(posixpath.basename(p) == MANIFEST_NAME for p in [*deletes, *(a.destination for a in adds)])

            def send() -> None:
                # huggingface_hub retries a batch whose answer timed out by itself, so an attempt
                # given up on shows only in the time the call took (at least CKPT_TIMEOUT).
                with _XET_UPLOADS if adds else nullcontext():
                    # The bytes first, hashed as they are read; the batch names them by Xet hash.
                    unsent = [a for a in adds if a.xet_hash is None]
                    if unsent:
                        sent = send_to_cas(self.settings.endpoint, self._headers(), self.bucket_id, unsent, known)
                        for dest, read in sent.items():
                            known[dest] = read.sha256
                    started = time.monotonic()
                    try:
                        post_batch(self.settings.endpoint, self._headers(), self.bucket_id, adds=adds,
                                   copies=copies, deletes=deletes)
                    except Exception as exc:
                        if manifest and status_of(exc) is None:  # no answer: it may still be carried out
                            self._unanswered = time.monotonic()
                        raise
                if manifest and time.monotonic() - started >= self.settings.timeout:
                    self._unanswered = started + self.settings.timeout

            self._call(what, send)
        out = {}
        for add in adds:
            sha = known[add.destination]
            assert sha is not None and add.xet_hash is not None and add.size is not None  # the session answered each
            self._sha[add.xet_hash] = sha
            out[add.destination] = Read(add.xet_hash, sha, add.size)
        return out

    def _start_pending(self, puts: list[Put], what: str,
                       folder: str) -> tuple[dict[str, Read], dict[str, FileDigest]] | None:
        """Start the last batch of an upload into ``folder`` inside a write and answer what
        hf_xet read of each file, and the digest of each file given without one, leaving the
        session open (its bytes on their way) for the manifest the write plans from them
        (:meth:`_settle_pending`). None when the session could not be started: the batch
        then goes the usual way, retried."""
        adds, known = self._adds(puts)
        rel_of = {self.path(op.path): op.path[len(folder) + 1:] for op in puts}
        _XET_UPLOADS.acquire()
        try:
            cas = CasUpload(self.settings.endpoint, self._headers(), self.bucket_id)
        except Exception:  # noqa: BLE001 - the usual path retries it, and words what fails again
            _XET_UPLOADS.release()
            return None
        # The files' sha256 is taken beside the upload, on what CPU it leaves (hf_xet's own,
        # as it chunks, slowed the chunking on two cores): the manifest needs it, not the upload.
        hashing = _IdleHash({a.destination: (a.source, rel_of[a.destination]) for a in adds
                             if not known.get(a.destination)})
        try:
            cas.start(adds, known, compute=False)
            read = cas.read()
        except BaseException as exc:
            cas.abort()
            _XET_UPLOADS.release()
            if isinstance(exc, Exception):
                return None
            raise
        self._pending = _Pending(cas, adds, known, what)
        hashed = hashing.hurry()
        for dest, digest in hashed.items():
            if digest.size != read[dest].size:
                raise IntegrityError(f"{dest} changed while it was uploaded ({digest.size} bytes hashed,"
                                     f" {read[dest].size} sent): stop writing to it before pushing it")
            known[dest] = digest.sha256
            read[dest] = replace(read[dest], sha256=digest.sha256)
        return read, hashed

    def _drop_pending(self) -> None:
        """Give the open session up, nothing registered (an interrupted write)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.cas.abort()
            _XET_UPLOADS.release()

    def _settle_pending(self, manifests: list[Put]) -> None:
        """Add ``manifests`` (their bytes) to the open session, wait until it has stored
        everything, and register the batch's files by their paths: as any batch, the files
        are on the Hub once this ends. A manifest's bytes stay staged for the write that
        publishes it, last and alone. A session that failed is given up and the batch sent
        the usual way, retried."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        extra, _known = self._adds(manifests)
        try:
            pending.cas.start(extra, {})
            read = pending.cas.finish()
        except Exception:  # noqa: BLE001 - the usual path below retries it, and words what fails again
            pending.cas.abort()
            extra, read = [], {}
        finally:
            _XET_UPLOADS.release()
        for add in extra:
            self._staged[add.destination] = add
        for dest, got in read.items():
            if dest in pending.known and got.sha256 is not None:
                pending.known[dest] = got.sha256
        self._send(pending.adds, pending.known, [], [], pending.what)

    def upload(self, folder: str, files: Mapping[str, tuple[str, FileDigest | None]], *, branch: str = "main",
               progress: str | None = None, what: str | None = None) -> dict[str, Uploaded]:
        """Hash and send ``files`` under their final paths in ``folder`` (its manifest taken
        away first), in bounded batches (:func:`~ckpt_action.stores.inflight.upload_batches`), one after another: each
        batch's Xet shard and paths are on the Hub once it ends, so a push killed part-way
        and run again sends again at most the batch in flight (its files' bytes that reached
        the CAS before are found by deduplication, or its paths by the listing). The folder
        has no manifest meanwhile: none of it is a checkpoint until the manifest, last.
        Inside a write, the last batch answers once hf_xet has read its files, and its
        session stays open for the manifest the write plans next (:meth:`_start_pending`);
        its shard and paths are on the Hub before the manifest is published.
        Each file's digest and Xet hash."""
        if not files:
            return {}
        if folder not in self._bare:  # listed just now, inside this write, without one: no request
            self._clear_manifest(folder)
        if self._writing:
            self._cleared.add(folder)
        out = {}
        sizes = [(rel, _size_of(local, given)) for rel, (local, given) in sorted(files.items())]
        batches = upload_batches(sizes, self.settings.upload_batch_bytes)
        label = what or f"uploading {len(files)} file(s) of {folder}"

        # A file not hashed yet is hashed by the upload's own read (hf_xet computes its
        # sha256 as it chunks, see .hub.cas), or, in the last batch inside a write, beside it.
        for n, batch in enumerate(batches):
            puts = [Put(f"{folder}/{rel}", files[rel][1], local=files[rel][0]) for rel in batch]
            what_batch = label if len(batches) == 1 else f"{label} ({', '.join(batch)[:200]})"
            # Inside a write, the last batch's session stays open for the manifest planned next.
            pending = (self._start_pending(puts, what_batch, folder) if self._writing and n == len(batches) - 1
                       else None)
            sent, hashed = pending if pending is not None else (self._batch(puts, what_batch), {})
            for rel in batch:
                local, given = files[rel]
                dest = self.path(f"{folder}/{rel}")
                got = sent[dest]
                digest = given or hashed.get(dest) or _digest_sent(local, rel, got)
                out[rel] = Uploaded(replace(digest, xet=got.xet), got.xet)  # the manifest records it
        return out

    @staticmethod
    def _publishing(listed: Mapping[str, RemoteFile]) -> dict[str, FileDigest | RemoteFile]:
        """A folder's listing, each file as the one finalize compares it: its sha256 where
        this store wrote or verified those very bytes (by Xet hash, :meth:`files`)."""
        return {rel: FileDigest(f.size, f.lfs_sha256, xet=f.xet) if f.lfs_sha256 is not None else f
                for rel, f in listed.items()}

    def write(self, plan: Callable[[Pin | None], Write | None], *, what: str, branch: str = "main",
              head: Pin | None = None, max_writes: int = 1, replan_on: Callable[[BaseException], bool] | None = None,
              on_landed: Callable[[Pin, Write], None] | None = None) -> WriteOutcome:
        """Each write ``plan`` answers: the old manifest away, the files' batch, and for a
        write that finalizes, the one finalize against a fresh listing, then the manifest
        last and alone, then a listing that must still agree with it."""
        if branch != "main":
            raise InputError(f"{param('branch')} {quoted(branch)}: a bucket has no branches; leave it out",
                             param="branch")
        self._writing, self._cleared, self._bare = True, set(), set()
        try:
            outcome = self._write(plan, what, max_writes, on_landed)
        except Exception:
            with contextlib.suppress(Exception):  # the error that ended the write is the one to tell
                self._settle_pending([])  # what was sent is registered: a re-run skips it
            raise
        except BaseException:  # interrupted: stop sending
            self._drop_pending()
            raise
        finally:
            self._writing, self._staged = False, {}
        self._settle_pending([])
        return outcome

    def _write(self, plan: Callable[[Pin | None], Write | None], what: str, max_writes: int,
               on_landed: Callable[[Pin, Write], None] | None) -> WriteOutcome:
        landed: list[Write] = []
        pin: Pin | None = None
        last: Write | None = None
        for _ in range(max(1, max_writes)):
            wanted = plan(LIVE)
            if self._pending is not None:  # an upload's last batch: the manifest goes in its session
                self._settle_pending([op for op in (wanted.operations if wanted and wanted.finalizes else [])
                                      if isinstance(op, Put) and op.data is not None
                                      and posixpath.basename(op.path) == MANIFEST_NAME])
            if wanted is None:
                if not landed and self._last_read is not None:
                    pin = manifest_pin(self._last_read)
                break
            operations = self._expand(wanted.operations, what)
            manifests = [op for op in operations
                         if isinstance(op, Put) and posixpath.basename(op.path) == MANIFEST_NAME]
            rest = [op for op in operations if op not in manifests]
            touched = {posixpath.dirname(op.path) for op in manifests}
            for folder in sorted(touched - self._cleared):  # upload() took the others' away just before
                self._clear_manifest(folder)
            for op in rest:  # sent by upload(), here or on another rank: the Xet hash its bytes have
                if isinstance(op, Put) and isinstance(op.uploaded, str) and op.digest and op.digest.sha256:
                    self._sha[op.uploaded] = op.digest.sha256
            self._batch(rest, f"{what}: writing {len(rest)} file(s)")
            if wanted.finalizes is not None:
                pin = self._publish(wanted, manifests, what)
            landed.append(wanted)
            last = wanted
            if on_landed is not None:
                on_landed(pin or LIVE, wanted)
            if wanted.final:
                break
        return WriteOutcome(pin, landed, last)

    def _expand(self, operations: list[Put | Delete | Copy], what: str) -> list[Put | Delete | Copy]:
        """A folder's delete (``name/``, prune) as its files' deletes, its manifest deleted
        first, alone: a half-deleted folder is never complete."""
        out: list[Put | Delete | Copy] = []
        for op in operations:
            if isinstance(op, Delete) and op.path.endswith("/"):
                folder = op.path.rstrip("/")
                self._clear_manifest(folder)
                out += [Delete(f"{folder}/{rel}") for rel in sorted(self.xet_hashes(folder))]
            else:
                out.append(op)
        return out

    def _publish(self, wanted: Write, manifests: list[Put], what: str) -> Pin:
        final = wanted.finalizes
        assert final is not None
        folder = final.identity.folder.rstrip("/")
        data = next((op.data for op in manifests if op.path == f"{folder}/{MANIFEST_NAME}"), None)
        if data is None:
            raise FinalizeRefused(f"not publishing {folder}/: the write carries no manifest; nothing was published")
        try:
            self._finalize(final, folder, data)
        except FinalizeRefused as exc:
            if not any(w in str(exc) for w in ("is missing", "is not the file the manifest lists")):
                raise
            # This write's batches were answered: a file they wrote that is gone or other now is a race.
            raise FinalizeRefused(f"{exc}: another writer changed {folder}/ after this write sent its files;"
                                  " write again once it is done") from exc
        self._batch([Put(f"{folder}/{MANIFEST_NAME}", data=data)], f"{what}: writing the manifest")
        pin = manifest_pin(data)
        # A writer that changed a file between the finalize and the manifest: ours goes again.
        try:
            self._finalize(final, folder, data)
        except FinalizeRefused as exc:
            if self.read_small_file(LIVE, f"{folder}/{MANIFEST_NAME}", missing_ok=True) == data:
                self._batch([Delete(f"{folder}/{MANIFEST_NAME}")], f"{what}: taking the manifest away again")
            raise IntegrityError(f"{folder}/ changed while its manifest was written (another writer?): {exc}; the"
                                 " manifest was taken away again") from exc
        self._outlive_unanswered(final, folder, data, what)
        self._last_read = data
        return pin

    def _finalize(self, final: Final, folder: str, data: bytes) -> None:
        """The one finalize of the manifest ``data`` against what ``folder`` holds now (a
        fresh listing)."""
        finalize(final.identity, data, contributors=final.contributors,
                 publishing=self._publishing(self.files(LIVE, folder)), who=final.who)

    def _outlive_unanswered(self, final: Final, folder: str, data: bytes, what: str) -> None:
        """A batch of this push that touched a manifest and got no answer may be carried out
        after its retry, even after our manifest was written: a late delete of the old
        manifest would take ours away, and the push would report a pin nothing holds. So
        such a push waits until the Hub would have answered it (``request_deadline`` after
        it was sent), then reads its manifest again and, if it is gone, finalizes and writes
        it once more (as many times as retries allow)."""
        path = f"{folder}/{MANIFEST_NAME}"
        for _ in range(self.settings.retries + 1):
            if self._unanswered is None:
                return
            left = self._unanswered + self.settings.request_deadline - time.monotonic()
            self._unanswered = None
            if left > 0:
                time.sleep(left)
            now = self.read_small_file(LIVE, path, missing_ok=True)
            if now == data:
                return
            if now is not None:
                raise IntegrityError(f"{folder}/ changed while its manifest was written (another writer?): it holds"
                                     " another manifest now; nothing of ours was left published")
            self._finalize(final, folder, data)
            self._batch([Put(path, data=data)], f"{what}: writing the manifest again (a late delete took it away)")
        raise IntegrityError(f"{folder}/: the manifest could not be made to stand (writes kept going unanswered);"
                             " nothing is pinned: push again")
