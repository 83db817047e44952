"""pull: download one checkpoint at a pinned SHA, verify it, then move it into place.

Files land in a temporary dir beside the target (same filesystem, so the final move is
a rename). Every listed path is checked before any download starts, every file is
verified against the manifest (or, for checkpoints without one, against the hashes the
tree listing vouches for), and only then does the target appear. A failure at any
point removes the temporary dir and leaves the target as it was.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .errors import CkptError, IntegrityError, NotFoundError
from .handle import CheckpointHandle, step_of
from .hubclient import call
from .manifest import MANIFEST_NAME, FileDigest, Hasher, expected_from_remote, satisfies
from .progress import Ticker
from .remote import RemoteRepo
from .validate import safe_relative

DOWNLOAD_THREADS = 8
# What a Hub ETag is: a git blob id or an LFS sha256, maybe weak or quoted. Anything else
# (a path, "../x") is a hostile or broken server; huggingface_hub itself does not check.
_ETAG_RE = re.compile(r'^(W/)?"?[0-9A-Za-z_.:+=-]{1,128}"?$')


class Cancelled(CkptError):
    """Another file of the same pull failed; this one stops instead of finishing for nothing."""


def download(remote: RemoteRepo, sha: str, path: str, dest: Path, want: FileDigest | None,
             stop: threading.Event | None = None) -> None:
    """GET one file at sha into dest, hashing as it streams; resume with Range after a drop.

    One request per file (no HEAD), verification in the same pass as the write, and a
    retry picks up where the bytes stopped rather than starting over.
    """
    from huggingface_hub.utils import get_session, hf_raise_for_status

    url, base = remote.file_url(sha, path), remote.headers()
    dest.parent.mkdir(parents=True, exist_ok=True)
    size = want.size if want else None
    state = Hasher(size)

    def attempt() -> None:
        nonlocal state
        headers = dict(base)
        if state.done:
            headers["Range"] = f"bytes={state.done}-"
        with get_session().stream("GET", url, headers=headers) as response:
            hf_raise_for_status(response)
            for name in ("ETag", "X-Linked-Etag"):
                tag = response.headers.get(name)
                if tag is not None and not _ETAG_RE.match(tag):
                    raise IntegrityError(f"the Hub sent a malformed {name} for {path}: refusing the download")
            if state.done and response.status_code != 206:
                state = Hasher(size)  # the server ignored Range: start the file over
            with open(dest, "ab" if state.done else "wb") as fh:
                # Chunks as they arrive (a buffered chunk size would lose what came before a drop).
                for chunk in response.iter_bytes():
                    if stop is not None and stop.is_set():
                        raise Cancelled(f"download of {path} stopped: another file failed")
                    fh.write(chunk)
                    state.update(chunk)

    call(remote.settings, f"downloading {path}", attempt, repo=remote.repo)
    if want is None:
        return
    have = state.digest()
    if not satisfies(have, want):
        raise IntegrityError(
            f"downloaded {path} does not match what the Hub vouches for ({have.size} bytes, sha256"
            f" {(have.sha256 or '')[:12]}…; expected {want.size} bytes, sha256 {(want.sha256 or '?')[:12]}…)")


@dataclass(frozen=True)
class PullResult:
    handle: CheckpointHandle
    local_dir: Path
    files: int
    bytes: int
    verified_by: str
    """"manifest" or "tree" (a checkpoint without a manifest, checked against listed hashes)."""


def _dir_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                pass
    return total


def pull(remote: RemoteRepo, subfolder: str, revision: str | None, target: Path, *, force: bool = False,
         sha: str | None = None) -> PullResult:
    """Download ``subfolder`` at ``revision`` into ``target`` (its contents, not a nested folder).

    >>> pull(RemoteRepo(settings, "org/run"), "checkpoint-300", None, Path("resume"))  # doctest: +SKIP
    PullResult(handle=CheckpointHandle(..., revision='3f1c…'), local_dir=PosixPath('resume'), ...)
    """
    sha = sha or remote.resolve(revision)
    if sha is None:
        raise NotFoundError(f"{remote.repo} has no commits yet: nothing to pull")
    snap = remote.snapshot(sha, subfolder)
    if not snap.exists:
        raise NotFoundError(f"{subfolder}/ does not exist in {remote.repo} at {sha[:12]}: check --subfolder")
    for rel in snap.files:
        if not safe_relative(rel):
            raise IntegrityError(f"the Hub listed an unsafe path {rel!r} in {subfolder}/: refusing to pull")
    problems = snap.problems()
    if problems:
        raise IntegrityError(f"{subfolder}/ at {sha[:12]} is not a complete checkpoint: {problems[0]}")
    if snap.manifest is not None:
        expected = dict(snap.manifest.files)
        verified_by = "manifest"
    else:
        expected = expected_from_remote(snap.files)
        verified_by = "tree"
    total = sum(f.size for f in snap.files.values())

    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.ckpt-", dir=_staging_dir(target)))
    stop = threading.Event()
    try:
        names = list(snap.files)
        if snap.manifest_bytes is not None:
            (tmp / subfolder).mkdir(parents=True, exist_ok=True)
            (tmp / subfolder / MANIFEST_NAME).write_bytes(snap.manifest_bytes)

        def fetch(rel: str) -> None:
            try:
                download(remote, sha, f"{subfolder}/{rel}", tmp / subfolder / rel, expected.get(rel), stop)
            except BaseException:
                stop.set()  # the first failure ends the pull; the others stop at their next chunk
                raise

        with Ticker(f"pull {subfolder}", total, lambda: _dir_size(tmp)):
            pool = ThreadPoolExecutor(max_workers=DOWNLOAD_THREADS)
            try:
                futures = [pool.submit(fetch, rel) for rel in names]
                for fut in as_completed(futures):
                    if fut.exception() is not None and not isinstance(fut.exception(), Cancelled):
                        raise fut.exception()  # type: ignore[misc]
                for fut in futures:
                    fut.result()
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        got = tmp / subfolder
        missing = [rel for rel in expected if not (got / rel).is_file()]
        if missing:
            raise IntegrityError(f"{missing[0]} is in the manifest but not in the folder on the Hub")
        extra = {p.relative_to(got).as_posix() for p in got.rglob("*") if p.is_file()} - set(expected) - {
            MANIFEST_NAME}
        if extra:
            raise IntegrityError(f"unexpected files after download: {sorted(extra)[:3]}")
        _move_into_place(got, target, force=force)
    except CkptError:
        raise
    except Exception as exc:
        raise remote.error(exc, f"pulling {subfolder}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    stp = snap.manifest.step if snap.manifest and snap.manifest.step is not None else step_of(subfolder)
    handle = CheckpointHandle(remote.repo, subfolder, sha, stp, remote.settings.endpoint)
    return PullResult(handle, target, len(snap.files), total, verified_by)


def _pinned(target: Path) -> bool:
    """A target that cannot be renamed over: a mount point (``docker run -v DIR:/data``)."""
    return target.is_dir() and os.path.ismount(target)


def _staging_dir(target: Path) -> Path:
    """Stage beside the target (same filesystem, final step is a rename); inside it when the
    target is a mount point or its parent is not writable (a container's ``/``)."""
    if _pinned(target) or (target.is_dir() and not os.access(target.parent, os.W_OK)):
        return target
    return target.parent


def _move_into_place(src: Path, target: Path, *, force: bool) -> None:
    staged_inside = target in src.parents
    if staged_inside:
        # Mount point: the directory itself stays; swap its contents, staging dir excepted.
        staging = target / src.relative_to(target).parts[0]
        old = [p for p in target.iterdir() if p != staging]
        if old and not force:
            raise CkptError(f"{target} is not empty: pass --force to replace it")
        # Park the old contents in the staging dir (renames, same filesystem) so a failure
        # half-way can put them back; the staging dir is removed with them on success.
        parked = staging / ".ckpt-old"
        parked.mkdir()
        moved_old: list[Path] = []
        moved_new: list[Path] = []
        try:
            for p in old:
                os.replace(p, parked / p.name)
                moved_old.append(p)
            for p in list(src.iterdir()):
                os.replace(p, target / p.name)
                moved_new.append(target / p.name)
        except OSError:
            for p in moved_new:
                os.replace(p, src / p.name)
            for p in moved_old:
                os.replace(parked / p.name, p)
            raise
        return
    if target.exists() and not any(target.iterdir()):
        target.rmdir()
    if not target.exists():
        os.replace(src, target)
        return
    if not force:
        raise CkptError(f"{target} appeared while pulling and is not empty: pass --force to replace it")
    # Swap with two renames so there is never a moment with no complete target.
    old_dir = target.with_name(f".{target.name}.ckpt-old-{os.getpid()}")
    os.replace(target, old_dir)
    try:
        os.replace(src, target)
    except OSError:
        os.replace(old_dir, target)
        raise
    shutil.rmtree(old_dir, ignore_errors=True)
