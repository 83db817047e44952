"""A Storage Bucket's reads without ``HfApi``: its info, a tree listing, paths-info.

Importing huggingface_hub's ``HfApi`` module costs a fresh process about 0.09 s, more than
a bucket read takes on a near Hub. These are its three bucket reads, made as its methods
make them (the shared client, the same routes and answer types, huggingface_hub's own
errors), so a bucket command imports ``HfApi`` only to create a bucket (its batch is
:mod:`.bucketbatch`). The listing is read as a
repo's is (:func:`~ckpt_action.stores.hub.listing.read_pages`): pages, bytes and entries
bounded, each page retried on its own, a next page only on the configured endpoint
(huggingface_hub follows ``Link: rel="next"`` wherever it points, with the token).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ckpt_action.errors import IntegrityError, quoted
from ckpt_action.stores.hub.listing import read_pages

if TYPE_CHECKING:
    from ckpt_action.settings import Settings

PATHS_INFO_BATCH = 1000
"""Paths per paths-info request, as huggingface_hub sends them."""


@dataclass(frozen=True)
class Listed:
    """A file or folder of a bucket as the Hub listed it (huggingface_hub's ``BucketFile``
    and ``BucketFolder``, without importing their module: its import costs more than the
    read). The path is a string; the size and Xet hash are as sent, for the store to check."""

    path: str
    folder: bool
    size: object = None
    xet_hash: object = None


def _listed(item: object, what: str) -> Listed | None:
    """One answer entry; None for a kind this store does not read (as huggingface_hub skips it)."""
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        raise IntegrityError(f"{what}: the Hub listed a malformed entry {quoted(str(item), 120)}")
    if item.get("type") == "directory":
        return Listed(item["path"], True)
    if item.get("type") != "file":
        return None
    if "size" not in item or "xetHash" not in item:
        raise IntegrityError(f"{what}: the Hub listed a malformed entry {quoted(str(item), 120)}")
    return Listed(item["path"], False, item["size"], item["xetHash"])


def bucket_info(endpoint: str, headers: dict[str, str], bucket_id: str) -> dict[str, Any]:
    """``HfApi.bucket_info``: the bucket's info as the Hub sent it (``BucketNotFoundError`` if missing)."""
    from huggingface_hub.utils import get_session, hf_raise_for_status

    response = get_session().get(f"{endpoint}/api/buckets/{bucket_id}", headers=headers)
    hf_raise_for_status(response)
    info = response.json()
    if not isinstance(info, dict):
        raise IntegrityError(f"reading bucket {bucket_id}: the Hub answered something other than an object")
    return info


def list_bucket_tree(settings: Settings, headers: dict[str, str], bucket_id: str, prefix: str | None, *,
                     recursive: bool, what: str) -> list[Listed]:
    """``HfApi.list_bucket_tree``: each file and folder under ``prefix``, every page within
    the listing bounds."""
    encoded = "/" + quote(prefix, safe="") if prefix else ""
    url = f"{settings.endpoint}/api/buckets/{bucket_id}/tree{encoded}"
    pages = read_pages(settings, f"hf://buckets/{bucket_id}", url, headers,
                       params={"recursive": str(recursive).lower()}, what=what, noun="bucket")
    return [entry for page in pages or [] for item in page if (entry := _listed(item, what)) is not None]


def get_bucket_paths_info(endpoint: str, headers: dict[str, str], bucket_id: str,
                          paths: Iterable[str]) -> Iterator[Listed]:
    """``HfApi.get_bucket_paths_info``: each of ``paths`` that exists."""
    from huggingface_hub.utils import hf_raise_for_status, http_backoff

    wanted = list(paths)
    for start in range(0, len(wanted), PATHS_INFO_BATCH):
        response = http_backoff("POST", f"{endpoint}/api/buckets/{bucket_id}/paths-info",
                                json={"paths": wanted[start:start + PATHS_INFO_BATCH]}, headers=headers)
        hf_raise_for_status(response)
        answer = response.json()
        for item in answer if isinstance(answer, list) else [answer]:
            entry = _listed(item, f"reading {len(wanted)} path(s) of {bucket_id}")
            if entry is not None and not entry.folder:
                yield entry
