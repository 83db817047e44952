"""Shards: parsing an uploaded shard and writing the ones the dedupe query answers with.

Layout (all integers little-endian, every entry 48 bytes): a 48-byte header (magic tag,
version 2, footer size), the file info section (per file: a header naming the file hash,
flags and term count; its terms (xorb hash, flags, unpacked bytes, chunk range); with
flag 1<<31 one verification entry per term; with flag 1<<30 a metadata extension holding
the file's sha256), a bookend, the CAS info section (per xorb: hash, flags, chunk count,
bytes, bytes on disk; then one entry per chunk: hash, byte offset, length), a bookend,
and a 200-byte footer, which an upload omits.

Example (a dedupe answer parses as a shard with no files):

    >>> parse_shard(build_dedupe_shard([], now=0))
    ([], [])
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import blake3

from .xorb import MAX_XORB_CHUNKS

HEADER_TAG = bytes([72, 70, 82, 101, 112, 111, 77, 101, 116, 97, 68, 97, 116, 97, 0, 85, 105, 103, 69, 106, 123,
                    129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169])
HEADER_VERSION = 2
FOOTER_VERSION = 1
ENTRY = 48
HEADER_LEN = 48
FOOTER_LEN = 200
BOOKEND = b"\xff" * 32 + bytes(16)
FLAG_VERIFICATION = 1 << 31
FLAG_METADATA_EXT = 1 << 30
MAX_SHARD_BYTES = 64 * 1024 * 1024
MAX_SHARD_TERMS = 1 << 18
"""Terms one upload shard may name over all its files (each is an object here, and each a file
range the server rebuilds): far more than a push of checkpoints makes in one session."""
DEDUPE_EXPIRY_S = 7 * 24 * 3600


class ShardError(ValueError):
    """The bytes are not a valid upload shard (one line saying why)."""


@dataclass(frozen=True)
class Term:
    xorb: bytes
    unpacked: int
    start: int
    end: int
    verification: bytes | None


@dataclass(frozen=True)
class FileInfo:
    hash: bytes
    terms: list[Term]
    sha256: bytes | None


@dataclass(frozen=True)
class XorbChunk:
    hash: bytes
    offset: int
    """Decoded bytes before this chunk in its xorb."""
    length: int


@dataclass(frozen=True)
class XorbInfo:
    hash: bytes
    num_bytes: int
    on_disk: int
    chunks: list[XorbChunk]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def entry(self, what: str) -> bytes:
        if self.pos + ENTRY > len(self.data):
            raise ShardError(f"shard ends inside {what} at byte {self.pos}")
        raw = self.data[self.pos:self.pos + ENTRY]
        self.pos += ENTRY
        return raw


def parse_shard(data: bytes) -> tuple[list[FileInfo], list[XorbInfo]]:
    """The files and xorbs an upload shard describes; ShardError for a malformed one."""
    if len(data) < HEADER_LEN or data[:32] != HEADER_TAG:
        raise ShardError("not a shard (wrong magic number)")
    version, footer_size = struct.unpack_from("<QQ", data, 32)
    if version != HEADER_VERSION:
        raise ShardError(f"shard header version {version}, only {HEADER_VERSION} is known")
    if footer_size not in (0, FOOTER_LEN):
        raise ShardError(f"shard footer size {footer_size} is neither 0 nor {FOOTER_LEN}")
    body_end = len(data) - footer_size
    r = _Reader(data[:body_end])
    r.pos = HEADER_LEN
    files: list[FileInfo] = []
    total_terms = 0
    while (raw := r.entry("the file info section")) != BOOKEND:
        if raw[:32] == BOOKEND[:32]:
            raise ShardError("malformed file info bookend")
        flags, count = struct.unpack_from("<II", raw, 32)
        # A file without terms is the empty file (its hash the zero key): hf_xet uploads one so.
        total_terms += count
        if total_terms > MAX_SHARD_TERMS:  # before reading them: the count is the shard's word
            raise ShardError(f"the shard names more than {MAX_SHARD_TERMS} terms")
        terms_raw = [r.entry("a file's terms") for _ in range(count)]
        checks = [r.entry("a file's verification entries")[:32] if flags & FLAG_VERIFICATION else None
                  for _ in range(count)]
        sha256 = r.entry("a file's metadata extension")[:32] if flags & FLAG_METADATA_EXT else None
        terms = []
        for t, check in zip(terms_raw, checks, strict=True):
            _flags, unpacked, start, end = struct.unpack_from("<IIII", t, 32)
            if end <= start:
                raise ShardError(f"a term's chunk range [{start}, {end}) is empty")
            terms.append(Term(t[:32], unpacked, start, end, check))
        files.append(FileInfo(raw[:32], terms, sha256))
    if files and any(t.verification is None for f in files for t in f.terms):
        raise ShardError("an upload shard must carry a verification entry for every term")
    xorbs: list[XorbInfo] = []
    while (raw := r.entry("the CAS info section")) != BOOKEND:
        _flags, count, num_bytes, on_disk = struct.unpack_from("<IIII", raw, 32)
        if count > MAX_XORB_CHUNKS:
            raise ShardError(f"the shard lists a xorb of {count} chunks, more than {MAX_XORB_CHUNKS}")
        chunks = []
        for _ in range(count):
            c = r.entry("a xorb's chunk entries")
            offset, length = struct.unpack_from("<II", c, 32)
            chunks.append(XorbChunk(c[:32], offset, length))
        xorbs.append(XorbInfo(raw[:32], num_bytes, on_disk, chunks))
    if r.pos != body_end:
        raise ShardError(f"{body_end - r.pos} bytes follow the CAS info section")
    return files, xorbs


def keyed(chunk: bytes, key: bytes) -> bytes:
    """A chunk hash as a dedupe answer lists it: blake3 keyed with the answer's HMAC key, which
    a client applies to the hashes of chunks it holds to find them."""
    return blake3.blake3(chunk, key=key).digest()


def _xorb_block(x: XorbInfo, key: bytes | None) -> bytes:
    out = [x.hash + struct.pack("<IIII", 0, len(x.chunks), x.num_bytes, x.on_disk)]
    out += [(keyed(c.hash, key) if key else c.hash) + struct.pack("<II", c.offset, c.length) + bytes(8)
            for c in x.chunks]
    return b"".join(out)


def build_dedupe_shard(xorbs: list[XorbInfo], now: int, key: bytes | None = None) -> bytes:
    """A shard as the dedupe query answers: no files, these xorbs, and a footer. With ``key``
    (32 bytes, as the Hub does), chunk hashes are listed keyed: the answer lets a client match
    chunks it holds, not learn the other chunks of a xorb (which would let it name them in a
    shard of its own)."""
    head = HEADER_TAG + struct.pack("<QQ", HEADER_VERSION, FOOTER_LEN)
    cas = b"".join(_xorb_block(x, key) for x in xorbs) + BOOKEND
    file_info_offset = HEADER_LEN
    cas_offset = file_info_offset + ENTRY
    footer_offset = cas_offset + len(cas)
    stored = sum(x.num_bytes for x in xorbs)
    on_disk = sum(x.on_disk for x in xorbs)
    footer = struct.pack("<9Q", FOOTER_VERSION, file_info_offset, cas_offset,
                         footer_offset, 0, footer_offset, 0, footer_offset, 0)
    footer += key or bytes(32)  # all zero: chunk hashes in clear
    footer += struct.pack("<QQ", now, now + DEDUPE_EXPIRY_S) + bytes(48)
    footer += struct.pack("<QQQQ", on_disk, 0, stored, footer_offset)
    assert len(footer) == FOOTER_LEN
    return head + BOOKEND + cas + footer
