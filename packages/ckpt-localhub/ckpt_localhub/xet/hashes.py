"""The Xet protocol's hashes: chunk, xorb and file hashes, term verification hashes, and
their string form in URLs.

All are blake3 keyed hashes (the keys are the specification's). A hash is 32 raw bytes
here; its string form reverses each 8-byte group (each is a little-endian u64 printed as
hex), which the specification requires for every hash shown as text, in URL paths too.

Example:

    >>> h = bytes(range(32))
    >>> hash_hex(h)[:16]
    '0706050403020100'
    >>> hash_from_hex(hash_hex(h)) == h
    True
"""

from __future__ import annotations

import re

import blake3

DATA_KEY = bytes([102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28, 157, 228, 33, 16,
                  155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41])
INTERNAL_NODE_KEY = bytes([1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230, 93, 221,
                           83, 111, 55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63])
VERIFICATION_KEY = bytes([127, 24, 87, 214, 206, 86, 237, 102, 18, 127, 249, 19, 231, 165, 195, 243, 164, 205,
                          38, 213, 181, 219, 73, 230, 65, 36, 152, 127, 40, 251, 148, 195])
ZERO_KEY = bytes(32)
HEX_RE = re.compile(r"[0-9a-f]{64}")
GLOBAL_DEDUP_MODULUS = 1024
MEAN_BRANCHING = 4
MAX_GROUP = 2 * MEAN_BRANCHING + 1


def hash_hex(h: bytes) -> str:
    return "".join(h[i:i + 8][::-1].hex() for i in range(0, 32, 8))


def hash_from_hex(text: str) -> bytes:
    """Raw bytes of a hash's string form; ValueError unless it is 64 lowercase hex digits."""
    if not HEX_RE.fullmatch(text):
        raise ValueError(f"not a Xet hash: {text[:80]!r}")
    raw = bytes.fromhex(text)
    return b"".join(raw[i:i + 8][::-1] for i in range(0, 32, 8))


def low_u64(h: bytes) -> int:
    """The value the protocol takes hashes modulo (the last 8 bytes as a little-endian u64)."""
    return int.from_bytes(h[24:32], "little")


def chunk_hash(data: bytes | memoryview) -> bytes:
    return blake3.blake3(data, key=DATA_KEY).digest()


def _merge(entries: list[tuple[bytes, int]]) -> tuple[bytes, int]:
    text = "".join(f"{hash_hex(h)} : {size}\n" for h, size in entries)
    return blake3.blake3(text.encode(), key=INTERNAL_NODE_KEY).digest(), sum(size for _, size in entries)


def _next_cut(entries: list[tuple[bytes, int]], start: int) -> int:
    """Where the group starting at ``start`` ends: after a hash divisible by 4, 2 to 9 entries long."""
    left = len(entries) - start
    if left <= 2:
        return len(entries)
    end = min(MAX_GROUP, left)
    for i in range(2, end):
        if low_u64(entries[start + i][0]) % MEAN_BRANCHING == 0:
            return start + i + 1
    return start + end


def merkle_root(entries: list[tuple[bytes, int]]) -> bytes:
    """The root of the protocol's aggregated hash tree over (chunk hash, chunk length) pairs."""
    if not entries:
        return ZERO_KEY
    level = list(entries)
    while len(level) > 1:
        merged = []
        i = 0
        while i < len(level):
            cut = _next_cut(level, i)
            merged.append(_merge(level[i:cut]))
            i = cut
        level = merged
    return level[0][0]


def xorb_hash(entries: list[tuple[bytes, int]]) -> bytes:
    return merkle_root(entries)


def file_hash(entries: list[tuple[bytes, int]]) -> bytes:
    if not entries:
        return ZERO_KEY
    return blake3.blake3(merkle_root(entries), key=ZERO_KEY).digest()


def verification_hash(chunk_hashes: list[bytes]) -> bytes:
    return blake3.blake3(b"".join(chunk_hashes), key=VERIFICATION_KEY).digest()


def dedup_eligible(h: bytes) -> bool:
    return low_u64(h) % GLOBAL_DEDUP_MODULUS == 0
