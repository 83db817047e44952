"""A Storage Bucket's reads without ``HfApi``: its info, a tree listing, paths-info.

Importing huggingface_hub's ``HfApi`` module costs a fresh process about 0.09 s, more than
a bucket read takes on a near Hub. These are its three bucket reads, made as its methods
make them (the shared client, the same routes, huggingface_hub's own errors), so a bucket
command imports ``HfApi`` only to create a bucket (its batch is :mod:`.bucketbatch`). Each
is bounded as a repo's reads are: the info and each paths-info request are one bounded
request (:func:`~ckpt_action.stores.hub.transport.get_bounded`: bytes, wall clock), and the
listing is read as a repo's (:func:`~ckpt_action.stores.hub.listing.read_pages`): pages,
bytes and entries bounded, each page retried on its own, a next page only on the configured
endpoint (huggingface_hub follows ``Link: rel="next"`` wherever it points, with the token).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ckpt_action.errors import IntegrityError, LimitError, quoted
from ckpt_action.handle import SHA256_RE
from ckpt_action.stores.hub.listing import parse_json, read_pages
from ckpt_action.stores.hub.transport import get_bounded

if TYPE_CHECKING:
    from ckpt_action.settings import Settings

PATHS_INFO_BATCH = 1000
"""Paths per paths-info request, as huggingface_hub sends them."""


@dataclass(frozen=True)
class Listed:
    """A file or folder of a bucket as the Hub listed it (huggingface_hub's ``BucketFile``
    and ``BucketFolder``, without importing their module: its import costs more than the
    read), checked (:func:`_listed`): a file's size is an int, a folder has none."""

    path: str
    folder: bool
    size: int | None = None
    xet_hash: str | None = None


def _listed(item: object, what: str) -> Listed | None:
    """One answer entry, checked: data from outside, and its path and Xet hash may end up in
    a message. None for a kind this store does not read (as huggingface_hub skips it)."""
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        raise IntegrityError(f"{what}: the Hub listed a malformed entry {quoted(str(item), 120)}")
    path = item["path"]
    if item.get("type") == "directory":
        return Listed(path, True)
    if item.get("type") != "file":
        return None
    if "size" not in item or "xetHash" not in item:
        raise IntegrityError(f"{what}: the Hub listed a malformed entry {quoted(str(item), 120)}")
    size, xet = item["size"], item["xetHash"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise IntegrityError(f"the Hub listed {quoted(path)} with a malformed size")
    if xet is not None and not (isinstance(xet, str) and SHA256_RE.match(xet)):
        raise IntegrityError(f"the Hub listed {quoted(path)} with a malformed Xet hash")
    return Listed(path, False, size, xet)


def _too_big(settings: Settings, what: str) -> Callable[[], LimitError]:
    return lambda: LimitError(f"{what}: the Hub's answer is larger than {settings.max_listing_bytes} bytes"
                              " (CKPT_MAX_LISTING_BYTES): raise it if the bucket is really that big")


def bucket_info(settings: Settings, headers: dict[str, str], bucket_id: str) -> dict[str, Any]:
    """``HfApi.bucket_info``: the bucket's info as the Hub sent it (``BucketNotFoundError`` if
    missing), one bounded GET (:func:`~ckpt_action.stores.hub.transport.get_bounded`)."""
    what = f"reading bucket {bucket_id}"
    response = get_bounded(settings, f"{settings.endpoint}/api/buckets/{bucket_id}", headers,
                           limit=settings.max_listing_bytes, too_big=_too_big(settings, what))
    info = parse_json(response.content, what)
    if not isinstance(info, dict):
        raise IntegrityError(f"{what}: the Hub answered something other than an object")
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


def get_bucket_paths_info(settings: Settings, headers: dict[str, str], bucket_id: str,
                          paths: Iterable[str]) -> Iterator[Listed]:
    """``HfApi.get_bucket_paths_info``: each of ``paths`` that exists; each request bounded
    as a listing page is."""
    wanted = list(paths)
    what = f"reading {len(wanted)} path(s) of {bucket_id}"
    for start in range(0, len(wanted), PATHS_INFO_BATCH):
        response = get_bounded(settings, f"{settings.endpoint}/api/buckets/{bucket_id}/paths-info", headers,
                               limit=settings.max_listing_bytes, too_big=_too_big(settings, what), method="POST",
                               json={"paths": wanted[start:start + PATHS_INFO_BATCH]})
        answer = parse_json(response.content, what)
        if not isinstance(answer, list):  # as a listing page that is not a list (listing.read_pages)
            raise IntegrityError(f"{what}: the Hub answered a listing that is not a list")
        for item in answer:
            entry = _listed(item, what)
            if entry is not None and not entry.folder:
                yield entry
