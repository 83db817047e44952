"""The checkpoint manifest: what a complete checkpoint holds, written last.

A manifest lives at ``<subfolder>/ckpt-manifest.json``. It lists every file of the
checkpoint (path relative to the subfolder, size, sha256, and for small files the git
blob id the Hub reports for regular files), the step, the time and the tool version.
Its presence with ``complete: true`` and files that match it is what makes a
checkpoint complete; a multi-commit push writes ``complete: false`` first.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .errors import IntegrityError

MANIFEST_NAME = "ckpt-manifest.json"
# What a pull leaves in the dir it fills (see localdir.py): not a file of the checkpoint.
PULL_RECORD_NAME = ".ckpt-pull.json"
FORMAT = "ckpt-action/manifest/v1"
# The Hub stores files above 10 MB through LFS; below this we also record the git blob
# id, so regular files can be checked against a tree listing without downloading them.
GIT_OID_LIMIT = 20 * 1024 * 1024
_CHUNK = 8 * 1024 * 1024
# How the Hub decides that an upload goes through LFS: the patterns of the .gitattributes
# every new repo starts with, files of 10 MiB or more, and binary files (a NUL byte in the
# first 512 bytes the client sends as a sample).
LFS_MIN_SIZE = 10 * 1024 * 1024
HUB_LFS_PATTERNS = (
    "*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gz", "*.h5", "*.joblib", "*.lfs.*",
    "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
    "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "saved_model/**/*", "*.tar.*",
    "*.tar", "*.tflite", "*.tgz", "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*",
)


def predict_lfs(path: str, size: int, sample: bytes) -> bool:
    """Whether the Hub will store this file through LFS (a prediction: a repo's own
    .gitattributes can say otherwise, which only costs latest its fast path)."""
    name = path.rsplit("/", 1)[-1]
    return size >= LFS_MIN_SIZE or b"\x00" in sample[:512] or any(
        fnmatch.fnmatchcase(name, pat) or fnmatch.fnmatchcase(path, pat) for pat in HUB_LFS_PATTERNS)


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

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"size": self.size, "sha256": self.sha256}
        if self.git_oid:
            out["git_oid"] = self.git_oid
        if self.lfs is not None:
            out["lfs"] = self.lfs
        return out


@dataclass(frozen=True)
class RemoteFile:
    """A file as a tree listing reports it (path relative to the subfolder)."""

    size: int
    git_oid: str | None
    lfs_sha256: str | None


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
        self.git = (hashlib.sha1(b"blob %d\x00" % size, usedforsecurity=False)
                    if size is not None and (git or size <= GIT_OID_LIMIT) else None)
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


def satisfies(have: FileDigest, want: FileDigest) -> bool:
    """Bytes with digest ``have`` are what ``want`` (a manifest entry, or what a tree
    listing vouches for: sha256 for LFS files, the git id for regular ones) describes."""
    if have.size != want.size:
        return False
    if want.sha256 is not None:
        return have.sha256 == want.sha256
    return want.git_oid is None or have.git_oid == want.git_oid


def digest_file(path: str | os.PathLike[str], rel: str | None = None) -> FileDigest:
    """sha256 (and git blob id for small files) in one read pass; with ``rel`` (the path in
    the checkpoint) also the predicted LFS flag."""
    hasher = Hasher(os.path.getsize(path))
    with open(path, "rb", buffering=0) as fh:
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
    """Every regular file under root, keyed by its posix path relative to root.

    A manifest already in the dir (a pulled checkpoint being re-pushed) is left out:
    push writes a fresh one; so is the record a pull leaves.
    """
    files: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if rel in (MANIFEST_NAME, PULL_RECORD_NAME):
                continue
            files[rel] = full
    return files


@dataclass
class Manifest:
    files: dict[str, FileDigest]
    step: int | None = None
    complete: bool = True
    created_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    tool_version: str = __version__
    source: dict[str, str] | None = None

    def content_key(self) -> tuple[object, ...]:
        """What makes two manifests describe the same checkpoint (time and tool aside)."""
        return (
            self.complete,
            self.step,
            tuple(sorted((p, d.size, d.sha256 or "") for p, d in self.files.items())),
            tuple(sorted((self.source or {}).items())),
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
        return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Manifest:
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT:
                raise ValueError(f"unknown format {doc.get('format')!r}")
            files = {
                str(p): FileDigest(int(d["size"]), None if d.get("sha256") is None else str(d["sha256"]),
                                   d.get("git_oid"), d.get("lfs") if isinstance(d.get("lfs"), bool) else None)
                for p, d in doc["files"].items()
            }
            source = doc.get("source")
            if source is not None and not isinstance(source, dict):
                raise ValueError("source is not an object")
            if not isinstance(doc.get("complete"), bool):
                raise ValueError("complete is not true or false")
            tool = str(doc.get("tool", ""))
            return cls(
                files=files,
                step=doc.get("step"),
                complete=doc["complete"],
                created_at=str(doc.get("created_at", "")),
                tool_version=tool.rpartition(" ")[2],
                source=source,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IntegrityError(f"the checkpoint manifest is unreadable ({exc})") from exc

    def mismatches(self, remote: Mapping[str, RemoteFile]) -> list[str]:
        """Why the remote files (relative paths, manifest excluded) disagree with this manifest."""
        problems = []
        for path, want in self.files.items():
            got = remote.get(path)
            if got is None:
                problems.append(f"{path} is missing")
            elif got.size != want.size:
                problems.append(f"{path} has {got.size} bytes, manifest says {want.size}")
            elif got.lfs_sha256 is not None and got.lfs_sha256 != want.sha256:
                problems.append(f"{path} has sha256 {got.lfs_sha256[:12]}…, manifest says {want.sha256}")
            elif got.lfs_sha256 is None and want.git_oid and got.git_oid and got.git_oid != want.git_oid:
                problems.append(f"{path} differs from the manifest (git blob id)")
        problems.extend(f"{path} is not in the manifest" for path in remote if path not in self.files)
        return problems


def _blob_oid(data: bytes) -> bytes:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).digest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def folder_tree_oid(files: Mapping[str, FileDigest], manifest_bytes: bytes) -> str | None:
    """The git tree id a folder holding exactly these files and this manifest must have.

    Compared with the folder's id in a top-level listing, it proves the folder is this
    checkpoint, complete, without listing its files. None when the manifest lacks what
    the computation needs (older manifests, large regular files).
    """
    tree: dict[str, object] = {}
    leaves: list[tuple[str, bytes]] = [(MANIFEST_NAME, _blob_oid(manifest_bytes))]
    for path, d in files.items():
        if d.lfs is None or d.sha256 is None:
            return None
        if d.lfs:
            leaves.append((path, _blob_oid(lfs_pointer(d.sha256, d.size))))
        elif d.git_oid:
            leaves.append((path, bytes.fromhex(d.git_oid)))
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

    def oid_of(node: dict[str, object]) -> bytes:
        entries = []
        for name, value in node.items():
            if isinstance(value, dict):
                entries.append(((name + "/").encode(), b"40000 " + name.encode() + b"\x00" + oid_of(value)))
            else:
                assert isinstance(value, bytes)
                entries.append((name.encode(), b"100644 " + name.encode() + b"\x00" + value))
        body = b"".join(entry for _key, entry in sorted(entries))
        return hashlib.sha1(b"tree %d\x00" % len(body) + body, usedforsecurity=False).digest()

    return oid_of(tree).hex()


def matches_remote(want: FileDigest, got: RemoteFile | None) -> bool:
    """True when the remote file certainly holds these bytes (so it need not be uploaded)."""
    if got is None or got.size != want.size:
        return False
    if got.lfs_sha256 is not None:
        return got.lfs_sha256 == want.sha256
    return want.git_oid is not None and got.git_oid == want.git_oid


def expected_from_remote(remote: Mapping[str, RemoteFile]) -> dict[str, FileDigest]:
    """Expectations for a checkpoint without a manifest: what the tree listing vouches for."""
    return {p: FileDigest(r.size, r.lfs_sha256, None if r.lfs_sha256 else r.git_oid) for p, r in remote.items()}
