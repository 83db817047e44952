"""What a failed Hub call was: the status the Hub answered, the wait it announced, a refusal
by the Xet storage, whether it is worth a retry and whether the client retried it already.

Read from the exception and what it was raised from, never from the process: the retry loop
in :mod:`.transport` and the commit loop in :mod:`.commits` both ask here, so the two agree
on what "transient" means.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
MAX_CHAIN = 20  # exceptions followed down a chain (cause, else context): a loop or a runaway chain ends


def direct_status(exc: BaseException) -> int | None:
    """The status of the answer ``exc`` itself carries (None: none), not looking down its chain."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it was raised from (its cause, else its context), and so on: each
    exception once, at most ``MAX_CHAIN`` of them."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < MAX_CHAIN:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def status_of(exc: BaseException) -> int | None:
    """The HTTP status the Hub answered with, found in ``exc`` or its chain; None when no
    answer came (a timeout, a dropped connection): then a write may still be carried out."""
    return next((int(status) for link in _chain(exc) if (status := direct_status(link)) is not None), None)


def announced_wait(exc: BaseException) -> float | None:
    """Seconds the Hub asked us to wait before retrying: the reset of an exhausted rate
    limit (IETF ``RateLimit: "api";r=0;t=55``, which the Hub sends on 429 without any
    ``Retry-After``), else ``Retry-After`` in seconds. None when it said neither."""
    from huggingface_hub.utils import parse_ratelimit_headers

    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    limit = parse_ratelimit_headers(headers)
    if limit is not None and limit.remaining == 0:
        return float(limit.reset_in_seconds)
    value = headers.get("Retry-After")
    try:
        wait = float(value) if value is not None else None
    except ValueError:  # an HTTP date: not worth a parser, backoff will do
        return None
    return wait if wait is not None and math.isfinite(wait) and wait >= 0 else None


# How hf_xet reports a CAS answer that was not a success: reqwest's status error, the status
# and reason in parentheses, then the URL ("domain: ..."). Its exception (a ConnectionError,
# whatever the status) carries nothing of the answer's body.
_XET_STATUS_RE = re.compile(r"HTTP status (?:client|server) error \(([0-9]{3})([^)]{0,80})\)(?:, domain: (\S+))?")


def cas_refusal(exc: BaseException) -> tuple[int, str, str | None] | None:
    """(status, reason, URL) of a CAS answer hf_xet reports as refused (4xx but for 408 and
    429, which are worth a retry), found in ``exc`` or its chain; None for anything else."""
    for link in _chain(exc):
        m = _XET_STATUS_RE.search(str(link))
        if m:
            status = int(m.group(1))
            if 400 <= status < 500 and status not in TRANSIENT_STATUS:
                return status, m.group(2).strip(), m.group(3)
            return None
    return None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, dropped connections; not a
    refusal from the Xet storage, which hf_xet raises as a ConnectionError."""
    import httpx2
    from huggingface_hub.errors import LocalEntryNotFoundError

    if cas_refusal(exc) is not None:
        return False
    if isinstance(exc, (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return True
    if isinstance(exc, LocalEntryNotFoundError):
        # hf_hub_download wraps connection failures in this when nothing is cached.
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    status = direct_status(exc)
    return status in TRANSIENT_STATUS


# Requests huggingface_hub already sends through its own http_backoff (6 attempts, 23 s of
# sleeps): preupload, the LFS batch and verify calls, and the PUTs of LFS uploads.
_CLIENT_RETRIED = re.compile(r"/preupload/|/info/lfs/")


def retried_by_client(exc: BaseException) -> bool:
    """Whether the request that failed was one huggingface_hub retried itself already; such
    a failure gets one more round after a pause, not ``retries`` more, so retries do not
    multiply (the README's promise)."""
    for link in _chain(exc):
        request = None
        response = getattr(link, "response", None)
        for holder in (response, link):
            try:
                request = getattr(holder, "request", None) if holder is not None else None
            except RuntimeError:  # httpx: no request attached
                request = None
            if request is not None:
                break
        if request is not None:
            path = urlsplit(str(getattr(request, "url", ""))).path
            return bool(_CLIENT_RETRIED.search(path)) or getattr(request, "method", "") == "PUT"
    return False
