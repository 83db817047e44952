"""pull: download one checkpoint at a pinned SHA, verify it, then move it into place.

Files land in a staging dir beside the target (same filesystem, so the switch is a
rename). Every listed path is checked and every file must carry a hash to check (the
manifest's sha256 or git blob id, or for checkpoints without a manifest what the tree
listing vouches for) before any download starts. Each file then comes from the cheapest
verified source:

1. the dir's earlier pull (see target.py): a file whose stat still matches the pull
   record is hard-linked into the staging dir without being read; one whose stat changed
   is re-hashed first (once per pull: the digest the look at the target made is passed down);
2. the content cache (``--cache-dir``, see cache.py): copied and hashed on the way;
3. the Hub: one GET, hashed as it streams, resumed with Range after a drop (``model.sig``
   and the signed statement of a verified pull: the bytes its signature check read).

Then the record is written, last, and the staging dir replaces the target in one rename
(or, for a mount point, entry by entry with the record removed first and written last).
A failure at any point removes the staging dir and leaves the target as it was; files of
the old pull that the new one does not have go with the old dir.

One file's download is :mod:`ckpt_action.stores.hub.fetch`'s. What stays here (about 530
lines) is the one order of sources and the switch, which read best together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ckpt_action.checkpoint.manifest import (
    MANIFEST_NAME,
    PULL_RECORD_NAME,
    FileDigest,
    Hasher,
    expected_from_remote,
)
from ckpt_action.checkpoint.signing import SIGNATURE_NAME
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.checkpoint.verdict import satisfies
from ckpt_action.disk import target as localdir
from ckpt_action.disk.cache import CacheConfig, ContentCache, Stopped, hash_copy
from ckpt_action.errors import CkptError, InputError, IntegrityError, param, quoted
from ckpt_action.handle import CheckpointHandle
from ckpt_action.names import reserved_in_target, safe_relative
from ckpt_action.progress import Ticker
from ckpt_action.settings import THREADED_HASH_MIN
from ckpt_action.stores.base import Store, open_complete

if TYPE_CHECKING:
    from ckpt_action.checkpoint.verifying import Verifier
    from ckpt_action.ops.discover import Chosen
    from ckpt_action.ops.signatures import SignatureCheck

log = logging.getLogger(__name__)
DOWNLOAD_THREADS = 8
class Cancelled(Stopped):
    """Another file of the same pull failed; this one stops instead of finishing for nothing."""


def stopped(stop: threading.Event, path: str) -> Callable[[], None]:
    """The check a download makes between reads: raise once another file of the pull failed."""
    def check() -> None:
        if stop.is_set():
            raise Cancelled(f"download of {path} stopped: another file failed")

    return check


@dataclass(frozen=True)
class Selection:
    """Which files of the checkpoint folder a pull takes: ``--include`` / ``--exclude`` globs.

    Patterns match the path inside the folder; ``*`` also matches ``/`` and a pattern
    ending in ``/`` means everything below that folder.

    >>> s = Selection(include=("*.safetensors", "config.json"), exclude=("optimizer/",))
    >>> [s.matches(p) for p in ("model.safetensors", "optimizer/state.safetensors", "optimizer.pt")]
    [True, False, False]
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, include: Iterable[str], exclude: Iterable[str]) -> Selection:
        """Check ``--include`` / ``--exclude`` before any request (exit 2 on an unusable pattern)."""
        for flag, patterns in ((f"{param('include')}", include), (f"{param('exclude')}", exclude)):
            for pattern in patterns:
                if not pattern.strip() or len(pattern) > 1000 or any(ord(c) < 32 for c in pattern):
                    raise InputError(f"{flag} {pattern!r} is not a usable pattern: give a glob such as"
                                     " '*.safetensors' (one per flag, no control characters)")
        return cls(tuple(include), tuple(exclude))

    @staticmethod
    def _hit(rel: str, patterns: Iterable[str]) -> bool:
        return any(fnmatch.fnmatchcase(rel, p + "*" if p.endswith("/") else p) for p in patterns)

    def matches(self, rel: str) -> bool:
        return (not self.include or self._hit(rel, self.include)) and not self._hit(rel, self.exclude)


@dataclass(frozen=True)
class PullResult:
    handle: CheckpointHandle
    local_dir: Path
    files: int
    """Checkpoint files now in the dir (the manifest aside)."""
    bytes: int
    verified_by: str
    """"manifest" (every file checked against the manifest's sha256 or git id) or "tree" (a
    checkpoint without a manifest, checked against the hashes the listing gives)."""
    partial: bool = False
    """Only some files of the folder were selected (``--include`` / ``--exclude``)."""
    downloaded_files: int = 0
    downloaded_bytes: int = 0
    reused_files: int = 0
    """Kept from the dir's earlier pull (hard-linked, no transfer)."""
    cached_files: int = 0
    """Copied from the content cache (no transfer)."""
    removed_files: int = 0
    """Files of the earlier pull the new one no longer has."""
    signed: bool = False
    """The folder holds a ``model.sig``."""
    signer: str | None = None
    """Who signed it, when the signature was verified."""
    signature_verified: bool = False
    provenance: dict[str, object] | None = None
    """The signed provenance statement (repo, subfolder, step, source commit, workflow run)."""


@dataclass
class _Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    downloaded: list[int] = field(default_factory=list)
    reused: int = 0
    cached: int = 0
    digests: dict[str, FileDigest] = field(default_factory=dict)

    def add(self, rel: str, digest: FileDigest, how: str) -> None:
        with self.lock:
            self.digests[rel] = digest
            if how == "download":
                self.downloaded.append(digest.size)
            elif how == "reuse":
                self.reused += 1
            else:
                self.cached += 1


def check_free_space(target: Path, where: Path, needed: int) -> None:
    """Refuse, before any download, a pull whose files cannot fit on the target's file system."""
    try:
        free = shutil.disk_usage(where).free
    except OSError:  # no answer (an odd file system): the writes will tell
        return
    if needed > free:
        raise CkptError(f"the pull into {target} still needs {needed} bytes, but its file system has {free} bytes"
                        " free: free some space, or pull into a dir on a bigger disk")


def _dir_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(dirpath, name))
    return total


class _OldFiles:
    """The files of the dir's earlier pull a new pull may take over, each at most once (a
    second path with the same bytes gets a copy, so no two paths of a pull share an inode)."""

    def __init__(self, target: Path, state: localdir.TargetState) -> None:
        self.target = target
        self.unchanged: dict[str, localdir.RecordedFile] = {}
        self.changed: dict[str, os.stat_result] = {}
        self.by_digest: dict[tuple[int, str], str] = {}
        self.taken: set[str] = set()
        self.lock = threading.Lock()
        record = state.record
        for rel, recorded in (record.files.items() if record is not None else ()):
            st = state.files.get(rel)
            if st is None:
                continue
            # A file hashed while the target was looked at (its stat changed, or its record is
            # not vouched for) is kept on that digest while its stat holds: not read again.
            rec = recorded if recorded.unchanged(st) else state.hashed.get(rel)
            if rec is not None and not rec.unchanged(st):
                rec = None
            if rec is not None:
                self.unchanged[rel] = rec
                for key in self._keys(rec.digest):
                    self.by_digest.setdefault(key, rel)
            else:
                self.changed[rel] = st

    @staticmethod
    def _keys(d: FileDigest) -> list[tuple[int, str]]:
        return [k for k in ((d.size, f"sha256:{d.sha256}") if d.sha256 else None,
                            (d.size, f"git:{d.git_oid}") if d.git_oid else None) if k is not None]

    def kept(self, rel: str, want: FileDigest) -> bool:
        """``rel`` will be kept as it is (its stat unchanged since a pull that verified these bytes)."""
        rec = self.unchanged.get(rel)
        return rec is not None and satisfies(rec.digest, want)

    def take(self, rel: str, want: FileDigest) -> tuple[str, localdir.RecordedFile | os.stat_result] | None:
        """An old file that may hold ``want``'s bytes: its path and either its record entry
        (unchanged since verified: trusted) or its stat (changed: to be hashed)."""
        with self.lock:
            rec = self.unchanged.get(rel)
            if rec is not None and rel not in self.taken and satisfies(rec.digest, want):
                self.taken.add(rel)
                return rel, rec
            for key in self._keys(want):
                other = self.by_digest.get(key)
                if other is not None and other not in self.taken and satisfies(self.unchanged[other].digest, want):
                    self.taken.add(other)
                    return other, self.unchanged[other]
            st = self.changed.get(rel)
            if st is not None and rel not in self.taken and st.st_size == want.size:
                self.taken.add(rel)
                return rel, st
        return None

    def reuse(self, rel: str, want: FileDigest, dest: Path, stop: threading.Event) -> FileDigest | None:
        """Hard-link an old file holding ``want``'s bytes to ``dest``; its digest, or None."""
        found = self.take(rel, want)
        if found is None:
            return None
        old_rel, known = found
        path = self.target / old_rel
        try:
            if isinstance(known, localdir.RecordedFile):
                digest = known.digest
                same = known.unchanged
            else:
                digest = hash_copy(path, None, want, stop)
                before = known

                def same(st: os.stat_result) -> bool:
                    return (st.st_ino, st.st_size, st.st_mtime_ns) == (before.st_ino, before.st_size,
                                                                        before.st_mtime_ns)
            if not satisfies(digest, want):
                return None
            try:
                os.link(path, dest, follow_symlinks=False)
            except OSError:  # no hard links on this filesystem: a verified copy instead
                digest = hash_copy(path, dest, want, stop)
                return digest if satisfies(digest, want) else None
            if not same(os.lstat(dest)):  # written to while we looked at it
                dest.unlink()
                return None
            return digest
        except Stopped:
            raise
        except OSError:
            dest.unlink(missing_ok=True)
            return None


def pull(store: Store, subfolder: str, revision: str | None, target: Path, *, force: bool = False,
         sha: str | None = None, select: Selection | None = None, cache: CacheConfig | None = None,
         verifier: Verifier | None = None, chosen: Chosen | None = None,
         looked: localdir.TargetState | None = None) -> PullResult:
    """Download ``subfolder`` at ``revision`` into ``target`` (its contents, not a nested folder).

    With ``verifier``, ``model.sig`` is checked before any download (against the trusted
    signer, the manifest and the signed provenance) and every staged byte after, before the
    target changes (see :mod:`ckpt_action.ops.signatures`).

    What the caller learned already is passed down, not worked out again: ``chosen``, what
    latest read of this folder when it chose it (its manifest, listing and, with this very
    ``verifier``, its signature check); ``looked``, the caller's own check of ``target``
    (files it hashed are not hashed again while their stat holds).

    >>> from ckpt_action.stores import RepoStore
    >>> res = pull(RepoStore.open(settings, "org/run"), "checkpoint-300", None, Path("resume"))
    >>> res.handle.revision == sha, (Path("resume") / "config.json").read_text()
    (True, '{"step": 300}')
    """
    select = select or Selection()

    def vet(snap: Snapshot) -> None:
        for rel in snap.files:
            if not safe_relative(rel):
                raise IntegrityError(f"the Hub listed an unsafe path {rel!r} in {subfolder}/: refusing to pull")
            if reserved_in_target(rel):
                raise IntegrityError(f"{subfolder}/ holds a file named {quoted(rel)}, a name reserved for what a"
                                     " pull writes in its target (the record, its temp file, the lock, staging"
                                     " dirs): refusing to pull it; rename it on the Hub")

    sha = sha or store.resolve(revision)
    if chosen is not None and (chosen.revision, chosen.subfolder) != (sha, subfolder):
        chosen = None  # latest read another folder or commit: nothing of it applies
    snap, handle = open_complete(store, subfolder, sha, "pull", vet, read=chosen.snapshot if chosen else None,
                                 manifest_bytes=chosen.manifest_bytes if chosen else None)
    if snap.manifest is not None:
        expected = {rel: snap.manifest.files[rel] for rel in snap.files if rel != SIGNATURE_NAME}
        if SIGNATURE_NAME in snap.files:  # the one file the manifest cannot list: the listing vouches for it
            expected |= expected_from_remote({SIGNATURE_NAME: snap.files[SIGNATURE_NAME]})
        verified_by = "manifest"
    else:
        expected = expected_from_remote(snap.files)
        verified_by = "tree"
    for rel, want in expected.items():
        if want.sha256 is None and want.git_oid is None:
            raise IntegrityError(f"{subfolder}/{rel} has no sha256 or git blob id to verify it against: refusing"
                                 " to pull bytes nothing can check")
    wanted = {rel: want for rel, want in expected.items() if select.matches(rel)}
    manifest_bytes = snap.manifest_bytes if select.matches(MANIFEST_NAME) else None
    partial = len(wanted) < len(expected) or manifest_bytes != snap.manifest_bytes
    if partial and manifest_bytes is not None and snap.manifest is not None:
        # The folder's manifest would claim files this pull leaves out, and a reader of the
        # dir would take it for a complete checkpoint: it lists what is here, marked partial.
        manifest_bytes = dataclasses.replace(snap.manifest, complete=False,
                                             files={rel: snap.manifest.files[rel] for rel in wanted}).to_json()
    if not wanted and manifest_bytes is None:
        raise InputError(f"{param('include')}/{param('exclude')} select none of the {len(expected)} files of"
                         f" {subfolder}/: check"
                         " the patterns (they match paths inside the folder; '*' also matches '/')")
    check = None
    if verifier is not None:
        check = _signature_check(store, snap, handle, verifier, chosen, partial)

    target = Path(os.path.abspath(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with localdir.target_lock(target):
            localdir.remove_stale_staging(target)
            state = localdir.check_target(str(target), force=force, looked=looked)
            tally = _fill(store, handle, wanted, manifest_bytes, target, state, cache, partial, select,
                          (lambda digests: check.after_download(digests, partial=partial)) if check else None,
                          check.read if check else {})
    except CkptError:
        raise
    except OSError as exc:
        if exc.filename is not None:  # a local file (the target, its lock, the cache): the doors' LocalIOError
            raise
        raise store.error(exc, f"pulling {subfolder}") from exc
    except Exception as exc:
        raise store.error(exc, f"pulling {subfolder}") from exc
    old_files = set(state.record.files) if state.record is not None else set()
    return PullResult(handle, target, len(wanted), sum(w.size for w in wanted.values()), verified_by, partial,
                      downloaded_files=len(tally.downloaded), downloaded_bytes=sum(tally.downloaded),
                      reused_files=tally.reused, cached_files=tally.cached,
                      removed_files=len(old_files - set(tally.digests)), signed=SIGNATURE_NAME in snap.files,
                      signer=check.verified.signer if check else None, signature_verified=check is not None,
                      provenance=check.provenance.report() if check and check.provenance else None)


def _signature_check(remote: Store, snap: Snapshot, handle: CheckpointHandle, verifier: Verifier,
                     chosen: Chosen | None, partial: bool) -> SignatureCheck:
    """The signature check of ``snap``: the one latest made when it chose this very
    snapshot with this very verifier, for the same step (so the same check), else made now."""
    from ckpt_action.ops.signatures import before_download

    if (chosen is not None and chosen.signature is not None and chosen.verifier is verifier
            and chosen.snapshot is snap and snap.manifest is not None and snap.manifest.step == handle.step):
        return chosen.signature
    return before_download(remote, snap, verifier, handle.step, partial=partial)


def _fill(remote: Store, handle: CheckpointHandle, wanted: dict[str, FileDigest], manifest_bytes: bytes | None,
          target: Path, state: localdir.TargetState, cache_config: CacheConfig | None, partial: bool,
          select: Selection, before_switch: Callable[[dict[str, FileDigest]], None] | None = None,
          read: dict[str, bytes] | None = None) -> _Tally:
    """Stage every wanted file from its cheapest verified source, then switch the target;
    ``before_switch`` sees the staged files' digests last and may refuse them. ``read``:
    small files of the folder already read from the Hub (by the signature check), staged
    from those bytes when they hash to what is wanted."""
    read = read or {}
    old = _OldFiles(target, state)
    cache = ContentCache(cache_config) if cache_config is not None else None
    tally = _Tally()
    tmp = localdir.make_staging(target)
    stop = threading.Event()
    big = [rel for rel, want in wanted.items() if want.size >= THREADED_HASH_MIN and not old.kept(rel, want)]
    try:
        # Files kept from the earlier pull are hard links; the rest (cache copies, downloads) take space.
        check_free_space(target, tmp, sum(w.size for rel, w in wanted.items() if not old.kept(rel, w)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    def fetch(rel: str, want: FileDigest) -> None:
        dest = tmp / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            if (digest := old.reuse(rel, want, dest, stop)) is not None:
                tally.add(rel, digest, "reuse")
            elif cache is not None and (digest := cache.fill(want, dest, stop)) is not None:
                tally.add(rel, digest, "cache")
            elif rel in read and satisfies(known := _digest_of(read[rel]), want):
                dest.write_bytes(read[rel])  # already fetched from the Hub this pull: not fetched twice
                tally.add(rel, known, "download")
            else:
                path = f"{handle.subfolder}/{rel}"
                tally.add(rel, remote.download(handle.revision, path, dest, want, stopped(stop, path),
                                          alone=len(big) < 2),
                          "download")
        except BaseException:
            stop.set()  # the first failure ends the pull; the others stop at their next chunk
            raise

    try:
        with Ticker(f"pull {handle.subfolder}", sum(w.size for w in wanted.values()), lambda: _dir_size(tmp)):
            _run_all(fetch, wanted, stop)
        if manifest_bytes is not None:
            (tmp / MANIFEST_NAME).write_bytes(manifest_bytes)
            tally.digests[MANIFEST_NAME] = _digest_of(manifest_bytes)
        staged = {p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()}
        if staged != set(tally.digests):
            raise IntegrityError(f"the staged files differ from the plan: {sorted(staged ^ set(tally.digests))[:3]}")
        if before_switch is not None:
            before_switch(tally.digests)
        record = localdir.PullRecord(
            handle.repo, handle.subfolder, handle.revision, partial,
            {rel: localdir.RecordedFile.of(d, os.lstat(tmp / rel)) for rel, d in tally.digests.items()},
            select.include, select.exclude)
        if cache is not None:
            _keep_in_cache(cache, {rel: d for rel, d in tally.digests.items() if rel != MANIFEST_NAME}, tmp)
        _switch(tmp, target, record)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if cache is not None:
        try:
            cache.evict()
        except OSError as exc:
            log.warning("could not trim the cache in %s (%s): it may grow past its limit", cache.root, exc)
    return tally


def _keep_in_cache(cache: ContentCache, digests: dict[str, FileDigest], staged: Path) -> None:
    """Add verified files to the cache; a cache that fails (full disk, permissions) costs
    later pulls their head start, never this pull."""
    for rel, digest in digests.items():
        if digest.sha256 is None:
            continue
        try:
            cache.store(digest.sha256, staged / rel)
        except OSError as exc:
            log.warning("could not add %s to the cache in %s (%s): later pulls download it", rel, cache.root, exc)
            return


def _digest_of(data: bytes) -> FileDigest:
    hasher = Hasher(len(data))
    hasher.update(data)
    return hasher.digest()


def _run_all(fetch: Callable[[str, FileDigest], None], wanted: dict[str, FileDigest],
             stop: threading.Event) -> None:
    """Run ``fetch`` for every file, biggest first; the first real failure is raised."""
    pool = ThreadPoolExecutor(max_workers=DOWNLOAD_THREADS)
    try:
        order = sorted(wanted, key=lambda rel: -wanted[rel].size)  # the longest transfers start first
        futures = [pool.submit(fetch, rel, wanted[rel]) for rel in order]
        for fut in as_completed(futures):
            exc = fut.exception()
            if exc is not None and not isinstance(exc, Stopped):
                raise exc
        for fut in futures:
            fut.result()
    finally:
        stop.set()  # on the way out, whatever is still running stops at its next chunk
        pool.shutdown(wait=True, cancel_futures=True)


def _switch(staged: Path, target: Path, record: localdir.PullRecord) -> None:
    """Make ``target`` the staged dir, record included; never a moment with a mix that looks complete."""
    if target in staged.parents:
        _switch_contents(staged, target, record)
        return
    localdir.write_record(staged, record)
    localdir.adopt_mode(target, staged)
    if target.exists() and not any(target.iterdir()):
        target.rmdir()
    if not target.exists():
        os.replace(staged, target)
        return
    # Swap with two renames: the old dir moves aside under a staging name (so a pull killed
    # right here leaves it for the next pull to remove), the new one takes its place.
    old = localdir.make_staging(target, "old-")
    os.replace(target, old)
    try:
        os.replace(staged, target)
    except OSError:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _switch_contents(staged: Path, target: Path, record: localdir.PullRecord) -> None:
    """A target that cannot be renamed (a mount point): the dir stays, its entries swap.

    The old record goes first and the new one comes last, so while entries move the dir
    holds no record: a pull killed half-way leaves a dir no later pull takes for complete.
    Old entries are parked in the staging dir (renames, same filesystem) so a failure
    half-way can put them back; they are removed with it on success.
    """
    old_record = target / PULL_RECORD_NAME
    parked = Path(tempfile.mkdtemp(prefix=".ckpt-old-", dir=staged))
    moved_old: list[Path] = []
    moved_new: list[Path] = []
    try:
        if old_record.exists() or old_record.is_symlink():
            os.replace(old_record, parked / PULL_RECORD_NAME)
            moved_old.append(old_record)
        for p in list(target.iterdir()):
            if not localdir.is_ours(target, p.name):  # the staging dir, the lock
                os.replace(p, parked / p.name)
                moved_old.append(p)
        for p in list(staged.iterdir()):
            if p != parked:
                os.replace(p, target / p.name)
                moved_new.append(target / p.name)
        localdir.write_record(target, record)  # a rename keeps inode and mtime: the stats still hold
    except OSError:
        for p in moved_new:
            os.replace(p, staged / p.name)
        for p in moved_old:
            os.replace(parked / p.name, p)
        raise
    finally:
        shutil.rmtree(staged, ignore_errors=True)
