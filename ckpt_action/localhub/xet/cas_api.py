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
"""

from __future__ import annotations

import time
from typing import Any

from ..context import Call
from ..httpserver import FileSlice, HttpError, Response, json_response, parse_range
from .hashes import hash_from_hex, xorb_hash
from .shard import MAX_SHARD_BYTES, ShardError, build_dedupe_shard
from .store import XetStore
from .tokens import scope_of
from .xorb import MAX_XORB_BYTES, XorbError, parse_xorb

FETCH_URL_TTL_S = 3600
MAX_TELEMETRY_BYTES = 1024 * 1024
DEDUPE_PREFIXES = ("default-merkledb", "default")


def _store(call: Call) -> XetStore:
    if call.hub.xet is None:
        raise HttpError(404, "Xet is switched off on this server")
    return call.hub.xet


def _require(call: Call, scope: str) -> None:
    header = call.req.headers.get("Authorization") or ""
    token = header[7:].strip() if header.lower().startswith("bearer ") else None
    granted = scope_of(call.hub.signer, token)
    if granted is None:
        raise HttpError(401, "Missing, invalid or expired CAS token: refresh it from the Hub")
    if scope == "write" and granted != "write":
        raise HttpError(403, "This CAS token has read scope; the request needs a write token")


def _hash_param(call: Call, name: str) -> str:
    text = call.params[name]
    try:
        hash_from_hex(text)
    except ValueError:
        raise HttpError(400, f"Malformed hash in the path: {text[:80]}") from None
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
    _require(call, "read")
    name = _hash_param(call, "hash")
    store = _store(call)
    if not store.has_xorb(name):
        raise HttpError(404, "Xorb not found")
    path = store.xorb_path(name)
    return Response(200, FileSlice(path, 0, path.stat().st_size), {}, "application/octet-stream")


def upload_shard(call: Call) -> Response:
    _require(call, "write")
    store = _store(call)
    data = _body(call, MAX_SHARD_BYTES, "A shard")
    try:
        result = store.put_shard(data)
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
    return Response(200, build_dedupe_shard(infos, int(time.time())), {}, "application/octet-stream")


def head_file(call: Call) -> Response:
    _require(call, "read")
    record = _store(call).file_record(_hash_param(call, "hash"))
    if record is None:
        raise HttpError(404, "File not found")
    return Response(200, b"", {"X-File-Size": str(record.size)}, "application/octet-stream")


def _fetch_url(call: Call, xorb: str) -> str:
    expires, sig = call.hub.signer.sign("xorb", xorb, ttl_s=FETCH_URL_TTL_S)
    return f"{call.req.base_url}/v1/fetch/xorb/{xorb}?expires={expires}&sig={sig}"


def _plan(call: Call) -> tuple[int, list[tuple[str, int, int, int, int, int]]]:
    """(offset into the first term, terms as (xorb, first, end, unpacked, byte start, byte end))."""
    store = _store(call)
    name = _hash_param(call, "hash")
    record = store.file_record(name)
    if record is None:
        raise HttpError(404, "File not found")
    first, last = 0, record.size - 1
    range_header = call.req.headers.get("Range")
    if range_header:
        if record.size == 0:
            raise HttpError(416, "Range not satisfiable for an empty file")
        first, last = parse_range(range_header, record.size)
    plan: list[tuple[str, int, int, int, int, int]] = []
    skip = 0
    pos = 0
    for xorb, start, end, _ in record.terms:
        chunks = store.xorb_chunks(xorb) or []
        for i in range(start, end):
            c = chunks[i]
            if pos + c.length > first and pos <= last:
                if not plan or plan[-1][0] != xorb or plan[-1][2] != i:
                    if not plan:
                        skip = first - pos
                    plan.append((xorb, i, i + 1, c.length, c.offset, c.offset + c.packed - 1))
                else:
                    x, s, _e, n, b0, _b1 = plan[-1]
                    plan[-1] = (x, s, i + 1, n + c.length, b0, c.offset + c.packed - 1)
            pos += c.length
    return skip, plan


def reconstruction_v1(call: Call) -> Response:
    _require(call, "read")
    skip, plan = _plan(call)
    fetch: dict[str, list[dict[str, Any]]] = {}
    for xorb, start, end, _, b0, b1 in plan:
        fetch.setdefault(xorb, []).append({"range": {"start": start, "end": end}, "url": _fetch_url(call, xorb),
                                           "url_range": {"start": b0, "end": b1}})
    terms = [{"hash": x, "unpacked_length": n, "range": {"start": s, "end": e}} for x, s, e, n, _, _ in plan]
    return json_response({"offset_into_first_range": skip, "terms": terms, "fetch_info": fetch})


def reconstruction_v2(call: Call) -> Response:
    """One URL per byte range: every fetch is a plain single-range GET."""
    _require(call, "read")
    skip, plan = _plan(call)
    xorbs: dict[str, list[dict[str, Any]]] = {}
    for xorb, start, end, _, b0, b1 in plan:
        xorbs.setdefault(xorb, []).append({"url": _fetch_url(call, xorb), "ranges": [
            {"chunks": {"start": start, "end": end}, "bytes": {"start": b0, "end": b1}}]})
    terms = [{"hash": x, "unpacked_length": n, "range": {"start": s, "end": e}} for x, s, e, n, _, _ in plan]
    return json_response({"offset_into_first_range": skip, "terms": terms, "xorbs": xorbs})


def fetch_xorb(call: Call) -> Response:
    """A reconstruction's signed URL: ranges of a stored xorb, no token needed."""
    req = call.req
    name = _hash_param(call, "hash")
    try:
        expires = int(req.param("expires"))
    except ValueError:
        raise HttpError(403, "Request has expired or is not signed") from None
    if not call.hub.signer.verify(req.param("sig"), expires, "xorb", name):
        raise HttpError(403, "Request has expired or its signature does not match")
    store = _store(call)
    if not store.has_xorb(name):
        raise HttpError(404, "Xorb not found")
    path = store.xorb_path(name)
    size = path.stat().st_size
    start, end, status, headers = 0, size - 1, 200, {"Accept-Ranges": "bytes"}
    if req.headers.get("Range"):
        start, end = parse_range(req.headers.get("Range") or "", size)
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    return Response(status, FileSlice(path, start, end - start + 1), headers, "application/octet-stream")


def telemetry(call: Call) -> Response:
    _require(call, "read")
    _body(call, MAX_TELEMETRY_BYTES, "A telemetry document")
    return json_response({})


def not_offered(call: Call) -> Response:
    """An optional endpoint the client falls back from on 404 (v2 shard upload, xorb grants)."""
    raise HttpError(404, f"Not found: {call.req.method} {call.req.path}")
