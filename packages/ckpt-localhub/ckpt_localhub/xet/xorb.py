"""Xorbs: parsing and verifying an uploaded xorb, and decoding its chunks.

A xorb is a run of chunks, each an 8-byte header (version 0, compressed length as 3
little-endian bytes, compression scheme, uncompressed length as 3 bytes) and its bytes,
optionally followed by a footer that starts with ``XETBLOB`` (the client's index of the
same chunks). Schemes: 0 none, 1 LZ4 frame, 2 LZ4 frame over the bytes regrouped in four
interleaved streams ("byte grouping 4"). The server checks what the specification makes
its job: every chunk decodes to its stated length, and the xorb hash computed from the
chunks is the hash the upload names.

Example:

    >>> data = encode_chunk(b"hello")
    >>> [c.length for c in parse_xorb(data)]
    [5]
"""

from __future__ import annotations

from dataclasses import dataclass

import lz4.frame

from .hashes import chunk_hash

HEADER_LEN = 8
FOOTER_IDENT = b"XETBLOB"
# The specification's limits (xet-core's xorb constants): a chunk is at most twice the 64 KiB
# target, a xorb holds at most 8192 chunks and 64 MiB of them. Each is checked as the xorb is
# walked, before the next chunk is decoded or indexed, so a xorb of many tiny chunks costs at
# most 8192 index entries however it is built.
MAX_CHUNK = 128 * 1024  # the chunker's upper bound; a longer chunk is not one a client makes
MAX_XORB_CHUNKS = 8 * 1024
MAX_XORB_BYTES = 64 * 1024 * 1024 + 1024 * 1024  # 64 MiB of chunks plus headers and footer
SCHEME_NONE, SCHEME_LZ4, SCHEME_BG4_LZ4 = 0, 1, 2


class XorbError(ValueError):
    """The bytes are not a valid xorb (the message says why, in one line)."""


@dataclass(frozen=True)
class ChunkInfo:
    hash: bytes
    offset: int
    """Where the chunk's header starts in the xorb."""
    packed: int
    """Header plus stored bytes."""
    length: int
    """Bytes once decoded."""


def _regroup(data: bytes) -> bytes:
    """Undo byte grouping: stream g holds bytes g, g+4, g+8, ... of the original."""
    n = len(data)
    split, rem = divmod(n, 4)
    out = bytearray(n)
    pos = 0
    for g in range(4):
        size = split + (1 if rem > g else 0)
        out[g::4] = data[pos:pos + size]
        pos += size
    return bytes(out)


def _lz4(stored: bytes, length: int) -> bytes:
    """At most one byte past ``length`` decoded: a frame that expands further is refused
    without being expanded (a few KB can claim gigabytes)."""
    return lz4.frame.LZ4FrameDecompressor().decompress(stored, max_length=length + 1)


def decode_chunk(scheme: int, stored: bytes, length: int) -> bytes:
    try:
        if scheme == SCHEME_NONE:
            data = stored
        elif scheme == SCHEME_LZ4:
            data = _lz4(stored, length)
        elif scheme == SCHEME_BG4_LZ4:
            data = _regroup(_lz4(stored, length))
        else:
            raise XorbError(f"unknown compression scheme {scheme}")
    except RuntimeError as exc:
        raise XorbError(f"chunk does not decompress: {exc}") from None
    if len(data) != length:
        raise XorbError(f"chunk decodes to {len(data)} bytes, its header says {length}")
    return data


def encode_chunk(data: bytes) -> bytes:
    """One uncompressed chunk with its header (what tests and the reference write)."""
    n = len(data)
    return bytes([0]) + n.to_bytes(3, "little") + bytes([SCHEME_NONE]) + n.to_bytes(3, "little") + data


def read_header(raw: bytes) -> tuple[int, int, int]:
    """(stored length, scheme, decoded length) of a chunk header."""
    if raw[0] != 0:
        raise XorbError(f"chunk header version {raw[0]} is not 0")
    return int.from_bytes(raw[1:4], "little"), raw[4], int.from_bytes(raw[5:8], "little")


def parse_xorb(data: bytes) -> list[ChunkInfo]:
    """The chunks of a xorb, each decoded and hashed; XorbError for anything malformed."""
    chunks: list[ChunkInfo] = []
    pos = 0
    while pos < len(data):
        if data[pos:pos + len(FOOTER_IDENT)] == FOOTER_IDENT:
            break
        if len(data) - pos < HEADER_LEN:
            raise XorbError(f"truncated chunk header at byte {pos}")
        if len(chunks) == MAX_XORB_CHUNKS:
            raise XorbError(f"xorb holds more than {MAX_XORB_CHUNKS} chunks, the specification's limit")
        stored_len, scheme, length = read_header(data[pos:pos + HEADER_LEN])
        if length == 0:
            raise XorbError(f"empty chunk at byte {pos} (the chunker never makes one)")
        if length > MAX_CHUNK or stored_len > 2 * MAX_CHUNK:
            raise XorbError(f"chunk at byte {pos} is larger than {MAX_CHUNK} bytes")
        start = pos + HEADER_LEN
        if start + stored_len > len(data):
            raise XorbError(f"chunk at byte {pos} runs past the end of the xorb")
        decoded = decode_chunk(scheme, data[start:start + stored_len], length)
        chunks.append(ChunkInfo(chunk_hash(decoded), pos, HEADER_LEN + stored_len, length))
        pos = start + stored_len
    if not chunks:
        raise XorbError("xorb holds no chunks")
    return chunks
