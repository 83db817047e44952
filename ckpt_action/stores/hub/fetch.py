"""One checkpoint file from the Hub into a local file, verified as it streams.

One request per file (no HEAD), the hash computed in the same pass as the write, a body
never read past the expected size, and a retry picks up where the bytes stopped (Range).
The body streams through :mod:`.download` (the standard library's HTTP, cheaper per byte)
unless a proxy applies, then through the client library, which speaks every proxy kind.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ckpt_action.checkpoint.manifest import FileDigest, Hasher
from ckpt_action.checkpoint.verdict import satisfies
from ckpt_action.errors import IntegrityError
from ckpt_action.settings import THREADED_HASH_MIN, Settings
from ckpt_action.stores.hub import download as filefetch
from ckpt_action.stores.hub.deadline import RequestDeadline
from ckpt_action.stores.hub.transport import call

# Files at least this big get their blocks reserved before the first write (see preallocate).
PREALLOCATE_MIN = 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 1  # <linux/falloc.h>
# What a Hub ETag is: a git blob id or an LFS sha256, maybe weak or quoted. Anything else
# (a path, "../x") is a hostile or broken server; huggingface_hub itself does not check.
_ETAG_RE = re.compile(r'\A(W/)?"?[0-9A-Za-z_.:+=-]{1,128}"?\Z')


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """Linux's fallocate(2) itself, never glibc's posix_fallocate, which on a file system
    without it falls back to writing every block, the very cost this avoids."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = getattr(libc, "fallocate64", None) or (libc.fallocate if ctypes.sizeof(ctypes.c_long) == 8 else None)
    except (OSError, AttributeError):
        return None
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


def preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of blocks for a file about to be written front to back,
    keeping its size (``FALLOC_FL_KEEP_SIZE``: the size still says how much was written,
    which a resume by Range relies on). Best effort: any refusal just leaves the writes to
    allocate as they go. On ext4 this takes about 40% of the kernel's CPU off each write
    (no delayed-allocation bookkeeping per page: 0.06 s instead of 0.10 s per 640 MiB on
    the 2-core bench machine), CPU a pull's hashing competes for."""
    if size < PREALLOCATE_MIN or (fn := _fallocate()) is None:
        return
    fn(fd, _FALLOC_FL_KEEP_SIZE, 0, size)


class FileSource(Protocol):
    """Where :func:`fetch_file` reads a file from: a model repo
    (:class:`~ckpt_action.stores.hub.repo.RemoteRepo`) or a bucket
    (:class:`~ckpt_action.stores.bucket.BucketStore`), each naming its resolve URL."""

    settings: Settings
    repo: str
    """The repo id or bucket URI, as messages name it."""

    def file_url(self, pin: str, path: str) -> str: ...
    def headers(self) -> dict[str, str]: ...


def attempt_deadline(settings: Settings, remaining: int) -> float:
    """Seconds one download attempt may take for ``remaining`` bytes: the request deadline
    plus the bytes at the minimum rate, capped (a listing claiming a terabyte would earn
    months otherwise)."""
    return min(settings.max_attempt_seconds, settings.request_deadline + remaining / settings.min_download_rate)


def fetch_file(remote: FileSource, sha: str, path: str, dest: Path, want: FileDigest,
               stop: Callable[[], None] | None = None, *, alone: bool = True) -> FileDigest:
    """GET one file at sha into dest, hashing as it streams; resume with Range after a drop.

    One request per file (no HEAD), verification in the same pass as the write, a body
    never read past the expected size, and a retry picks up where the bytes stopped
    rather than starting over. Returns the digest of what was written, which matches
    ``want`` (else IntegrityError). The body streams through :mod:`.download` unless a
    proxy applies, then through the client library. ``stop`` is called between reads
    and raises to give up (another file of the pull failed). ``alone``: no other big file
    downloads at the same time (see THREADED_HASH_MIN).
    """
    url, base = remote.file_url(sha, path), remote.headers()
    by_git = want.sha256 is None  # a regular file the Hub identifies by git blob id only
    state = Hasher(want.size, git=by_git)

    settings = remote.settings
    give_up_at = 0.0

    def check() -> None:
        if stop is not None:
            stop()
        if time.monotonic() > give_up_at:  # a trickle keeps every read alive: bound the whole attempt
            raise RequestDeadline("the download ran past its deadline",
                                  f"{path} at {settings.min_download_rate} bytes/s (CKPT_MIN_DOWNLOAD_RATE) plus"
                                  f" {settings.request_deadline:g} s (CKPT_REQUEST_DEADLINE), at most"
                                  f" {settings.max_attempt_seconds:g} s (CKPT_MAX_ATTEMPT_SECONDS)")

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
        # Only when there is something to cut: on ext4 a truncate to size 0 marks the file
        # so that its close() starts writing every dirty page back (auto_da_alloc), which
        # held each big file's close for 0.4 s per 700 MB on the 2-core bench machine.
        if os.fstat(fd).st_size != state.done:
            os.ftruncate(fd, state.done)
        os.lseek(fd, state.done, os.SEEK_SET)
        return state.done

    def write(view: memoryview) -> None:
        while view:
            view = view[os.write(fd, view):]

    def attempt() -> None:
        nonlocal give_up_at
        give_up_at = time.monotonic() + attempt_deadline(settings, max(0, want.size - state.done))
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
        preallocate(fd, want.size)
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
