"""A Storage Bucket's reads without ``HfApi``: its info, a tree listing, paths-info.

Importing huggingface_hub's ``HfApi`` module costs a fresh process about 0.09 s, more than
a bucket read takes on a near Hub. These are its three bucket reads, made as its methods
make them (the shared client, the same routes and answer types, huggingface_hub's own
errors), so a bucket command imports ``HfApi`` only to write (a batch, creating a bucket),
and a push imports it while its bytes are on their way
(:meth:`~ckpt_action.stores.bucket.BucketStore._settle_pending`). The listing is read as a
repo's is (:func:`~ckpt_action.stores.hub.listing.read_pages`): pages, bytes and entries
bounded, each page retried on its own, a next page only on the configured endpoint
(huggingface_hub follows ``Link: rel="next"`` wherever it points, with the token).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ckpt_action.errors import IntegrityError, quoted
from ckpt_action.stores.hub.listing import read_pages

if TYPE_CHECKING:
    from ckpt_action.settings import Settings

PATHS_INFO_BATCH = 1000
"""Paths per paths-info request, as huggingface_hub sends them."""


def bucket_info(endpoint: str, headers: dict[str, str], bucket_id: str) -> Any:
    """``HfApi.bucket_info``: the bucket's ``BucketInfo`` (``BucketNotFoundError`` if missing)."""
    from huggingface_hub._buckets import BucketInfo
    from huggingface_hub.utils import get_session, hf_raise_for_status

    response = get_session().get(f"{endpoint}/api/buckets/{bucket_id}", headers=headers)
    hf_raise_for_status(response)
    return BucketInfo(**response.json())


def list_bucket_tree(settings: Settings, headers: dict[str, str], bucket_id: str, prefix: str | None, *,
                     recursive: bool, what: str) -> list[Any]:
    """``HfApi.list_bucket_tree``: each ``BucketFile`` and ``BucketFolder`` under ``prefix``,
    every page within the listing bounds."""
    from huggingface_hub._buckets import BucketFile, BucketFolder

    encoded = "/" + quote(prefix, safe="") if prefix else ""
    url = f"{settings.endpoint}/api/buckets/{bucket_id}/tree{encoded}"
    pages = read_pages(settings, f"hf://buckets/{bucket_id}", url, headers,
                       params={"recursive": str(recursive).lower()}, what=what, noun="bucket")
    out: list[Any] = []
    for item in (item for page in pages or [] for item in page):
        kind = item.get("type") if isinstance(item, dict) else None
        try:
            if not isinstance(item, dict):
                raise TypeError("not an object")
            if kind == "file":
                out.append(BucketFile(**item))
            elif kind == "directory":
                out.append(BucketFolder(**item))
        except (KeyError, TypeError, ValueError) as exc:
            raise IntegrityError(f"{what}: the Hub listed a malformed entry {quoted(str(item), 120)}") from exc
    return out


def get_bucket_paths_info(endpoint: str, headers: dict[str, str], bucket_id: str,
                          paths: Iterable[str]) -> Iterator[Any]:
    """``HfApi.get_bucket_paths_info``: a ``BucketFile`` for each of ``paths`` that exists."""
    from huggingface_hub._buckets import BucketFile
    from huggingface_hub.utils import hf_raise_for_status, http_backoff

    wanted = list(paths)
    for start in range(0, len(wanted), PATHS_INFO_BATCH):
        response = http_backoff("POST", f"{endpoint}/api/buckets/{bucket_id}/paths-info",
                                json={"paths": wanted[start:start + PATHS_INFO_BATCH]}, headers=headers)
        hf_raise_for_status(response)
        for item in response.json():
            yield BucketFile(**item)
