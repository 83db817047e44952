"""The checkpoint manifest: what a complete checkpoint holds, written last.

A manifest lives at ``<subfolder>/ckpt-manifest.json``. It lists every file of the
checkpoint (path relative to the subfolder, size, sha256, for small files the git blob id
the Hub reports for regular files, and in a Storage Bucket the Xet hash the bucket listing
reports), the step, the time and the tool version.
Its presence with ``complete: true`` and files that match it is what makes a
checkpoint complete; a multi-commit push writes ``complete: false`` first.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_action import names
from ckpt_action.checkpoint.gitobjects import TreeItem, blob_hasher, blob_oid, is_lfs, lfs_pointer, tree_oid
from ckpt_action.checkpoint.localfiles import local_files, open_regular
from ckpt_action.checkpoint.metrics import read_field
from ckpt_action.checkpoint.provenance import PROVENANCE_NAME
from ckpt_action.checkpoint.signing import SIGNATURE_NAME
from ckpt_action.errors import InputError, UnreadableManifest, quoted
from ckpt_action.handle import BUCKET_PIN_RE, MAX_STEP, SHA256_RE, SHA_RE, is_step, is_whole
from ckpt_action.names import safe_relative
from ckpt_action.version import __version__

MANIFEST_NAME = "ckpt-manifest.json"
# What a pull leaves in the dir it fills (see localdir.py): not a file of the checkpoint.
PULL_RECORD_NAME = ".ckpt-pull.json"
FORMAT = "ckpt-action/manifest/v1"
# The Hub stores files above 10 MB through LFS; below this we also record the git blob
# id, so regular files can be checked against a tree listing without downloading them.
GIT_OID_LIMIT = 20 * 1024 * 1024
_CHUNK = 8 * 1024 * 1024


def predict_lfs(path: str, size: int, sample: bytes) -> bool:
    """Whether the Hub will store this file through LFS: the local Hub's rule with the
    .gitattributes every new repo starts with (a repo whose own .gitattributes says
    otherwise only costs latest its fast path)."""
    return is_lfs(path, size, sample)


@dataclass(frozen=True)
class FileDigest:
    """A file's size and hashes. ``sha256`` is None only for expectations taken from a
    tree listing of a regular (non-LFS) file, which the Hub identifies by git blob id."""

    size: int
    sha256: str | None
    git_oid: str | None = None
    lfs: bool | None = None
    """Predicted at push time (see :func:`predict_lfs`); lets latest check a folder's tree
    id from the manifest alone."""
    xet: str | None = field(default=None, compare=False)
    """The file's Xet hash as its upload into a Storage Bucket answered it (64 hex), which
    the bucket listing reports for each file: a reader in another process, who cannot learn
    a file's sha256 from the listing, compares it with the listing's (a file overwritten
    with other bytes of the same size has another one). Not part of equality: the same
    bytes hashed again locally have no Xet hash yet. None: a repo's file, or a manifest
    written before it was recorded."""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"size": self.size, "sha256": self.sha256}
        if self.git_oid:
            out["git_oid"] = self.git_oid
        if self.lfs is not None:
            out["lfs"] = self.lfs
        if self.xet is not None:
            out["xet"] = self.xet
        return out


@dataclass(frozen=True)
class RemoteFile:
    """A file as a tree listing reports it (path relative to the subfolder)."""

    size: int
    git_oid: str | None
    lfs_sha256: str | None
    xet: str | None = None
    """Its Xet hash, as a bucket listing reports it (a repo's listing: None)."""


class Hasher:
    """sha256 and, for files up to GIT_OID_LIMIT, the git blob id, fed chunk by chunk.

    The one hashing pass of both push (the manifest) and pull (verification as bytes
    arrive). The git id's header needs the size up front: pass the expected size.
    ``git=True`` computes the git id whatever the size (pull checks a file the Hub
    vouches for only by git id that way).
    """

    def __init__(self, size: int | None, *, git: bool = False) -> None:
        self.size = size
        self.sha = hashlib.sha256()
        self.git = blob_hasher(size) if size is not None and (git or size <= GIT_OID_LIMIT) else None
        self.done = 0
        self.sample = b""

    def update(self, chunk: bytes | memoryview) -> None:
        if len(self.sample) < 512:
            self.sample += bytes(chunk[: 512 - len(self.sample)])
        self.sha.update(chunk)
        if self.git is not None:
            self.git.update(chunk)
        self.done += len(chunk)

    def digest(self, rel: str | None = None) -> FileDigest:
        """What was hashed; with ``rel`` (the path in the checkpoint) also the predicted LFS flag."""
        git = self.git.hexdigest() if self.git is not None and self.done == self.size else None
        lfs = predict_lfs(rel, self.done, self.sample) if rel is not None else None
        return FileDigest(self.done, self.sha.hexdigest(), git, lfs)


def digest_file(path: str | os.PathLike[str], rel: str | None = None) -> FileDigest:
    """sha256 (and git blob id for small files) in one read pass; with ``rel`` (the path in
    the checkpoint) also the predicted LFS flag."""
    fd = open_regular(path)  # a link or FIFO that took the file's place since the scan is refused
    hasher = Hasher(os.fstat(fd).st_size)
    with open(fd, "rb", buffering=0) as fh:
        if hasattr(os, "posix_fadvise"):  # one pass front to back: the kernel may read further ahead
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            hasher.update(view[:n])
    return hasher.digest(rel)


def digest_bytes(rel: str, data: bytes) -> FileDigest:
    """The digest push would record for a file with this path and content."""
    hasher = Hasher(len(data))
    hasher.update(data)
    return hasher.digest(rel)


def digest_files(paths: Mapping[str, Path], threads: int = 4) -> dict[str, FileDigest]:
    """Digest many files; hashlib drops the GIL on big buffers, so threads overlap I/O.

    The biggest files start first, so one big file hashed last cannot leave the other
    threads idle while it finishes alone.
    """
    order = sorted(paths, key=lambda rel: -os.path.getsize(paths[rel]))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        digests = dict(zip(order, pool.map(digest_file, [paths[rel] for rel in order], order), strict=True))
    return {rel: digests[rel] for rel in paths}


def scan_dir(root: Path) -> dict[str, Path]:
    """Every file under root, keyed by its posix path relative to root, found and checked by
    the one walk of a local dir (:func:`~ckpt_action.checkpoint.localfiles.local_files`:
    links never followed out, each entry checked, refusals as InputError).

    The tool's own files are left out (:func:`tool_file`).
    """
    return {rel: path for rel, path in local_files(root).items() if not tool_file(rel)}


WRITTEN_BY_PUSH = (MANIFEST_NAME, SIGNATURE_NAME, PROVENANCE_NAME)
"""What a push writes at the top of a folder itself, from what it pushes."""


def tool_file(rel: str) -> bool:
    """A path of a local dir that push never uploads, since ckpt-action wrote it there: a
    manifest (a pulled checkpoint being re-pushed: push writes a fresh one), a signature and
    its provenance statement (a signed push writes its own, an unsigned one none: those of a
    pulled copy vouch for another folder), and what a pull keeps in its target (its record,
    lock and staging dirs: :func:`~ckpt_action.names.reserved_in_target`).

    >>> tool_file("ckpt-manifest.json"), tool_file(".ckpt-pull.json"), tool_file("sub/model.sig")
    (True, True, False)
    """
    return rel in WRITTEN_BY_PUSH or names.reserved_in_target(rel)


@dataclass
class Manifest:
    files: dict[str, FileDigest]
    step: int | None = None
    complete: bool = True
    created_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    tool_version: str = __version__
    source: dict[str, str] | None = None
    metrics: dict[str, float] | None = None
    """What the checkpoint scored (``--metric``, the Trainer's eval metrics), checked
    (:mod:`~ckpt_action.checkpoint.metrics`); None: none recorded, or unusable (see below)."""
    metrics_problem: str | None = field(default=None, compare=False)
    """Read from the Hub: why its ``metrics`` field was unusable (then ``metrics`` is None,
    and the folder is never chosen by a metric)."""

    def content_key(self) -> tuple[object, ...]:
        """What makes two manifests describe the same checkpoint (time and tool aside)."""
        return (
            self.complete,
            self.step,
            tuple(sorted((p, d.size, d.sha256 or "") for p, d in self.files.items())),
            tuple(sorted((self.source or {}).items())),
            tuple(sorted((self.metrics or {}).items())),
        )

    def to_json(self) -> bytes:
        doc: dict[str, object] = {
            "format": FORMAT,
            "complete": self.complete,
            "step": self.step,
            "created_at": self.created_at,
            "tool": f"ckpt-action {self.tool_version}",
            "files": {p: self.files[p].to_dict() for p in sorted(self.files)},
        }
        if self.source:
            doc["source"] = self.source
        if self.metrics:
            doc["metrics"] = dict(sorted(self.metrics.items()))
        return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        """Parse a manifest the Hub served, checking every field before anything uses it;
        :class:`UnreadableManifest` names the first that is wrong."""
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise UnreadableManifest(f"the checkpoint manifest is unreadable (not JSON: {exc})") from exc
        try:
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            if doc.get("format") != FORMAT:
                raise ValueError(f"unknown format {quoted(doc.get('format'), 60)}")
            files = parse_files(doc.get("files"))
            step = doc.get("step")
            if step is not None and not is_step(step):
                raise ValueError(f"step {quoted(step, 40)} is not a whole number from 0 to {MAX_STEP}")
            if not isinstance(doc.get("complete"), bool):
                raise ValueError("complete is not true or false")
            tool = doc.get("tool", "")
            created = doc.get("created_at", "")
            if not isinstance(tool, str) or not isinstance(created, str):
                raise ValueError("tool or created_at is not a string")
            metrics, metrics_problem = read_field(doc.get("metrics"))
            return cls(
                files=files,
                step=step,
                complete=doc["complete"],
                created_at=created,
                tool_version=tool.rpartition(" ")[2],
                source=_source(doc.get("source")),
                metrics=metrics,
                metrics_problem=metrics_problem,
            )
        except ValueError as exc:
            raise UnreadableManifest(f"the checkpoint manifest is unreadable ({exc})") from exc


def parse_files(raw: object) -> dict[str, FileDigest]:
    """A manifest's ``files`` object (``to_dict`` of each digest), every path and hash
    checked; ValueError names the first that is wrong. Also what a rank of a distributed
    push sends the others: the same data, from outside as much as a manifest is."""
    if not isinstance(raw, dict):
        raise ValueError("files is not an object")
    return {_path(p): _digest(p, d) for p, d in raw.items()}


def _path(path: str) -> str:
    """A file path a manifest lists: relative, no '..', and a name push would accept (the
    one rule, :func:`~ckpt_action.names.file_name_problem`; it ends up in messages)."""
    if not safe_relative(path) or names.file_name_problem(path):
        raise ValueError(f"it lists an unusable path {quoted(path)}")
    return path


def _digest(path: str, entry: object) -> FileDigest:
    """One manifest entry: a size and at least one hash, each well formed; an entry that
    vouches for no bytes (no sha256, no git id) would let anything of that size through."""
    if not isinstance(entry, dict):
        raise ValueError(f"the entry of {quoted(path)} is not an object")
    size, sha256, git_oid, lfs = entry.get("size"), entry.get("sha256"), entry.get("git_oid"), entry.get("lfs")
    xet = entry.get("xet")
    if not is_whole(size):
        raise ValueError(f"the size of {quoted(path)} is not a whole number >= 0")
    if sha256 is not None and not (isinstance(sha256, str) and SHA256_RE.match(sha256)):
        raise ValueError(f"the sha256 of {quoted(path)} is not 64 lowercase hex")
    if git_oid is not None and not (isinstance(git_oid, str) and SHA_RE.match(git_oid)):
        raise ValueError(f"the git_oid of {quoted(path)} is not 40 lowercase hex")
    if xet is not None and not (isinstance(xet, str) and SHA256_RE.match(xet)):
        raise ValueError(f"the xet of {quoted(path)} is not 64 lowercase hex")
    if sha256 is None and git_oid is None:
        raise ValueError(f"{quoted(path)} has neither sha256 nor git_oid: nothing to verify it by")
    return FileDigest(size, sha256, git_oid, lfs if isinstance(lfs, bool) else None, xet)


def _source(source: object) -> dict[str, str] | None:
    """Where a promoted checkpoint came from: repo, subfolder and revision, each checked
    (other keys are dropped; they would only be printed)."""
    if source is None:
        return None
    if not isinstance(source, dict):
        raise ValueError("source is not an object")
    checks = {"repo": lambda v: _checked(names.repo_id, v), "subfolder": lambda v: _checked(names.subfolder, v),
              "revision": lambda v: bool(SHA_RE.match(v) or BUCKET_PIN_RE.match(v))}
    out = {}
    for key, ok in checks.items():
        value = source.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not ok(value):
            raise ValueError(f"source {key} {quoted(value, 60)} is malformed")
        out[key] = value
    return out


def _checked(check: Callable[[str], str], value: str) -> bool:
    try:
        return check(value) == value and value.isprintable()
    except InputError:
        return False


def folder_tree_oid(files: Mapping[str, FileDigest], manifest_bytes: bytes) -> str | None:
    """The git tree id a folder holding exactly these files and this manifest must have.

    Compared with the folder's id in a top-level listing, it proves the folder is this
    checkpoint, complete, without listing its files. None when the manifest lacks what
    the computation needs (older manifests, large regular files).
    """
    tree: dict[str, object] = {}
    leaves: list[tuple[str, str]] = [(MANIFEST_NAME, blob_oid(manifest_bytes))]
    for path, d in files.items():
        if d.lfs is None or d.sha256 is None:
            return None
        if d.lfs:
            leaves.append((path, blob_oid(lfs_pointer(d.sha256, d.size))))
        elif d.git_oid:
            leaves.append((path, d.git_oid))
        else:
            return None
    for path, oid in leaves:
        node = tree
        *dirs, name = path.split("/")
        for part in dirs:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None
            node = child
        node[name] = oid

    def oid_of(node: dict[str, object]) -> str:
        return tree_oid(TreeItem(name, oid_of(value), is_dir=True) if isinstance(value, dict)
                        else TreeItem(name, str(value)) for name, value in node.items())

    return oid_of(tree)


def expected_from_remote(remote: Mapping[str, RemoteFile]) -> dict[str, FileDigest]:
    """Expectations for a checkpoint without a manifest: what the tree listing vouches for."""
    return {p: FileDigest(r.size, r.lfs_sha256, None if r.lfs_sha256 else r.git_oid) for p, r in remote.items()}
