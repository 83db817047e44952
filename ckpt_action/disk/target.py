"""A pull's target dir: what it holds, whether ckpt-action wrote it, and what may replace it.

Every pull leaves a record in the dir it fills, ``.ckpt-pull.json``: which checkpoint it
holds and, for each file, the digest it was verified against and the ``size``,
``mtime_ns`` and inode it had once written. The record is the mark that the dir holds an
earlier pull. It lets a later pull keep files whose stat is unchanged without reading
them again, and it is written last, so a dir without one never looks complete.

The rule for an existing target (issue: ``--force`` never deletes what ckpt-action did
not write):

- new, or empty: pulled into;
- holds an earlier pull and nothing else: updated in place, no ``--force`` needed;
- holds an earlier pull plus files the record does not list: refused, or replaced
  whole with ``--force``;
- anything else, and always a git checkout, the workspace root, a home dir, ``/``, the
  cwd or one of its parents (when not empty): refused, ``--force`` or not.

The record is read from disk and so is not trusted: its size is bounded and every field
checked; a record that fails the checks means "not a pull".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_action.checkpoint.manifest import PULL_RECORD_NAME, FileDigest
from ckpt_action.errors import CkptError, InputError
from ckpt_action.names import safe_relative

RECORD_FORMAT = "ckpt-action/pull/v1"
MAX_RECORD_BYTES = 64 * 1024 * 1024
# Entries looked at in an existing target before giving up on it: a pull target is a
# checkpoint, not a tree of millions of files, and the walk must stay bounded.
MAX_TARGET_ENTRIES = 200_000
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_STAGING_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


@dataclass(frozen=True)
class RecordedFile:
    """One file as the last pull left it: the digest it was verified against, and its stat."""

    size: int
    sha256: str | None
    git_oid: str | None
    mtime_ns: int
    ino: int

    @property
    def digest(self) -> FileDigest:
        return FileDigest(self.size, self.sha256, self.git_oid)

    def unchanged(self, st: os.stat_result) -> bool:
        """The file on disk is still the one recorded (same inode, size and mtime)."""
        return (stat.S_ISREG(st.st_mode) and st.st_size == self.size and st.st_mtime_ns == self.mtime_ns
                and st.st_ino == self.ino)

    @classmethod
    def of(cls, digest: FileDigest, st: os.stat_result) -> RecordedFile:
        return cls(digest.size, digest.sha256, digest.git_oid, st.st_mtime_ns, st.st_ino)


@dataclass(frozen=True)
class PullRecord:
    """What an earlier pull put in a dir (``files`` keyed by path relative to the dir)."""

    repo: str
    subfolder: str
    revision: str
    partial: bool
    files: dict[str, RecordedFile]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        doc = {
            "format": RECORD_FORMAT,
            "repo": self.repo,
            "subfolder": self.subfolder,
            "revision": self.revision,
            "partial": self.partial,
            "include": list(self.include),
            "exclude": list(self.exclude),
            "files": {rel: {"size": f.size, "sha256": f.sha256, "git_oid": f.git_oid, "mtime_ns": f.mtime_ns,
                            "ino": f.ino} for rel, f in sorted(self.files.items())},
        }
        return (json.dumps(doc, indent=1) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> PullRecord | None:
        """The record, or None when it is not one this version wrote (then the dir is not a pull)."""
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
                return None
            files: dict[str, RecordedFile] = {}
            raw_files = doc["files"]
            if not isinstance(raw_files, dict):
                return None
            for rel, d in raw_files.items():
                if not isinstance(rel, str) or not safe_relative(rel) or rel == PULL_RECORD_NAME:
                    return None
                nums = [d["size"], d["mtime_ns"], d["ino"]]
                if not all(type(n) is int and n >= 0 for n in nums):
                    return None
                sha, git = d.get("sha256"), d.get("git_oid")
                if sha is not None and not (isinstance(sha, str) and _HEX64.match(sha)):
                    return None
                if git is not None and not (isinstance(git, str) and _HEX40.match(git)):
                    return None
                files[rel] = RecordedFile(d["size"], sha, git, d["mtime_ns"], d["ino"])
            strings = [doc["repo"], doc["subfolder"], doc["revision"]]
            patterns = [doc.get("include", []), doc.get("exclude", [])]
            if not all(isinstance(s, str) for s in strings) or not isinstance(doc["partial"], bool):
                return None
            if not all(isinstance(p, list) and all(isinstance(x, str) for x in p) for p in patterns):
                return None
            return cls(doc["repo"], doc["subfolder"], doc["revision"], doc["partial"], files,
                       tuple(patterns[0]), tuple(patterns[1]))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None


def read_record(target: Path) -> PullRecord | None:
    """The record in ``target``, or None when there is none or it cannot be trusted."""
    path = target / PULL_RECORD_NAME
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RECORD_BYTES:
            return None
        return PullRecord.from_json(fh.read(MAX_RECORD_BYTES + 1))


def write_record(target: Path, record: PullRecord) -> None:
    """Write the record into ``target`` (tmp file + rename: never half a record)."""
    tmp = target / f"{PULL_RECORD_NAME}.tmp"
    tmp.write_bytes(record.to_json())
    os.replace(tmp, target / PULL_RECORD_NAME)


# --- where a pull stages, and what it leaves beside the target --------------------------------

def pinned(target: Path) -> bool:
    """A target that cannot be renamed over: a mount point (``docker run -v DIR:/data``).

    ``os.path.ismount`` misses a bind mount within one filesystem (same device on both
    sides), so Linux's own table of mount points is asked too.
    """
    if not target.is_dir():
        return False
    return os.path.ismount(target) or str(target.resolve()) in _mount_points()


def _mount_points() -> set[str]:
    """Mount points of this process (Linux ``/proc/self/mountinfo``; empty elsewhere)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines(16 * 1024 * 1024)
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:  # the mount point is the 5th field, with spaces and such as octal escapes
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def staging_base(target: Path) -> Path:
    """Stage beside the target (same filesystem, the switch is a rename); inside it when the
    target is a mount point or its parent is not writable (a container's ``/``)."""
    if pinned(target) or (target.is_dir() and not os.access(target.parent, os.W_OK)):
        return target
    return target.parent


def staging_prefix(target: Path) -> str:
    """Names a pull gives its staging dirs: ``.NAME.ckpt-XXXXXXXX`` (8 random characters)
    and ``.NAME.ckpt-old-XXXXXXXX`` (the previous dir, while it is replaced)."""
    return f".{target.name}.ckpt-"


def _staging_re(target: Path) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(staging_prefix(target))}(?:old-)?[a-z0-9_]{{8}}$")


def make_staging(target: Path, kind: str = "") -> Path:
    """A new, empty staging dir for ``target`` (``kind`` "old-" for the dir being replaced).

    Made with the process's umask, unlike tempfile's 0700: the staging dir becomes the target.
    """
    base = staging_base(target)
    for _attempt in range(100):
        name = "".join(secrets.choice(_STAGING_CHARS) for _ in range(8))
        path = base / f"{staging_prefix(target)}{kind}{name}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free staging name beside {target}")


def is_ours(target: Path, name: str) -> bool:
    """A top-level name in a staging base that a pull of ``target`` made (staging dirs, lock)."""
    return bool(_staging_re(target).match(name)) or name == lock_name(target)


def lock_name(target: Path) -> str:
    return f"{staging_prefix(target)}lock"


def remove_stale_staging(target: Path) -> int:
    """Remove staging dirs a killed pull into ``target`` left behind (call under the lock).

    Only names this module generates are touched; returns how many were removed.
    """
    base = staging_base(target)
    pattern = _staging_re(target)
    removed = 0
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    for name in names:
        if pattern.match(name):
            path = base / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
            removed += 1
    return removed


@contextlib.contextmanager
def target_lock(target: Path) -> Iterator[None]:
    """Hold ``.NAME.ckpt-lock`` beside the target for the whole pull: a second pull into the
    same dir fails at once instead of racing this one (or removing its staging dir).

    The lock file is removed at the end; the inode check after locking makes a pull that
    opened the file just before it went away try again with a fresh one.
    """
    base = staging_base(target)
    path = base / lock_name(target)
    for _attempt in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            if not _try_lock(fd):
                raise CkptError(f"another pull into {target} is running (it holds {path}): wait for it to"
                                " finish, or pull into another --local-dir")
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                continue
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return
        finally:
            os.close(fd)
    raise CkptError(f"could not lock {path}: another process keeps replacing it")


def _try_lock(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


# --- the rule for an existing target --------------------------------------------------------

@dataclass
class TargetState:
    """What an existing pull target holds, as far as replacing it is concerned."""

    path: Path
    exists: bool = False
    record: PullRecord | None = None
    files: dict[str, os.stat_result] = field(default_factory=dict)
    """Regular files under the target (record and staging names aside), with their lstat."""
    foreign: list[str] = field(default_factory=list)
    """Entries the record does not account for (other files, symlinks, FIFOs, devices)."""

    @property
    def empty(self) -> bool:
        return not self.files and not self.foreign


def protected_reason(path: Path) -> str | None:
    """Why ``path`` is a dir no pull may fill unless it is empty (None when it is not one)."""
    resolved = path.resolve()
    if resolved == Path(resolved.anchor):
        return "is the filesystem root"
    if os.path.lexists(path / ".git"):
        return "is a git checkout"
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace and resolved == Path(workspace).resolve():
        return "is the workspace root ($GITHUB_WORKSPACE)"
    homes = {Path(os.environ["HOME"]).resolve()} if os.environ.get("HOME") else set()
    with contextlib.suppress(RuntimeError, KeyError):  # no home dir known at all
        homes.add(Path.home().resolve())
    if resolved in homes:
        return "is a home dir"
    if resolved in _cwd().parents:
        return "is a parent of the current dir"
    return None


def _cwd() -> Path:
    """The current dir, resolved (a deleted one is nowhere: it has no parents to protect)."""
    try:
        return Path.cwd().resolve()
    except OSError:
        return Path("/nonexistent-cwd")


def inspect(path: Path) -> TargetState:
    """Walk an existing target (bounded, no symlink followed, no file opened but the record).

    Directories count for nothing: replacing an empty one loses nothing, and a file in one
    is looked at like any other.
    """
    path = Path(os.path.abspath(path))
    state = TargetState(path)
    if not path.is_dir() or path.is_symlink():
        return state
    state.exists = True
    state.record = read_record(path)
    seen = 0
    stack = [(path, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise InputError(f"--local-dir {path}: cannot read {folder} ({exc.strerror}): fix its permissions"
                             " or choose another dir") from None
        for entry in entries:
            seen += 1
            if seen > MAX_TARGET_ENTRIES:
                raise InputError(f"--local-dir {path} holds more than {MAX_TARGET_ENTRIES} entries: pull into a"
                                 " dedicated dir")
            rel = prefix + entry.name
            if not prefix and (entry.name in (PULL_RECORD_NAME, f"{PULL_RECORD_NAME}.tmp")
                               or is_ours(path, entry.name)):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # gone while we looked: nothing to keep or to lose
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append((Path(entry.path), rel + "/"))
            elif stat.S_ISREG(st.st_mode) and state.record is not None and rel in state.record.files:
                state.files[rel] = st
            elif stat.S_ISREG(st.st_mode):
                state.files[rel] = st
                state.foreign.append(rel)
            else:
                state.foreign.append(rel)  # a symlink, FIFO, socket or device: never ckpt-action's
    state.foreign.sort()
    return state


def _holds_a_file(path: Path) -> bool:
    """Anything but directories under ``path`` (stops at the first one found, or, taking
    an endless tree of empty dirs for full, after MAX_TARGET_ENTRIES dirs). What a pull of
    ``path`` itself keeps at its top (its lock, its staging dirs, for a mount point) does
    not count: a pull into an empty mount point finds its own lock there."""
    for seen, (dirpath, dirnames, filenames) in enumerate(os.walk(path)):
        if dirpath == str(path):
            filenames = [f for f in filenames if not is_ours(path, f)]
            dirnames[:] = [d for d in dirnames if not is_ours(path, d)]
        if filenames or seen > MAX_TARGET_ENTRIES or any(os.path.islink(os.path.join(dirpath, d)) for d in dirnames):
            return True
    return False


def check_target(value: str | None, *, force: bool) -> TargetState:
    """Apply the rule above to ``--local-dir`` before anything is sent or created (exit 2).

    >>> check_target("/nonexistent/new-dir", force=False).exists  # doctest: +SKIP
    False
    """
    if not value:
        raise InputError("--local-dir is required: give the directory to pull the checkpoint into")
    path = Path(os.path.abspath(value))
    if path.is_symlink():
        raise InputError(f"--local-dir {value} is a symlink: give the real directory")
    if path.exists() and not path.is_dir():
        raise InputError(f"--local-dir {value} exists and is not a directory: choose another path")
    ancestor = path.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"--local-dir {value}: {ancestor} is not a directory")
    if not path.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"--local-dir {value}: {ancestor} is not writable: choose a dir you can write to")
    if path.exists() and not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"--local-dir {value} is not writable: choose a dir you can write to")
    if path.exists() and _holds_a_file(path):
        why = protected_reason(path)  # before the walk: `/` or a home dir would take long to walk
        if why is not None:
            raise InputError(f"--local-dir {value} {why}: pull into a dedicated dir (new, empty, or holding an"
                             " earlier pull), never one that holds other work")
    state = inspect(path)
    if state.empty:
        return state
    if state.record is None:
        example = (state.foreign or sorted(state.files))[0]
        raise InputError(f"--local-dir {value} holds files ckpt-action did not pull (e.g. {example}): pull into a"
                         " dedicated dir; --force only replaces a dir that is empty or holds an earlier pull")
    if state.foreign and not force:
        raise InputError(f"--local-dir {value} holds an earlier pull plus {state.foreign[0]}, which that pull did"
                         " not write: remove it, or pass --force to replace the whole dir")
    if state.foreign and path.resolve() == _cwd():
        # The current dir may be updated in place (a container's mounted work dir), but never
        # emptied of work on the word of a record someone may have copied in.
        raise InputError(f"--local-dir {value} is the current dir and holds {state.foreign[0]}, which the earlier"
                         " pull did not write: --force does not replace the current dir; pull into a dedicated dir")
    return state


def pull_target(value: str | None, *, force: bool) -> Path:
    """The checked ``--local-dir`` of a pull: new, empty, or holding an earlier pull (the
    whole rule, ``--force`` included, is :func:`check_target`'s)."""
    return check_target(value, force=force).path
