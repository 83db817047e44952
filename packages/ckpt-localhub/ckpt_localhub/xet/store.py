"""Xet storage in the local Hub's data dir: xorbs, file reconstructions, the dedupe index.

Layout under ``data_dir/xet`` (hashes in their string form)::

    xorbs/ab/<xorb>          the xorb as uploaded (chunks, then the client's footer)
    xorbs/ab/<xorb>.chunks   its chunk index, JSON: [[chunk hash, offset, packed, length], ...]
    files/ab/<file>          a file's reconstruction, JSON: size, sha256, terms
    dedupe/ab/<chunk>        the xorbs to answer a dedupe query for this chunk with, one a line
    sha256/ab/<sha256>       the Xet file hash of the LFS object with this sha256

Everything is written like the rest of the store (a temporary file, fsync, ``os.replace``)
and is immutable once there: the index before its xorb, so a xorb present is whole and
indexed. A file registered by a shard is also rebuilt once into the LFS store under its
sha256 (which is checked there), so commits, promote, listings and the CDN bridge treat it
as any LFS object, and its bytes stay readable with Xet switched off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..objects import ObjectStore
from .hashes import dedup_eligible, file_hash, hash_from_hex, hash_hex, verification_hash
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


class XetStore:
    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects
        self.root = objects.root / "xet"
        for sub in ("xorbs", "files", "dedupe", "sha256"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

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
        if self.has_xorb(xorb):
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

    def put_shard(self, data: bytes) -> int:
        """Verify and register an upload shard: 1 when it registered something new, else 0.

        ShardError names the first problem: a xorb it names that is not stored, a chunk
        range outside its xorb, a verification hash or file hash that does not match the
        stored chunks, a CAS entry that disagrees with the stored xorb, or a sha256 that
        the rebuilt bytes do not have.
        """
        files, xorbs = parse_shard(data)
        for x in xorbs:
            self._check_xorb_info(x)
        new = 0
        for f in files:
            record = self._check_file(f)
            name = hash_hex(f.hash)
            if self.file_record(name) is None:
                new = 1
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
                first_xorb, first_chunk = record.terms[0][0], record.terms[0][1]
                chunks = self.xorb_chunks(first_xorb) or []
                used = list(dict.fromkeys(t[0] for t in record.terms))[:MAX_DEDUPE_XORBS]
                self.objects.write(self._path("dedupe", hash_hex(chunks[first_chunk].hash)),
                                   "\n".join(used).encode())
        return new

    def _check_xorb_info(self, x: XorbInfo) -> None:
        name = hash_hex(x.hash)
        stored = self.xorb_chunks(name)
        if stored is None:
            raise ShardError(f"the shard lists xorb {name}, which was never uploaded")
        if x.chunks != _shard_chunks(stored):
            raise ShardError(f"the shard's chunk list for xorb {name} does not match the xorb")

    def _check_file(self, f: FileInfo) -> FileRecord:
        name = hash_hex(f.hash)
        entries: list[tuple[bytes, int]] = []
        terms = []
        for t in f.terms:
            xorb = hash_hex(t.xorb)
            chunks = self.xorb_chunks(xorb)
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
