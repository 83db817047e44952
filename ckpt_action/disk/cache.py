"""An optional content cache for pulls: verified file contents by sha256, bounded by size.

A runner that pulls many checkpoints of one run (into different dirs, or after the dir
was deleted) transfers each distinct file once: a pull fills what the cache holds and
adds what it downloaded.

How it stays safe:

- **Never served unverified.** A fill copies the entry into the staging dir and hashes
  every byte on the way; an entry that does not hash to its name is deleted and the
  file downloaded instead. The cache dir is local disk, so it is not trusted either.
- **The cache never shares an inode with a pulled dir.** A file goes into the cache as a
  copy (a reflink where the file system clones) and comes out as a copy, so nothing the
  cache does to an entry (its timestamps, its eviction) reaches a pulled file, and a
  program writing into a pulled file changes no entry and no other pulled dir. (A shared
  inode let a fill's timestamp restore hide a local edit from the dir's pull record.)
- **No link followed.** Every dir the cache opens (``sha256``, its shards, ``tmp``) is
  checked, level by level, to be a real dir, not a link to one elsewhere: a link is
  treated as a miss, never stored into or evicted from. Entries open with ``O_NOFOLLOW``.
- **Bounded.** After each pull, entries are deleted least recently used first until the
  cache holds at most ``CKPT_CACHE_MAX_SIZE`` bytes. "Used" is the entry's access time,
  which a fill or store sets explicitly (so ``noatime`` mounts do not matter).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ckpt_action.checkpoint.manifest import FileDigest, Hasher
from ckpt_action.checkpoint.verdict import satisfies
from ckpt_action.errors import CkptError, InputError, param
from ckpt_action.handle import SHA256_RE

ENV_DIR = "CKPT_CACHE_DIR"
ENV_MAX_SIZE = "CKPT_CACHE_MAX_SIZE"
DEFAULT_MAX_SIZE = 50 * 1024**3
# Entries looked at when evicting: far beyond any real cache, small enough to bound the walk.
MAX_ENTRIES = 1_000_000
_COPY_CHUNK = 8 * 1024 * 1024
_FICLONE = 0x40049409  # Linux's ioctl to clone a file's blocks (btrfs, XFS, overlayfs on them)
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


class Stopped(CkptError):
    """The pull this fill belongs to failed elsewhere; the fill stops early."""


def parse_size(text: str, what: str = ENV_MAX_SIZE) -> int:
    """Bytes from ``50G``, ``512M``, ``1.5T`` or a plain number (binary units).

    >>> parse_size("50G"), parse_size("1024"), parse_size("1.5K")
    (53687091200, 1024, 1536)
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([BKMGT]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not m:
        raise InputError(f"{what}={text!r} is not a size: write e.g. 50G, 512M or a number of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


@dataclass(frozen=True)
class CacheConfig:
    """Where the cache is and how big it may grow (``--cache-dir`` / ``CKPT_CACHE_DIR``,
    ``CKPT_CACHE_MAX_SIZE``)."""

    root: Path
    max_bytes: int = DEFAULT_MAX_SIZE

    @classmethod
    def knobs(cls) -> list[tuple[str, str, object, str]]:
        """(name, environment variable, default, meaning), as ``Settings.knobs`` lists its own."""
        return [
            ("cache_dir", ENV_DIR, None, "`pull`: keep verified file contents here (by sha256) and fill later "
             "pulls from it; off when unset."),
            ("cache_max_size", ENV_MAX_SIZE, "50G", "Size the cache is trimmed to after each pull, least "
             "recently used entries first (`50G`, `512M`, bytes)."),
        ]

    @classmethod
    def from_options(cls, cache_dir: str | None, target: Path,
                     env: Mapping[str, str] | None = None) -> CacheConfig | None:
        """Check ``--cache-dir`` (else ``CKPT_CACHE_DIR``) before any request; None when unset."""
        env = os.environ if env is None else env
        value = cache_dir or env.get(ENV_DIR) or None
        max_bytes = parse_size(env[ENV_MAX_SIZE]) if env.get(ENV_MAX_SIZE) else DEFAULT_MAX_SIZE
        if value is None:
            return None
        root = Path(os.path.abspath(value))
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise InputError(f"{param('cache_dir')} {value} is not a directory: give a dir (it is created if"
                             " missing)", param='cache_dir')
        real_root, real_target = root.resolve(), Path(os.path.abspath(target)).resolve()
        if real_root == real_target or real_target in real_root.parents or real_root in real_target.parents:
            raise InputError(f"{param('cache_dir')} {value} overlaps {param('local_dir')} {target}: keep the"
                             " cache outside the"
                             " pulled dir and the other way round")
        ancestor = root
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
            raise InputError(f"{param('cache_dir')} {value}: {ancestor} is not a writable directory", param='cache_dir')
        return cls(root, max_bytes)


def hash_copy(src: Path, dest: Path | None, want: FileDigest, stop: threading.Event | None = None,
              progress: Callable[[int], None] | None = None) -> FileDigest:
    """Hash every byte of ``src`` (copying it to ``dest`` on the way, when given); the digest
    of what was read, with the git blob id too when ``want`` has no sha256.

    Never follows a symlink and never opens a FIFO or device: ``src`` is local disk. Stops
    reading past ``want.size`` (the digest then cannot match).
    """
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{src} is not a regular file")
        hasher = Hasher(want.size, git=want.sha256 is None)
        buf = bytearray(_COPY_CHUNK)
        view = memoryview(buf)
        with open(fd, "rb", buffering=0, closefd=False) as reader, \
                (open(dest, "wb") if dest is not None else contextlib.nullcontext()) as out:
            while n := reader.readinto(buf):
                if stop is not None and stop.is_set():
                    raise Stopped(f"reading {src.name} stopped: another file failed")
                chunk = view[:n]
                hasher.update(chunk)
                if out is not None:
                    out.write(chunk)
                if progress is not None:
                    progress(n)
                if hasher.done > want.size:
                    break  # longer than wanted: no need to read the rest
        return hasher.digest()
    finally:
        os.close(fd)


def _copy_new_inode(src: Path, dest: Path) -> None:
    """Copy ``src`` to the new file ``dest``: a reflink (shared blocks, own inode) where the
    file system clones, else the kernel's copy."""
    with open(src, "rb") as reader, open(dest, "xb") as writer:
        try:
            import fcntl

            fcntl.ioctl(writer.fileno(), _FICLONE, reader.fileno())
            return
        except (ImportError, OSError):
            pass
        shutil.copyfileobj(reader, writer, _COPY_CHUNK)


class ContentCache:
    """Files by sha256 under ``root/sha256/ab/abcd…``; see the module docstring."""

    def __init__(self, config: CacheConfig) -> None:
        self.root = config.root
        self.max_bytes = config.max_bytes
        self.objects = self.root / "sha256"

    def path(self, sha256: str) -> Path:
        assert SHA256_RE.match(sha256)
        return self.objects / sha256[:2] / sha256

    def _touch(self, path: Path, st: os.stat_result) -> None:
        with contextlib.suppress(OSError):  # an entry of another user: LRU order is only a hint
            os.utime(path, ns=(time.time_ns(), st.st_mtime_ns), follow_symlinks=False)

    def fill(self, want: FileDigest, dest: Path, stop: threading.Event | None = None,
             progress: Callable[[int], None] | None = None) -> FileDigest | None:
        """Copy the entry for ``want`` to ``dest``, verified; None (and no dest) when the
        cache lacks it or holds it damaged (the entry is then deleted)."""
        if want.sha256 is None:
            return None
        entry = self.path(want.sha256)
        if not self._real_dir(entry.parent, create=False):
            return None
        try:
            st = entry.lstat()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size != want.size:
            self._discard(entry)
            return None
        try:
            have = hash_copy(entry, dest, want, stop, progress)
        except Stopped:
            dest.unlink(missing_ok=True)
            raise
        except OSError:
            dest.unlink(missing_ok=True)
            return None
        if not satisfies(have, want):
            dest.unlink(missing_ok=True)
            self._discard(entry)
            return None
        self._touch(entry, st)
        return have

    def _real_dir(self, path: Path, *, create: bool) -> bool:
        """``path`` (root, ``sha256``, a shard, ``tmp``) is a real dir, not a link to one
        somewhere else: every level is checked, since a link would make the cache store
        files in, and evict files from, a dir that is not the cache's."""
        for level in [p for p in (path, *path.parents) if p == self.root or self.root in p.parents][::-1]:
            try:
                st = level.lstat()
            except FileNotFoundError:
                if not create:
                    return False
                with contextlib.suppress(FileExistsError):
                    level.mkdir()
                st = level.lstat()
            if not stat.S_ISDIR(st.st_mode):  # a symlink (lstat does not follow it), or a file
                return False
        return True

    def store(self, sha256: str, src: Path) -> None:
        """Add the verified file ``src`` as a copy (a reflink where the file system has them),
        in a new inode: a hard link would share the inode with the pulled dir, whose later
        edits (and this cache's own timestamps) would then reach both. An existing entry is kept."""
        entry = self.path(sha256)
        tmp_dir = self.root / "tmp"
        if not (self._real_dir(entry.parent, create=True) and self._real_dir(tmp_dir, create=True)):
            raise OSError(f"a dir of the cache in {self.root} is a symlink or not a dir: not following it")
        try:
            st = entry.lstat()
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISREG(st.st_mode) and st.st_size == src.stat().st_size:
                self._touch(entry, st)
                return
        tmp = tmp_dir / f"{sha256[:12]}-{secrets.token_hex(8)}"
        try:
            _copy_new_inode(src, tmp)
            os.replace(tmp, entry)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self._touch(entry, entry.lstat())

    def _discard(self, entry: Path) -> None:
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def evict(self) -> tuple[int, int]:
        """Delete least recently used entries until the cache fits; (entries, bytes) removed."""
        entries: list[tuple[int, int, Path]] = []
        total = 0
        if not self._real_dir(self.objects, create=False):
            return 0, 0
        try:
            shards = sorted(os.scandir(self.objects), key=lambda e: e.name)
        except OSError:
            return 0, 0
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                for item in os.scandir(shard.path):
                    st = item.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and SHA256_RE.match(item.name):
                        entries.append((st.st_atime_ns, st.st_size, Path(item.path)))
                        total += st.st_size
                    if len(entries) >= MAX_ENTRIES:
                        break
        removed = freed = 0
        for _atime, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
                freed += size
            total -= size
        return removed, freed
