"""A pull's target dir: what it holds, whether ckpt-action wrote it, and what may replace it.

Every pull leaves a record in the dir it fills, ``.ckpt-pull.json``: which checkpoint it
holds and, for each file, the digest it was verified against and the ``size``,
``mtime_ns`` and inode it had once written. The record is the mark that the dir holds an
earlier pull. It lets a later pull keep files whose stat is unchanged without reading
them again, and it is written last, so a dir without one never looks complete.

The rule for an existing target (issue: ``--force`` never deletes what ckpt-action did
not write). A file counts as the tool's own only while it still holds what the record
says the tool wrote: its stat matching the record (the shortcut), else its bytes hashing
to the recorded digest. A file the record does not name, or whose bytes differ, is the
user's:

- new, or empty: pulled into;
- holds an earlier pull and nothing else: updated in place, no ``--force`` needed;
- a recorded file edited since (its bytes differ): refused, or overwritten with
  ``--force``;
- any file the record does not name (and any symlink, FIFO, device): refused, ``--force``
  or not, since replacing the dir would delete it;
- anything else, and always a git checkout, the workspace root, a home dir, ``/`` or a
  parent of the cwd (when not empty): refused, ``--force`` or not.

The record is read from disk and so is not trusted: its size is bounded and every field
checked; a record that fails the checks means "not a pull". And it vouches for a file's
bytes by its stat only if the tool wrote it: each record carries ``mac``, an HMAC-SHA256
of the rest of it under a key kept outside every target (``record-key`` in the ckpt-action
dir of the user's Hugging Face home, made on first use, readable by the user only). A
record whose mark does not verify (rewritten by hand, written before the mark, or on
another machine) still says which files are the tool's, but proves nothing about their
bytes: each is hashed, as a file whose stat changed is. Where no key can be kept (a home
that cannot be written), records carry no mark and re-pulls hash every kept file.

Such a file is read once per pull: the look that hashes it keeps the digest with the stat
the file held throughout (``TargetState.hashed``), and the pull's later look under its lock
and its reuse of the file take that digest while the stat still holds.

Over 400 lines on purpose: the pull record, its key and the rule for an existing target are
one rule (a file is the tool's only while its record vouches for it), so they stay together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_action.checkpoint.manifest import PULL_RECORD_NAME, FileDigest, Hasher
from ckpt_action.checkpoint.verdict import satisfies
from ckpt_action.disk.access import not_writable_hint
from ckpt_action.errors import CkptError, InputError, param
from ckpt_action.filelock import try_lock
from ckpt_action.handle import SHA256_RE, SHA_RE
from ckpt_action.names import safe_relative
from ckpt_action.settings import hf_home

RECORD_FORMAT = "ckpt-action/pull/v1"
MAX_RECORD_BYTES = 64 * 1024 * 1024
# Entries looked at in an existing target before giving up on it: a pull target is a
# checkpoint, not a tree of millions of files, and the walk must stay bounded.
MAX_TARGET_ENTRIES = 200_000
_STAGING_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_HASH_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class RecordedFile:
    """One file as the last pull left it: the digest it was verified against, and its stat."""

    size: int
    sha256: str | None
    git_oid: str | None
    mtime_ns: int
    ino: int
    vouched: bool = True
    """Its record carries the tool's verified mark: only then may its stat stand for its bytes."""

    @property
    def digest(self) -> FileDigest:
        return FileDigest(self.size, self.sha256, self.git_oid)

    def unchanged(self, st: os.stat_result) -> bool:
        """The file on disk is still the one the tool recorded (same inode, size and mtime, in
        a record the tool wrote); False means "hash it"."""
        return (self.vouched and stat.S_ISREG(st.st_mode) and st.st_size == self.size
                and st.st_mtime_ns == self.mtime_ns and st.st_ino == self.ino)

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
        doc = self._doc()
        key = record_key(create=True)
        if key is not None:
            doc["mac"] = _mac(key, doc)
        return (json.dumps(doc, indent=1) + "\n").encode()

    def _doc(self) -> dict[str, object]:
        return {
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
                if sha is not None and not (isinstance(sha, str) and SHA256_RE.match(sha)):
                    return None
                if git is not None and not (isinstance(git, str) and SHA_RE.match(git)):
                    return None
                files[rel] = RecordedFile(d["size"], sha, git, d["mtime_ns"], d["ino"])
            strings = [doc["repo"], doc["subfolder"], doc["revision"]]
            patterns = [doc.get("include", []), doc.get("exclude", [])]
            if not all(isinstance(s, str) for s in strings) or not isinstance(doc["partial"], bool):
                return None
            if not all(isinstance(p, list) and all(isinstance(x, str) for x in p) for p in patterns):
                return None
            record = cls(doc["repo"], doc["subfolder"], doc["revision"], doc["partial"], files,
                         tuple(patterns[0]), tuple(patterns[1]))
            if record._vouched_by(doc.get("mac")):
                return record
            return dataclasses.replace(record, files={rel: dataclasses.replace(f, vouched=False)
                                                      for rel, f in files.items()})
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None


    def _vouched_by(self, mark: object) -> bool:
        """``mark`` is the tool's HMAC of this very record (as re-serialized from its checked
        fields, so nothing unchecked can ride along)."""
        key = record_key(create=False)
        return (key is not None and isinstance(mark, str)
                and hmac.compare_digest(mark.encode("ascii", "replace"), _mac(key, self._doc()).encode()))


_KEY_DIR = "ckpt-action"
_KEY_NAME = "record-key"
_KEY_BYTES = 32


def _mac(key: bytes, doc: dict[str, object]) -> str:
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return "hmac-sha256:" + hmac.new(key, body, hashlib.sha256).hexdigest()


def record_key(*, create: bool) -> bytes | None:
    """The key that marks the records this user's pulls write, kept in the user's Hugging
    Face home (never in a target), made with ``create`` on first use (mode 0600); None
    when there is none and none can be kept there, so records are written unmarked."""
    path = Path(hf_home(os.environ)) / _KEY_DIR / _KEY_NAME
    for _attempt in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            if not create:
                return None
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                made = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            except FileExistsError:
                continue  # another pull made it just now: read that one
            except OSError:
                return None
            with os.fdopen(made, "wb") as fh:
                fh.write(secrets.token_hex(_KEY_BYTES).encode())
            continue
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read(4 * _KEY_BYTES + 1) if stat.S_ISREG(st.st_mode) else b""
        key = data.strip()
        # A key someone else could read or write marks nothing: then records are unmarked.
        if len(key) != 2 * _KEY_BYTES or (hasattr(os, "getuid") and (st.st_uid != os.getuid()
                                                                    or st.st_mode & 0o077)):
            return None
        return key
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
    return re.compile(rf"\A{re.escape(staging_prefix(target))}(?:old-)?[a-z0-9_]{{8}}\Z")


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


def adopt_mode(target: Path, staged: Path) -> None:
    """Give ``staged``, about to replace ``target``, the target's mode, and its owner and
    group where this process may (a dir made ``mkdir -m 700`` stays private). A new
    target keeps the umask's mode."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    if hasattr(os, "chown"):
        with contextlib.suppress(OSError):  # only root may give a dir away; a group needs membership
            os.chown(staged, st.st_uid, st.st_gid)
    os.chmod(staged, stat.S_IMODE(st.st_mode))  # after chown, which may clear set-id bits


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
            if not try_lock(fd):
                raise CkptError(f"another pull into {target} is running (it holds {path}): wait for it to"
                                f" finish, or pull into another {param('local_dir')}")
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
    edited: list[str] = field(default_factory=list)
    """Recorded files whose bytes no longer hash to what the record says was written."""
    hashed: dict[str, RecordedFile] = field(default_factory=dict)
    """Recorded files whose stat did not vouch for them, hashed during this look and found
    to hold the recorded bytes: that digest with the stat they had throughout the hashing.
    What comes next in the same pull takes it while the stat holds, instead of reading them again."""

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


def inspect(path: Path, looked: TargetState | None = None) -> TargetState:
    """Walk an existing target (bounded, no symlink followed, no file opened but the record
    and the recorded files whose stat does not vouch for them, each hashed once).

    Directories count for nothing: replacing an empty one loses nothing, and a file in one
    is looked at like any other. ``looked``: an earlier look at the same target in the same
    pull; a file it hashed whose stat still holds is not hashed again.
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
            raise InputError(f"{param('local_dir')} {path}: cannot read {folder} ({exc.strerror}): fix its permissions"
                             " or choose another dir") from None
        for entry in entries:
            seen += 1
            if seen > MAX_TARGET_ENTRIES:
                raise InputError(f"{param('local_dir')} {path} holds more than {MAX_TARGET_ENTRIES} entries:"
                                 " pull into a"
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
                rec = state.record.files[rel]
                if rec.unchanged(st):
                    continue
                earlier = looked if looked is not None and looked.path == path else None
                hashed = earlier.hashed.get(rel) if earlier is not None else None
                if hashed is None or earlier is None or _stat_key(earlier.files[rel]) != _stat_key(st):
                    hashed = _hashed(Path(entry.path), rec, st)  # not hashed by the earlier look, or changed since
                if hashed is not None and satisfies(hashed.digest, rec.digest):
                    state.hashed[rel] = hashed
                else:
                    state.edited.append(rel)
            elif stat.S_ISREG(st.st_mode):
                state.files[rel] = st
                state.foreign.append(rel)
            else:
                state.foreign.append(rel)  # a symlink, FIFO, socket or device: never ckpt-action's
    state.foreign.sort()
    state.edited.sort()
    return state


def _hashed(path: Path, rec: RecordedFile, st: os.stat_result) -> RecordedFile | None:
    """``path``'s digest with its stat, read once, never past the recorded size; None when
    it cannot hold the recorded bytes (another size, no digest to check, unreadable) or
    changed while it was read."""
    if st.st_size != rec.size or (rec.sha256 is None and rec.git_oid is None):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            return None
        hasher = Hasher(rec.size, git=rec.sha256 is None)
        with open(fd, "rb", buffering=0, closefd=False) as reader:
            while (chunk := reader.read(_HASH_CHUNK)) and hasher.done <= rec.size:
                hasher.update(chunk)
        after = os.fstat(fd)
        if _stat_key(after) != _stat_key(before) or _stat_key(before) != _stat_key(st):
            return None  # written to while we looked: what was hashed is not what is there
        return RecordedFile.of(hasher.digest(), before)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


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


def check_target(value: str | None, *, force: bool, looked: TargetState | None = None) -> TargetState:
    """Apply the rule above to ``--local-dir`` before anything is sent or created (exit 2).
    ``looked``: this pull's earlier check of the same dir (see :func:`inspect`).

    >>> check_target("new-dir", force=False).exists
    False
    """
    if not value:
        raise InputError(f"{param('local_dir')} is required: give the directory to pull the checkpoint"
                         " into", param='local_dir')
    path = Path(os.path.abspath(value))
    if path.is_symlink():
        raise InputError(f"{param('local_dir')} {value} is a symlink: give the real directory", param='local_dir')
    if path.exists() and not path.is_dir():
        raise InputError(f"{param('local_dir')} {value} exists and is not a directory: choose another"
                         " path", param='local_dir')
    ancestor = path.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{param('local_dir')} {value}: {ancestor} is not a directory", param='local_dir')
    if not path.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{param('local_dir')} {value}: {ancestor} is not writable: choose a dir you can"
                         f" write to{not_writable_hint()}", param='local_dir')
    if path.exists() and not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{param('local_dir')} {value} is not writable: choose a dir you can write"
                         f" to{not_writable_hint()}", param='local_dir')
    if path.exists() and _holds_a_file(path):
        why = protected_reason(path)  # before the walk: `/` or a home dir would take long to walk
        if why is not None:
            raise InputError(f"{param('local_dir')} {value} {why}: pull into a dedicated dir (new, empty, or holding an"
                             " earlier pull), never one that holds other work")
    state = inspect(path, looked)
    if state.empty:
        return state
    if state.record is None:
        example = (state.foreign or sorted(state.files))[0]
        raise InputError(f"{param('local_dir')} {value} holds files ckpt-action did not pull (e.g. {example}):"
                         f" pull into a dedicated dir; {param('force')} only replaces a dir that is empty or holds"
                         " an earlier pull", param="local_dir")
    if state.foreign:
        here = " is the current dir and" if path.resolve() == _cwd() else ""
        raise InputError(f"{param('local_dir')} {value}{here} holds {state.foreign[0]}, which the earlier pull did"
                         f" not write: move it away, or pull into a dedicated dir ({param('force')} never deletes a"
                         " file ckpt-action did not write)", param="local_dir")
    if state.edited and not force:
        raise InputError(f"{param('local_dir')} {value} holds {state.edited[0]}, edited since the earlier pull wrote"
                         f" it: move it away to keep it, or pass {param('force')} to overwrite it with the"
                         " checkpoint's", param="local_dir")
    return state


def pull_target(value: str | None, *, force: bool) -> Path:
    """The checked ``--local-dir`` of a pull: new, empty, or holding an earlier pull (the
    whole rule, ``--force`` included, is :func:`check_target`'s)."""
    return check_target(value, force=force).path
