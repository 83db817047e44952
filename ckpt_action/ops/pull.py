"""pull: download one checkpoint at a pinned SHA, verify it, then move it into place.

Files land in a staging dir beside the target (same filesystem, so the switch is a
rename). Every listed path is checked and every file must carry a hash to check (the
manifest's sha256 or git blob id, or for checkpoints without a manifest what the tree
listing vouches for) before any download starts. Each file then comes from the cheapest
verified source:

1. the dir's earlier pull (see target.py): a file whose stat still matches the pull
   record is hard-linked into the staging dir without being read; one whose stat changed
   is re-hashed first;
2. the content cache (``--cache-dir``, see cache.py): copied and hashed on the way;
3. the Hub: one GET, hashed as it streams, resumed with Range after a drop.

Then the record is written, last, and the staging dir replaces the target in one rename
(or, for a mount point, entry by entry with the record removed first and written last).
A failure at any point removes the staging dir and leaves the target as it was; files of
the old pull that the new one does not have go with the old dir.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_action.checkpoint.manifest import (
    MANIFEST_NAME,
    PULL_RECORD_NAME,
    FileDigest,
    Hasher,
    expected_from_remote,
    satisfies,
)
from ckpt_action.disk import target as localdir
from ckpt_action.disk.cache import CacheConfig, ContentCache, Stopped, hash_copy
from ckpt_action.errors import CkptError, InputError, IntegrityError, NotFoundError
from ckpt_action.handle import CheckpointHandle, step_of
from ckpt_action.hub import download as filefetch
from ckpt_action.hub.deadline import RequestDeadline
from ckpt_action.hub.repo import RemoteRepo
from ckpt_action.hub.transport import call
from ckpt_action.names import safe_relative
from ckpt_action.progress import Ticker

log = logging.getLogger(__name__)
DOWNLOAD_THREADS = 8
# A big file downloaded alone is hashed in a thread of its own while the next buffer
# arrives, so one transfer can use two cores. When several big files download at once
# they already keep the cores busy, and handing buffers between threads only adds CPU
# (measured on 2 cores, 2 GiB in 5 files: 3.8 s of CPU inline, 4.4 s with hash threads).
THREADED_HASH_MIN = 16 * 1024 * 1024
# What a Hub ETag is: a git blob id or an LFS sha256, maybe weak or quoted. Anything else
# (a path, "../x") is a hostile or broken server; huggingface_hub itself does not check.
_ETAG_RE = re.compile(r'^(W/)?"?[0-9A-Za-z_.:+=-]{1,128}"?$')


class Cancelled(Stopped):
    """Another file of the same pull failed; this one stops instead of finishing for nothing."""


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
        for flag, patterns in (("--include", include), ("--exclude", exclude)):
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


def download(remote: RemoteRepo, sha: str, path: str, dest: Path, want: FileDigest,
             stop: threading.Event | None = None, *, alone: bool = True) -> FileDigest:
    """GET one file at sha into dest, hashing as it streams; resume with Range after a drop.

    One request per file (no HEAD), verification in the same pass as the write, a body
    never read past the expected size, and a retry picks up where the bytes stopped
    rather than starting over. Returns the digest of what was written, which matches
    ``want`` (else IntegrityError). The body streams through :mod:`filefetch` unless a
    proxy applies, then through the client library. ``alone``: no other big file
    downloads at the same time (see THREADED_HASH_MIN).
    """
    url, base = remote.file_url(sha, path), remote.headers()
    by_git = want.sha256 is None  # a regular file the Hub identifies by git blob id only
    state = Hasher(want.size, git=by_git)

    settings = remote.settings
    give_up_at = 0.0

    def check() -> None:
        if stop is not None and stop.is_set():
            raise Cancelled(f"download of {path} stopped: another file failed")
        if time.monotonic() > give_up_at:  # a trickle keeps every read alive: bound the whole attempt
            raise RequestDeadline("the download ran past its deadline",
                                  f"{path} at {settings.min_download_rate} bytes/s (CKPT_MIN_DOWNLOAD_RATE) plus"
                                  f" {settings.request_deadline:g} s (CKPT_REQUEST_DEADLINE)")

    def begin(status: int, header: Callable[[str], str | None]) -> int:
        """Check an answer's headers; the offset its body starts at (0: the server ignored Range)."""
        nonlocal state
        for name in ("ETag", "X-Linked-Etag"):
            tag = header(name)
            if tag is not None and not _ETAG_RE.match(tag):
                raise IntegrityError(f"the Hub sent a malformed {name} for {path}: refusing the download")
        if state.done and status != 206:
            state = Hasher(want.size, git=by_git)  # start the file over
        # What is on disk beyond what was hashed (a write cut short) goes: disk and hash agree.
        os.ftruncate(fd, state.done)
        os.lseek(fd, state.done, os.SEEK_SET)
        return state.done

    def write(view: memoryview) -> None:
        while view:
            view = view[os.write(fd, view):]

    def attempt() -> None:
        nonlocal give_up_at
        give_up_at = (time.monotonic() + settings.request_deadline
                      + max(0, want.size - state.done) / settings.min_download_rate)
        headers = dict(base)
        if state.done:
            headers["Range"] = f"bytes={state.done}-"
        if filefetch.direct(url):
            with filefetch.get(url, headers, remote.settings.timeout) as resp:
                offset = begin(resp.status, resp.getheader)
                filefetch.pump(resp, write, state.update, want.size - offset, check,
                               threaded=alone and want.size - offset >= THREADED_HASH_MIN)
            return
        from huggingface_hub.utils import get_session, hf_raise_for_status

        with get_session().stream("GET", url, headers=headers) as response:
            hf_raise_for_status(response)
            begin(response.status_code, response.headers.get)
            for chunk in response.iter_bytes():  # chunks as they arrive: a drop loses nothing
                check()
                write(memoryview(chunk))
                state.update(chunk)
                if state.done > want.size:
                    break  # more than the file has: no need to read the rest of a hostile body

    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        call(remote.settings, f"downloading {path}", attempt, repo=remote.repo)
    finally:
        os.close(fd)
    have = state.digest()
    if not satisfies(have, want):
        expected = f"sha256 {want.sha256[:12]}…" if want.sha256 else f"git blob id {(want.git_oid or '?')[:12]}…"
        got = f"sha256 {(have.sha256 or '')[:12]}…" if want.sha256 else f"git blob id {(have.git_oid or '?')[:12]}…"
        raise IntegrityError(f"downloaded {path} does not match what the Hub vouches for ({have.size} bytes, {got};"
                             f" expected {want.size} bytes, {expected})")
    return have


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
        for rel, rec in (record.files.items() if record is not None else ()):
            st = state.files.get(rel)
            if st is None:
                continue
            if rec.unchanged(st):
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


def pull(remote: RemoteRepo, subfolder: str, revision: str | None, target: Path, *, force: bool = False,
         sha: str | None = None, select: Selection | None = None, cache: CacheConfig | None = None) -> PullResult:
    """Download ``subfolder`` at ``revision`` into ``target`` (its contents, not a nested folder).

    >>> pull(RemoteRepo(settings, "org/run"), "checkpoint-300", None, Path("resume"))  # doctest: +SKIP
    PullResult(handle=CheckpointHandle(..., revision='3f1c…'), local_dir=PosixPath('resume'), ...)
    """
    select = select or Selection()
    sha = sha or remote.resolve(revision)
    if sha is None:
        raise NotFoundError(f"{remote.repo} has no commits yet: nothing to pull")
    snap = remote.snapshot(sha, subfolder)
    if not snap.exists:
        raise NotFoundError(f"{subfolder}/ does not exist in {remote.repo} at {sha[:12]}: check --subfolder")
    for rel in snap.files:
        if not safe_relative(rel):
            raise IntegrityError(f"the Hub listed an unsafe path {rel!r} in {subfolder}/: refusing to pull")
        if rel == PULL_RECORD_NAME:
            raise IntegrityError(f"{subfolder}/ holds a file named {PULL_RECORD_NAME}, the name ckpt-action keeps"
                                 " for its pull record: refusing to pull it")
    problems = snap.problems()
    if problems:
        raise IntegrityError(f"{subfolder}/ at {sha[:12]} is not a complete checkpoint: {problems[0]}")
    if snap.manifest is not None:
        expected = {rel: snap.manifest.files[rel] for rel in snap.files}
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
    if not wanted and manifest_bytes is None:
        raise InputError(f"--include/--exclude select none of the {len(expected)} files of {subfolder}/: check"
                         " the patterns (they match paths inside the folder; '*' also matches '/')")
    step = snap.manifest.step if snap.manifest and snap.manifest.step is not None else step_of(subfolder)
    handle = CheckpointHandle(remote.repo, subfolder, sha, step, remote.settings.endpoint)

    target = Path(os.path.abspath(target))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with localdir.target_lock(target):
            localdir.remove_stale_staging(target)
            state = localdir.check_target(str(target), force=force)
            tally = _fill(remote, handle, wanted, manifest_bytes, target, state, cache, partial, select)
    except CkptError:
        raise
    except Exception as exc:
        raise remote.error(exc, f"pulling {subfolder}") from exc
    old_files = set(state.record.files) if state.record is not None else set()
    return PullResult(handle, target, len(wanted), sum(w.size for w in wanted.values()), verified_by, partial,
                      downloaded_files=len(tally.downloaded), downloaded_bytes=sum(tally.downloaded),
                      reused_files=tally.reused, cached_files=tally.cached,
                      removed_files=len(old_files - set(tally.digests)))


def _fill(remote: RemoteRepo, handle: CheckpointHandle, wanted: dict[str, FileDigest], manifest_bytes: bytes | None,
          target: Path, state: localdir.TargetState, cache_config: CacheConfig | None, partial: bool,
          select: Selection) -> _Tally:
    """Stage every wanted file from its cheapest verified source, then switch the target."""
    old = _OldFiles(target, state)
    cache = ContentCache(cache_config) if cache_config is not None else None
    tally = _Tally()
    tmp = localdir.make_staging(target)
    stop = threading.Event()
    big = [rel for rel, want in wanted.items() if want.size >= THREADED_HASH_MIN and not old.kept(rel, want)]

    def fetch(rel: str, want: FileDigest) -> None:
        dest = tmp / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            if (digest := old.reuse(rel, want, dest, stop)) is not None:
                tally.add(rel, digest, "reuse")
            elif cache is not None and (digest := cache.fill(want, dest, stop)) is not None:
                tally.add(rel, digest, "cache")
            else:
                path = f"{handle.subfolder}/{rel}"
                tally.add(rel, download(remote, handle.revision, path, dest, want, stop, alone=len(big) < 2),
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
