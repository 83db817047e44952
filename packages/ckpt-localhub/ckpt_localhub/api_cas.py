"""The CAS listener's endpoints, as the Xet specification defines them.

Uploads: ``POST /v1/xorbs/default/{hash}`` (the xorb; 400 unless it parses and hashes to
``hash``), ``POST /v1/shards`` (400 unless every xorb and chunk range it names is stored
and every hash checks out). Dedupe: ``GET /v1/chunks/{prefix}/{chunk}`` answers a shard
listing the xorb that holds the chunk, or 404. Downloads: ``GET /v1/reconstructions/{file}``
and ``/v2/...`` (terms and signed xorb URLs; ``Range`` gives part of a file, 416 past its
end), and ``GET /v1/fetch/xorb/{hash}`` serves those URLs' byte ranges without a token.
Also ``HEAD /v1/xorbs/...``, ``HEAD /v1/files/...`` and ``POST /v1/telemetry``. Endpoints
the specification marks optional and the client falls back from on 404 (``/v2/shards``,
xorb grants) answer 404.

A token is scoped to its repo: reconstructions and ``HEAD`` answer only files whose LFS
object the repo's refs reach (and xorbs of such files); any other hash is the 404 of a hash
never stored. Every route also answers under the ``/g<N>`` prefix of a CAS URL handed out
after xorbs were freed (:meth:`.store.XetStore.cas_path`).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from .context import Call
from .httpmessages import FileSlice, HttpError, Response, json_response, parse_range
from .usage import lfs_held
from .xet.hashes import HEX_RE, hash_from_hex, xorb_hash
from .xet.shard import MAX_SHARD_BYTES, ShardError, build_dedupe_shard
from .xet.store import FileRecord, XetStore
from .xet.tokens import Grant, grant_of
from .xet.xorb import MAX_XORB_BYTES, ChunkInfo, XorbError, parse_xorb

FETCH_URL_TTL_S = 3600
MAX_TELEMETRY_BYTES = 1024 * 1024
DEDUPE_PREFIXES = ("default-merkledb", "default")


def _store(call: Call) -> XetStore:
    if call.hub.xet is None:
        raise HttpError(404, "Xet is switched off on this server")
    return call.hub.xet


def _require(call: Call, scope: str) -> Grant:
    header = call.req.headers.get("Authorization") or ""
    token = header[7:].strip() if header.lower().startswith("bearer ") else None
    granted = grant_of(call.hub.signer, token)
    if granted is None:
        raise HttpError(401, "Missing, invalid or expired CAS token: refresh it from the Hub")
    if scope == "write" and granted.scope != "write":
        raise HttpError(403, "This CAS token has read scope; the request needs a write token")
    return granted


def _held_file(call: Call, grant: Grant, name: str) -> FileRecord:
    """The file's record, if the token's repo holds it; 404 otherwise, the same answer as for a
    hash never stored, so a token of one repo cannot even learn what another repo holds."""
    record = _store(call).file_record(name)
    if record is None or record.sha256 not in lfs_held(call.hub.store, grant.repo_type, grant.repo_id):
        raise HttpError(404, "File not found")
    return record


def _held_xorb(call: Call, grant: Grant, name: str) -> bool:
    store = _store(call)
    for sha256 in lfs_held(call.hub.store, grant.repo_type, grant.repo_id):
        file = store.xet_hash_of(sha256)
        record = store.file_record(file) if file is not None and HEX_RE.fullmatch(file) else None
        if record is not None and any(t[0] == name for t in record.terms):
            return True
    return False


def _hash_param(call: Call, name: str) -> str:
    text = call.params[name]
    try:
        hash_from_hex(text)
    except ValueError:
        raise HttpError(400, f"Malformed hash in the path: {text[:80]!r}") from None
    return text


def _body(call: Call, limit: int, what: str) -> bytes:
    declared = call.req.body.declared
    if declared is not None and declared > limit:
        raise HttpError(413, f"{what} is larger than {limit} bytes")
    parts, size = [], 0
    while size <= limit and (more := call.req.body.read(limit + 1 - size)):
        parts.append(more)  # joined once: appending to bytes would copy the body over and over
        size += len(more)
    if size > limit:
        raise HttpError(413, f"{what} is larger than {limit} bytes")
    return b"".join(parts)


def upload_xorb(call: Call) -> Response:
    _require(call, "write")
    store = _store(call)
    name = _hash_param(call, "hash")
    data = _body(call, MAX_XORB_BYTES, "A xorb")
    try:
        chunks = parse_xorb(data)
    except XorbError as exc:
        raise HttpError(400, f"Invalid xorb: {exc}") from None
    if xorb_hash([(c.hash, c.length) for c in chunks]) != hash_from_hex(name):
        raise HttpError(400, f"Xorb hash does not match the body: the chunks do not hash to {name}")
    return json_response({"was_inserted": store.put_xorb(name, data, chunks)})


def head_xorb(call: Call) -> Response:
    grant = _require(call, "read")
    name = _hash_param(call, "hash")
    store = _store(call)
    if not store.has_xorb(name) or not _held_xorb(call, grant, name):
        raise HttpError(404, "Xorb not found")
    path = store.xorb_path(name)
    return Response(200, FileSlice(path, 0, path.stat().st_size), {}, "application/octet-stream")


def upload_shard(call: Call) -> Response:
    grant = _require(call, "write")
    store = _store(call)
    data = _body(call, MAX_SHARD_BYTES, "A shard")
    try:
        result = store.put_shard(data, owner=f"{grant.repo_type}/{grant.repo_id}")
    except ShardError as exc:
        raise HttpError(400, f"Invalid shard: {exc}") from None
    return json_response({"result": result})


def dedupe_query(call: Call) -> Response:
    _require(call, "read")
    if call.params["prefix"] not in DEDUPE_PREFIXES:
        raise HttpError(400, f"Unknown prefix {call.params['prefix'][:40]}")
    store = _store(call)
    infos = [info for x in store.dedupe_xorbs(_hash_param(call, "hash")) if (info := store.xorb_info(x))]
    if not infos:
        raise HttpError(404, "Chunk not tracked by global deduplication")
    shard = build_dedupe_shard(infos, int(time.time()), key=secrets.token_bytes(32))
    return Response(200, shard, {}, "application/octet-stream")


def head_file(call: Call) -> Response:
    grant = _require(call, "read")
    record = _held_file(call, grant, _hash_param(call, "hash"))
    return Response(200, b"", {"X-File-Size": str(record.size)}, "application/octet-stream")


def _fetch_url(call: Call, xorb: str, first: int, last: int) -> str:
    """A URL for bytes ``first``-``last`` of a xorb: the range is signed with it, as the CDN's are,
    so each range has its own URL."""
    expires, sig = call.hub.signer.sign("xorb", xorb, first, last, ttl_s=FETCH_URL_TTL_S)
    return f"{call.req.base_url}/v1/fetch/xorb/{xorb}?range={first}-{last}&expires={expires}&sig={sig}"


Term = tuple[str, int, int, int]
"""(xorb, first chunk, end chunk (exclusive), decoded bytes)."""


def _plan(call: Call, grant: Grant) -> tuple[int, list[Term], dict[str, list[tuple[int, int, int, int]]]]:
    """(offset into the first term, the terms, and per xorb the chunk ranges to fetch with
    their byte ranges: ``(first, end, first byte, last byte)``).

    A file may use the same chunks more than once (repeated content dedupes within it):
    each xorb's fetch ranges are the union of its terms' ranges, disjoint and sorted, so
    every term lies inside exactly one of them.
    """
    store = _store(call)
    record = _held_file(call, grant, _hash_param(call, "hash"))
    first, last = 0, record.size - 1
    range_header = call.req.headers.get("Range")
    if range_header:
        if record.size == 0:
            raise HttpError(416, "Range not satisfiable for an empty file")
        first, last = parse_range(range_header, record.size)
    terms: list[Term] = []
    skip = pos = 0
    chunk_index: dict[str, list[ChunkInfo]] = {}
    for xorb, start, end, _ in record.terms:
        chunks = chunk_index.setdefault(xorb, store.xorb_chunks(xorb) or [])
        for i in range(start, end):
            length = chunks[i].length
            if pos + length > first and pos <= last:
                if not terms:
                    skip = first - pos
                    terms.append((xorb, i, i + 1, length))
                elif terms[-1][0] == xorb and terms[-1][2] == i:
                    x, s, _e, n = terms[-1]
                    terms[-1] = (x, s, i + 1, n + length)
                else:
                    terms.append((xorb, i, i + 1, length))
            pos += length
    fetch: dict[str, list[tuple[int, int, int, int]]] = {}
    for xorb in dict.fromkeys(t[0] for t in terms):
        merged: list[list[int]] = []
        for s, e in sorted({(t[1], t[2]) for t in terms if t[0] == xorb}):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        chunks = chunk_index[xorb]
        fetch[xorb] = [(s, e, chunks[s].offset, chunks[e - 1].offset + chunks[e - 1].packed - 1) for s, e in merged]
    return skip, terms, fetch


def _terms(terms: list[Term]) -> list[dict[str, Any]]:
    return [{"hash": x, "unpacked_length": n, "range": {"start": s, "end": e}} for x, s, e, n in terms]


def reconstruction_v1(call: Call) -> Response:
    skip, terms, fetch = _plan(call, _require(call, "read"))
    info = {x: [{"range": {"start": s, "end": e}, "url": _fetch_url(call, x, b0, b1),
                 "url_range": {"start": b0, "end": b1}} for s, e, b0, b1 in ranges] for x, ranges in fetch.items()}
    return json_response({"offset_into_first_range": skip, "terms": _terms(terms), "fetch_info": info})


def reconstruction_v2(call: Call) -> Response:
    """One URL per byte range: every fetch is a plain single-range GET."""
    skip, terms, fetch = _plan(call, _require(call, "read"))
    xorbs = {x: [{"url": _fetch_url(call, x, b0, b1), "ranges": [{"chunks": {"start": s, "end": e},
                                                                  "bytes": {"start": b0, "end": b1}}]}
                 for s, e, b0, b1 in ranges] for x, ranges in fetch.items()}
    return json_response({"offset_into_first_range": skip, "terms": _terms(terms), "xorbs": xorbs})


def fetch_xorb(call: Call) -> Response:
    """A reconstruction's signed URL: ranges of a stored xorb, no token needed."""
    req = call.req
    name = _hash_param(call, "hash")
    try:
        expires = int(req.param("expires"))
        first, last = (int(n) for n in req.param("range").split("-"))
    except ValueError:
        raise HttpError(403, "Request has expired or is not signed") from None
    if not call.hub.signer.verify(req.param("sig"), expires, "xorb", name, first, last):
        raise HttpError(403, "Request has expired or its signature does not match")
    store = _store(call)
    if not store.has_xorb(name):
        raise HttpError(404, "Xorb not found")
    path = store.xorb_path(name)
    size = path.stat().st_size
    last = min(last, size - 1)
    start, end = first, last
    if req.headers.get("Range"):
        # Within the signed range only (a resumed fetch asks for its tail).
        start, end = parse_range(req.headers.get("Range") or "", size)
        if start < first or end > last:
            raise HttpError(403, f"Range {start}-{end} is outside the signed range {first}-{last}")
    headers = {"Accept-Ranges": "bytes", "Content-Range": f"bytes {start}-{end}/{size}"}
    return Response(206, FileSlice(path, start, end - start + 1), headers, "application/octet-stream")


def telemetry(call: Call) -> Response:
    _require(call, "read")
    _body(call, MAX_TELEMETRY_BYTES, "A telemetry document")
    return json_response({})


def not_offered(call: Call) -> Response:
    """An optional endpoint the client falls back from on 404 (v2 shard upload, xorb grants)."""
    raise HttpError(404, f"Not found: {call.req.method} {call.req.path}")
