"""Tree listings of a Hub repo or bucket, read page by page under bounds, every entry checked.

huggingface_hub's ``list_repo_tree`` (and ``list_bucket_tree``) follows ``Link: rel="next"`` wherever it points
(with the token), for as long as the server sends one, keeps every page, and sleeps as
long as a rate-limited answer asks. Here each page is one bounded GET (wall-clock
deadline, bytes) retried on its own; a listing's pages, entries and bytes are capped;
a next page must stay on the configured endpoint; and each entry is checked (40-hex
ids, sizes, a usable path) before anything reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from ckpt_action.errors import IntegrityError, LimitError, quoted
from ckpt_action.handle import SHA256_RE, SHA_RE, is_whole
from ckpt_action.names import file_name_problem, origin_parts, safe_relative
from ckpt_action.settings import Settings
from ckpt_action.stores.hub.transport import call, get_bounded


@dataclass(frozen=True)
class Entry:
    """One file or folder as the Hub listed it, checked."""

    path: str
    folder: bool
    oid: str
    """The git blob id of a file, the git tree id of a folder (40 hex)."""
    size: int = 0
    lfs_sha256: str | None = None


@dataclass
class Listing:
    entries: list[Entry] = field(default_factory=list)
    unusable: list[tuple[Entry, str]] = field(default_factory=list)
    """Entries whose path cannot be used as it is (control characters, ``..``,
    absolute), with why; each caller decides whether that skips them or refuses."""


def path_problem(path: str) -> str | None:
    """Why a listed path cannot be used as a relative path (None when it can)."""
    problem = file_name_problem(path)  # the rule push checks its local dir with
    if problem:
        return f"has {problem}"
    if not safe_relative(path):
        return "escapes the folder (empty, '.' or '..' segment, absolute, or a backslash)"
    return None


def on_endpoint(url: str, endpoint: str) -> bool:
    """The URL is under the configured endpoint: same scheme, host and port, and path."""
    try:
        if origin_parts(url) != origin_parts(endpoint):
            return False
    except ValueError:  # a port that is not a number
        return False
    return (urlsplit(url).path + "/").startswith(urlsplit(endpoint).path.rstrip("/") + "/")


def tree_url(endpoint: str, repo: str, sha: str, path: str | None) -> str:
    """The listing URL, spelled as huggingface_hub spells it (the path as one segment)."""
    folder = "/" + quote(path, safe="") if path else ""
    return f"{endpoint}/api/models/{repo}/tree/{quote(sha, safe='')}{folder}"


def parse_json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise IntegrityError(f"{what}: the Hub answered something that is not JSON") from None


def read_pages(settings: Settings, repo: str, url: str, headers: dict[str, str], *, params: dict[str, str],
               what: str, noun: str = "repo", missing_ok: bool = False) -> list[list[Any]] | None:
    """Every page of one listing (a repo's tree, a bucket's), each a JSON list as the Hub
    sent it, within the listing bounds of ``settings``: pages, bytes and entries; each page
    one bounded GET retried on its own, every next page on the configured endpoint. None
    when the folder does not exist and ``missing_ok``."""
    from huggingface_hub.errors import RemoteEntryNotFoundError

    def too_big() -> LimitError:
        return LimitError(f"{what}: the Hub's listing is larger than {settings.max_listing_bytes} bytes"
                          f" (CKPT_MAX_LISTING_BYTES): raise it if the {noun} is really that big")

    def get(url: str, params: dict[str, str] | None, limit: int, first: bool) -> Any:
        try:
            return get_bounded(settings, url, headers, limit=limit, too_big=too_big, params=params)
        except RemoteEntryNotFoundError:
            if missing_ok and first:  # an absent folder; a later page going missing is an error
                return None
            raise

    out: list[list[Any]] = []
    count = size = 0
    next_url: str | None = url
    query: dict[str, str] | None = params
    while next_url is not None:
        if len(out) >= settings.max_listing_pages:
            raise LimitError(f"{what}: the Hub's listing runs past {settings.max_listing_pages} pages"
                             f" (CKPT_MAX_LISTING_PAGES): raise it if the {noun} is really that big")
        # Each page is retried on its own; the byte cap is what the listing has left.
        response = call(settings, what, get, next_url, query, settings.max_listing_bytes - size, not out,
                        repo=repo)
        if response is None:
            return None
        size += len(response.content)
        page = parse_json(response.content, what)
        if not isinstance(page, list):
            raise IntegrityError(f"{what}: the Hub answered a listing that is not a list")
        count += len(page)
        if count > settings.max_listing_entries:
            raise LimitError(f"{what}: the Hub's listing holds more than {settings.max_listing_entries} entries"
                             f" (CKPT_MAX_LISTING_ENTRIES): raise it if the {noun} is really that big")
        out.append(page)
        link = response.links.get("next", {}).get("url")
        next_url = urljoin(next_url, link) if link else None
        if next_url is not None and not on_endpoint(next_url, settings.endpoint):
            # The request would carry the token: never to a host the user did not name.
            raise IntegrityError(f"{what}: the Hub's next page is at another origin"
                                 f" ({quoted(urlsplit(next_url).netloc, 60)}): refusing to follow it")
        query = None  # the next link carries its own query
    return out


def read_tree(settings: Settings, repo: str, url: str, headers: dict[str, str], *, recursive: bool,
              what: str, missing_ok: bool = False) -> Listing | None:
    """A repo tree's entries, every page (:func:`read_pages`), each entry checked; None when
    the folder does not exist and ``missing_ok``."""
    pages = read_pages(settings, repo, url, headers, params={"recursive": str(recursive).lower(), "expand": "false"},
                       what=what, missing_ok=missing_ok)
    if pages is None:
        return None
    out = Listing()
    for page in pages:
        for item in page:
            entry = _entry(item, what)
            if entry is None:
                continue
            why = path_problem(entry.path)
            if why is None:
                out.entries.append(entry)
            else:
                out.unusable.append((entry, why))
    return out


def _entry(item: object, what: str) -> Entry | None:
    """A checked entry; None for kinds that are neither file nor folder."""
    def bad(why: str) -> IntegrityError:
        return IntegrityError(f"{what}: the Hub answered a malformed tree entry ({why}): refusing the listing")

    if not isinstance(item, dict):
        raise bad("not an object")
    kind = item.get("type")
    if kind not in ("file", "directory"):
        return None
    path, oid = item.get("path"), item.get("oid")
    if not isinstance(path, str) or not path or len(path) > 4096:
        raise bad("no path")
    if not isinstance(oid, str) or not SHA_RE.match(oid):
        raise bad(f"the id of {quoted(path)} is not 40 lowercase hex")
    if kind == "directory":
        return Entry(path, True, oid)
    size, lfs = item.get("size"), item.get("lfs")
    if not is_whole(size):
        raise bad(f"the size of {quoted(path)} is not a whole number >= 0")
    sha256 = None
    if lfs is not None:
        sha256 = lfs.get("oid") if isinstance(lfs, dict) else None
        if not isinstance(sha256, str) or not SHA256_RE.match(sha256):
            raise bad(f"the LFS sha256 of {quoted(path)} is not 64 lowercase hex")
    return Entry(path, False, oid, size, sha256)
