"""A Storage Bucket's batch (files added by Xet hash, server-side copies, deletes) without ``HfApi``.

huggingface_hub's ``batch_bucket_files`` uploads the files that have no Xet hash yet, then
posts the batch. A bucket store uploads every file first itself (:mod:`.cas`: one session,
the manifest joined to it), so what is left is the post, made here as huggingface_hub makes
it: NDJSON of ``addFile``, ``copyFile`` and ``deleteFile`` operations, at most 1,000 a
request (a bigger batch: the copies first, then the adds, then the deletes, every chunk sent
and the refusals raised together), the operations the Hub refused raised as its
``BucketBatchError`` with their ``failures``. Without it a push would import ``HfApi``'s
module and its answer types, about 0.15 s of a fresh process, for this one request.
"""

from __future__ import annotations

import json
import mimetypes
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

BATCH_CHUNK = 1000
"""Operations per batch request, as huggingface_hub sends them."""
LISTED_FAILURES = 10
"""Refused operations named in the message (all of them are on the error's ``failures``)."""


@dataclass
class Add:
    """A file bound for the bucket: its bytes (a path to read, or the bytes), its path in
    the bucket, when it was modified (as huggingface_hub records it: the file's mtime, or
    now for bytes), and once its upload has stored the bytes, their Xet hash and size."""

    source: str | bytes
    destination: str
    xet_hash: str | None = None
    size: int | None = None
    mtime: int = field(default=0)

    def __post_init__(self) -> None:
        if not self.mtime:
            self.mtime = int(time.time() * 1000 if isinstance(self.source, bytes)
                             else os.path.getmtime(self.source) * 1000)

    def operation(self) -> dict[str, Any]:
        if self.xet_hash is None:
            raise AssertionError(f"{self.destination}: an add is posted once its bytes are stored")
        payload: dict[str, Any] = {"type": "addFile", "path": self.destination, "xetHash": self.xet_hash,
                                   "mtime": self.mtime}
        content_type = (None if isinstance(self.source, bytes) else mimetypes.guess_type(self.source)[0]) \
            or mimetypes.guess_type(self.destination)[0]
        if content_type is not None:
            payload["contentType"] = content_type
        return payload


def _copy(source_type: str, source_id: str, xet_hash: str, destination: str) -> dict[str, Any]:
    return {"type": "copyFile", "path": destination, "xetHash": xet_hash, "mtime": int(time.time() * 1000),
            "sourceRepoType": source_type, "sourceRepoId": source_id}


def post_batch(endpoint: str, headers: dict[str, str], bucket_id: str, *, adds: Sequence[Add] = (),
               copies: Sequence[tuple[str, str, str, str]] = (), deletes: Sequence[str] = ()) -> None:
    """``HfApi.batch_bucket_files`` for files whose bytes are stored (each add has its Xet
    hash); ``copies``: ``(source repo type, source repo id, Xet hash, destination)``."""
    from huggingface_hub.errors import BucketBatchError

    operations = [*(a.operation() for a in adds), *(_copy(*c) for c in copies),
                  *({"type": "deleteFile", "path": path} for path in deletes)]
    if len(operations) <= BATCH_CHUNK:
        if operations:
            _post(endpoint, headers, bucket_id, operations)
        return
    errors: list[BucketBatchError] = []
    # As huggingface_hub chunks a big batch: the copies (nothing to upload) first, then adds, then deletes.
    kinds = ("copyFile", "addFile", "deleteFile")
    for kind in kinds:
        ops = [op for op in operations if op["type"] == kind]
        for start in range(0, len(ops), BATCH_CHUNK):
            try:
                _post(endpoint, headers, bucket_id, ops[start:start + BATCH_CHUNK])
            except BucketBatchError as error:
                errors.append(error)
    if errors:
        raise _refused(bucket_id, [f for e in errors for f in e.failures], len(operations), errors[-1].response)


def _post(endpoint: str, headers: dict[str, str], bucket_id: str, operations: list[dict[str, Any]]) -> None:
    from huggingface_hub.utils import hf_raise_for_status, http_backoff

    data = b"".join(json.dumps(op).encode() + b"\n" for op in operations)
    response = http_backoff("POST", f"{endpoint}/api/buckets/{bucket_id}/batch",
                            headers={"Content-Type": "application/x-ndjson", **headers}, content=data)
    # The refused operations are listed in a 200 (some refused) or a 422 (all refused).
    if response.status_code in (200, 422):
        try:
            answer = response.json()
        except ValueError:
            answer = None
        failures = answer.get("failed", []) if isinstance(answer, dict) else []
        if failures:
            raise _refused(bucket_id, failures if isinstance(failures, list) else [failures], len(operations),
                           response)
    hf_raise_for_status(response)


def _refused(bucket_id: str, failures: list[Any], sent: int, response: Any) -> Exception:
    """huggingface_hub's error for refused operations, worded as it words it."""
    from huggingface_hub.errors import BucketBatchError

    def line(f: Any) -> str:
        return f"  - {f.get('path')}: {f.get('error')}" if isinstance(f, dict) else f"  - {f!r}"

    lines = [line(f) for f in failures[:LISTED_FAILURES]]
    if len(failures) > LISTED_FAILURES:
        lines.append(f"  - ... and {len(failures) - LISTED_FAILURES} more")
    error = BucketBatchError(f"Failed to apply {len(failures)} out of {sent} operation(s) on bucket '{bucket_id}':\n"
                             + "\n".join(lines), response=response)
    error.failures = failures
    return error
