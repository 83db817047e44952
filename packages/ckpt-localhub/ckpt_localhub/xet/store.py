"""Xet storage in the local Hub's data dir: xorbs, file reconstructions, the dedupe index.

Layout under ``data_dir/xet`` (hashes in their string form)::

    xorbs/ab/<xorb>          the xorb as uploaded (chunks, then the client's footer)
    xorbs/ab/<xorb>.chunks   its chunk index, JSON: [[chunk hash, offset, packed, length], ...]
    files/ab/<file>          a file's reconstruction, JSON: size, sha256, terms
    dedupe/ab/<chunk>        the xorbs to answer a dedupe query for this chunk with, one a line
    sha256/ab/<sha256>       the Xet file hash of the LFS object with this sha256
    uploads/<owner>/ab/<file>  empty: a shard uploaded with a write token of that repo or
                             bucket (``<type>/<id>``, hex) registered this file
    generation.json          how many times freeing removed xorbs (the CAS URL's prefix)

Everything is written like the rest of the store (a temporary file, fsync, ``os.replace``)
and is immutable once there: the index before its xorb, so a xorb present is whole and
indexed. Only :meth:`XetStore.collect` removes anything: when a freed LFS object goes, its
file record goes, and so does every xorb no remaining file uses (with the dedupe entries
naming it). A file registered by a shard is also rebuilt once into the LFS store under its
sha256 (which is checked there), so commits, promote, listings and the CDN bridge treat it
as any LFS object, and its bytes stay readable with Xet switched off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..objects import ObjectStore
from .hashes import HEX_RE, dedup_eligible, file_hash, hash_from_hex, hash_hex, verification_hash
from .shard import FileInfo, ShardError, XorbChunk, XorbInfo, parse_shard
from .xorb import ChunkInfo, decode_chunk, read_header


def _shard_chunks(chunks: list[ChunkInfo]) -> list[XorbChunk]:
    """A xorb's chunks as a shard lists them: offsets count decoded bytes, not stored ones."""
    out, pos = [], 0
    for c in chunks:
        out.append(XorbChunk(c.hash, pos, c.length))
        pos += c.length
    return out


MAX_DEDUPE_XORBS = 64  # xorbs in one dedupe answer (64 MiB each: a 4 GiB file)


@dataclass(frozen=True)
class FileRecord:
    size: int
    sha256: str
    terms: list[tuple[str, int, int, int]]
    """(xorb hash, first chunk, end chunk (exclusive), unpacked bytes) per term."""


GENERATION = "generation.json"  # how many collections removed xorbs (see XetStore.cas_path)
MAX_MATERIALIZE_BYTES = 100 * 1024**3
"""Bytes of files one shard may make the server rebuild into whole objects (by default; a
``LocalHub`` argument changes it). The data dir's free space bounds it too."""


class _Exclusive:
    """Uploads share it, garbage collection holds it alone: a collection never runs while a
    xorb or shard upload checks what is stored (uploads never wait for each other)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and not self._shared)
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


class XetStore:
    def __init__(self, objects: ObjectStore, max_materialize_bytes: int = MAX_MATERIALIZE_BYTES) -> None:
        self.objects = objects
        self.max_materialize_bytes = max_materialize_bytes
        self.guard = _Exclusive()
        self.root = objects.root / "xet"
        for sub in ("xorbs", "files", "dedupe", "sha256"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        try:
            self.generation = int(json.loads((self.root / GENERATION).read_bytes()))
        except (FileNotFoundError, ValueError, TypeError):
            self.generation = 0

    def cas_path(self) -> str:
        """The path prefix of the CAS URL handed to clients: empty until xorbs were first freed,
        then ``/g<N>``, one more each time. hf_xet keeps a local cache of the xorbs it uploaded
        for three weeks, by CAS URL, and names them again without asking (the Hub keeps its
        xorbs that long); this server deletes them at once, so it moves its address instead and
        clients start a cache that only knows what it holds now."""
        return f"/g{self.generation}" if self.generation else ""

    def _path(self, kind: str, name: str, suffix: str = "") -> Path:
        return self.root / kind / name[:2] / f"{name}{suffix}"

    # ---------------------------------------------------------------- xorbs
    def xorb_path(self, xorb: str) -> Path:
        return self._path("xorbs", xorb)

    def has_xorb(self, xorb: str) -> bool:
        return self.xorb_path(xorb).exists()

    def xorb_chunks(self, xorb: str) -> list[ChunkInfo] | None:
        try:
            raw = json.loads(self._path("xorbs", xorb, ".chunks").read_bytes())
        except FileNotFoundError:
            return None
        return [ChunkInfo(hash_from_hex(h), offset, packed, length) for h, offset, packed, length in raw]

    def put_xorb(self, xorb: str, data: bytes, chunks: list[ChunkInfo]) -> bool:
        """Store a xorb whose ``chunks`` and hash were checked; False when it was already there."""
        with self.guard.shared():
            return self._put_xorb(xorb, data, chunks)

    def _put_xorb(self, xorb: str, data: bytes, chunks: list[ChunkInfo]) -> bool:
        if self.has_xorb(xorb):
            # Touched: uploaded again now, so a collection that would drop it as no file's waits
            # for the shard naming it (see collect).
            with contextlib.suppress(FileNotFoundError):
                os.utime(self.xorb_path(xorb))
            return False
        index = [[hash_hex(c.hash), c.offset, c.packed, c.length] for c in chunks]
        self.objects.write(self._path("xorbs", xorb, ".chunks"), json.dumps(index).encode())
        self.objects.write(self.xorb_path(xorb), data)
        for c in chunks:
            if dedup_eligible(c.hash):
                self.objects.write(self._path("dedupe", hash_hex(c.hash)), xorb.encode())
        return True

    def xorb_info(self, xorb: str) -> XorbInfo | None:
        chunks = self.xorb_chunks(xorb)
        if chunks is None:
            return None
        return XorbInfo(hash_from_hex(xorb), sum(c.length for c in chunks), self.xorb_path(xorb).stat().st_size,
                        _shard_chunks(chunks))

    def dedupe_xorbs(self, chunk: str) -> list[str]:
        """The xorbs a dedupe query for ``chunk`` answers with (none: the chunk is not tracked)."""
        try:
            return self._path("dedupe", chunk).read_text().split()[:MAX_DEDUPE_XORBS]
        except FileNotFoundError:
            return []

    # ---------------------------------------------------------------- files
    def file_record(self, file: str) -> FileRecord | None:
        try:
            raw = json.loads(self._path("files", file).read_bytes())
        except FileNotFoundError:
            return None
        return FileRecord(raw["size"], raw["sha256"], [(str(x), int(s), int(e), int(n)) for x, s, e, n in raw["terms"]])

    def xet_hash_of(self, sha256: str) -> str | None:
        """The Xet file hash of an LFS object, when it was uploaded through Xet."""
        try:
            return self._path("sha256", sha256).read_text()
        except (FileNotFoundError, OSError):
            return None

    def put_shard(self, data: bytes, owner: str | None = None) -> int:
        """Verify and register an upload shard: 1 when it registered something new, else 0.

        ShardError names the first problem: a xorb it names that is not stored, a chunk
        range outside its xorb, a verification hash or file hash that does not match the
        stored chunks, a CAS entry that disagrees with the stored xorb, more bytes of files
        to rebuild than ``max_materialize_bytes`` or the data dir's free space (told before
        a byte is written), or a sha256 that the rebuilt bytes do not have.
        """
        files, xorbs = parse_shard(data)
        with self.guard.shared():
            result = self._put_shard(files, xorbs)
            if owner is not None:
                for f in files:
                    self.objects.write(self._uploads_path(owner, hash_hex(f.hash)), b"")
            return result

    # ---------------------------------------------------------------- who uploaded a file
    def _uploads_path(self, owner: str, file: str) -> Path:
        return self.root / "uploads" / owner.lower().encode().hex() / file[:2] / file

    def uploaded_by(self, owner: str, file: str) -> bool:
        """Whether a shard registering ``file`` came with a write token of ``owner``
        (``<type>/<id>``, e.g. ``bucket/me/ckpts``): a bucket names a file by its Xet hash only
        if its own uploads registered it (or it holds it already), so a hash read elsewhere is
        no key to another repo's bytes."""
        return HEX_RE.fullmatch(file) is not None and self._uploads_path(owner, file).exists()

    def _put_shard(self, files: list[FileInfo], xorbs: list[XorbInfo]) -> int:
        for x in xorbs:
            self._check_xorb_info(x)
        index: dict[str, list[ChunkInfo] | None] = {}
        todo: list[tuple[str, FileRecord, FileInfo]] = []
        for f in files:
            record = self._check_file(f, index)
            name = hash_hex(f.hash)
            known = self.file_record(name)
            # Known but its object freed (pushed again after a prune): rebuilt again.
            if known is None or self.objects.lfs_size(known.sha256) is None:
                todo.append((name, record, f))
        self._check_room(sum(record.size for _, record, _ in todo))
        for name, record, f in todo:
            sha256 = self._materialize(record)
            claimed = hash_hex(f.sha256) if f.sha256 is not None else sha256
            if claimed != sha256:
                raise ShardError(f"file {name}: its bytes have sha256 {sha256}, the shard says {claimed}")
            value: dict[str, Any] = {"size": record.size, "sha256": sha256, "terms": record.terms}
            self.objects.write(self._path("files", name), json.dumps(value).encode())
            self.objects.write(self._path("sha256", sha256), name.encode())
            # A file's first chunk is what a client asks about first (the specification makes
            # it eligible whatever its hash): answer with every xorb of the file, so a file
            # that shares most bytes with this one dedupes against all of it.
            if not record.terms:  # the empty file: nothing to dedupe against
                continue
            first_xorb, first_chunk = record.terms[0][0], record.terms[0][1]
            chunks = self.xorb_chunks(first_xorb) or []
            used = list(dict.fromkeys(t[0] for t in record.terms))[:MAX_DEDUPE_XORBS]
            self.objects.write(self._path("dedupe", hash_hex(chunks[first_chunk].hash)),
                               "\n".join(used).encode())
        return 1 if todo else 0

    # ---------------------------------------------------------------- freeing
    def collect(self, removed: set[str], grace_s: float) -> int:
        """Forget the files whose LFS objects (sha256s in ``removed``) left the store, then remove
        every xorb no remaining file uses: at once if a forgotten file used it (unless it was
        uploaded again since), else once older than ``grace_s`` (an upload whose shard has not
        come yet). Dedupe entries naming a removed xorb go too, so no dedupe answer names bytes
        that are gone. Returns the bytes removed."""
        freed = 0
        with self.guard.alone():
            forced: dict[str, float] = {}
            for sha256 in removed:
                name = self.xet_hash_of(sha256)
                record = self.file_record(name) if name and HEX_RE.fullmatch(name) else None
                if name is None:
                    continue
                if record is not None and record.sha256 == sha256:
                    registered = self._mtime(self._path("files", name))
                    for xorb, *_ in record.terms:
                        forced[xorb] = max(forced.get(xorb, 0.0), registered)
                    self._unlink(self._path("files", name))
                self._unlink(self._path("sha256", sha256))
            used = self._xorbs_in_use()
            now = time.time()
            gone: set[str] = set()
            for path in (self.root / "xorbs").glob("*/*"):
                xorb = path.name
                if not HEX_RE.fullmatch(xorb) or xorb in used:
                    continue
                mtime = self._mtime(path)
                if (xorb in forced and mtime <= forced[xorb]) or now - mtime > grace_s:
                    freed += self._unlink(path)  # the xorb first: a xorb present is whole and indexed
                    freed += self._unlink(self._path("xorbs", xorb, ".chunks"))
                    gone.add(xorb)
            if gone:
                self._drop_dedupe(gone)
                self.generation += 1
                self.objects.write_json_atomic(self.root / GENERATION, self.generation)
        return freed

    def _xorbs_in_use(self) -> set[str]:
        used: set[str] = set()
        for path in (self.root / "files").glob("*/*"):
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                used.update(str(t[0]) for t in json.loads(path.read_bytes())["terms"])
        return used

    def _drop_dedupe(self, gone: set[str]) -> None:
        for path in (self.root / "dedupe").glob("*/*"):
            try:
                listed = path.read_text().split()
            except FileNotFoundError:
                continue
            kept = [x for x in listed if x not in gone]
            if kept == listed:
                continue
            self._unlink(path)
            if kept:
                self.objects.write(path, "\n".join(kept).encode())

    @staticmethod
    def _mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            return 0.0

    @staticmethod
    def _unlink(path: Path) -> int:
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def _check_room(self, total: int) -> None:
        """A shard of a few KB can name terabytes of repeated chunks: refuse to rebuild more than
        the bound, or than the data dir has room for, before anything is written."""
        if total > self.max_materialize_bytes:
            raise ShardError(f"its files add up to {total} bytes, more than the {self.max_materialize_bytes} "
                             "bytes one shard may make this server rebuild")
        free = shutil.disk_usage(self.root).free
        if total > free:
            raise ShardError(f"its files add up to {total} bytes and the server's data dir has {free} bytes free")

    def _check_xorb_info(self, x: XorbInfo) -> None:
        name = hash_hex(x.hash)
        stored = self.xorb_chunks(name)
        if stored is None:
            raise ShardError(f"the shard lists xorb {name}, which was never uploaded")
        if x.chunks != _shard_chunks(stored):
            raise ShardError(f"the shard's chunk list for xorb {name} does not match the xorb")

    def _check_file(self, f: FileInfo, index: dict[str, list[ChunkInfo] | None]) -> FileRecord:
        """``index``: xorb chunk lists already read for this shard (its terms often share xorbs)."""
        name = hash_hex(f.hash)
        entries: list[tuple[bytes, int]] = []
        terms = []
        for t in f.terms:
            xorb = hash_hex(t.xorb)
            if xorb not in index:
                index[xorb] = self.xorb_chunks(xorb)
            chunks = index[xorb]
            if chunks is None:
                raise ShardError(f"file {name} uses xorb {xorb}, which was never uploaded")
            if t.end > len(chunks):
                raise ShardError(f"file {name} uses chunks [{t.start}, {t.end}) of xorb {xorb}, "
                                 f"which has {len(chunks)}")
            used = chunks[t.start:t.end]
            if sum(c.length for c in used) != t.unpacked:
                raise ShardError(f"file {name}: a term's unpacked size does not match its chunks")
            if t.verification != verification_hash([c.hash for c in used]):
                raise ShardError(f"file {name}: a term's verification hash does not match xorb {xorb}")
            entries += [(c.hash, c.length) for c in used]
            terms.append((xorb, t.start, t.end, t.unpacked))
        if file_hash(entries) != f.hash:
            raise ShardError(f"file {name}: its chunks hash to {hash_hex(file_hash(entries))}")
        return FileRecord(sum(n for _, n in entries), "", terms)

    def read_range(self, xorb: str, chunks: list[ChunkInfo], fh: Any) -> bytes:
        """The decoded bytes of ``chunks`` (consecutive, of ``xorb``) read from ``fh``."""
        first, last = chunks[0], chunks[-1]
        fh.seek(first.offset)
        raw = fh.read(last.offset + last.packed - first.offset)
        out = []
        for c in chunks:
            at = c.offset - first.offset
            stored_len, scheme, length = read_header(raw[at:at + 8])
            out.append(decode_chunk(scheme, raw[at + 8:at + 8 + stored_len], length))
        return b"".join(out)

    def _materialize(self, record: FileRecord) -> str:
        """Rebuild the file into the LFS store; its sha256."""
        digest = hashlib.sha256()
        tmp_path, out = self.objects.tmp_file()
        try:
            for xorb, start, end, _ in record.terms:
                chunks = self.xorb_chunks(xorb) or []
                with open(self.xorb_path(xorb), "rb") as fh:
                    for i in range(start, end, 64):
                        data = self.read_range(xorb, chunks[i:min(end, i + 64)], fh)
                        digest.update(data)
                        out.write(data)
            sha256 = digest.hexdigest()
            dest = self.objects.lfs_path(sha256)
            if dest.exists():
                out.close()
            else:
                self.objects.install(tmp_path, out, dest)
            return sha256
        finally:
            out.close()
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()
