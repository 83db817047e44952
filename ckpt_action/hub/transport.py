"""Configure huggingface_hub for one endpoint, retry its calls, and turn its errors into ours.

huggingface_hub reads some switches at import time and has no timeout on plain API
calls; this module is the one place that sets them, before the first request. It also
holds the one bounded GET the reads of refs, listings and manifests go through: a
wall-clock deadline and a byte cap on what the Hub may send back.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ckpt_action.errors import AuthError, CkptError, NotFoundError, RemoteError
from ckpt_action.hub.deadline import RequestDeadline, deadline, install
from ckpt_action.names import is_public_hub
from ckpt_action.settings import Settings

if TYPE_CHECKING:
    import httpx2
    from huggingface_hub import HfApi

T = TypeVar("T")
TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
_client_timeout: float | None = None


def prepare(settings: Settings) -> None:
    """Set the client's switches for this endpoint. Safe to call before or after import.

    Only the public Hub speaks Xet; elsewhere (the local Hub, mirrors) uploads go through
    plain LFS, which huggingface_hub only does with Xet disabled.
    """
    local = not is_public_hub(settings.endpoint)
    if local:
        os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", str(int(max(1, settings.timeout))))
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", str(int(max(1, settings.timeout))))
    import huggingface_hub
    from huggingface_hub import constants

    if local and os.environ.get("HF_HUB_DISABLE_XET") == "1":
        constants.HF_HUB_DISABLE_XET = True
    constants.HF_HUB_ETAG_TIMEOUT = int(max(1, settings.timeout))
    constants.HF_HUB_DOWNLOAD_TIMEOUT = int(max(1, settings.timeout))

    global _client_timeout
    if _client_timeout == settings.timeout:
        return  # the shared client (and its TLS context and connections) already fits

    def client_factory():  # type: ignore[no-untyped-def,unused-ignore]
        client = huggingface_hub.utils._http.default_client_factory()
        client.timeout = settings.timeout  # type: ignore[assignment,unused-ignore]
        install(client)
        return client

    huggingface_hub.set_client_factory(client_factory)
    _client_timeout = settings.timeout


def make_api(settings: Settings) -> HfApi:
    prepare(settings)
    from huggingface_hub import HfApi

    return HfApi(endpoint=settings.endpoint, token=settings.token or None, library_name="ckpt-action")


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


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


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts, dropped connections."""
    import httpx2
    from huggingface_hub.errors import LocalEntryNotFoundError

    if isinstance(exc, (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return True
    if isinstance(exc, LocalEntryNotFoundError):
        # hf_hub_download wraps connection failures in this when nothing is cached.
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    status = _status(exc)
    return status in TRANSIENT_STATUS


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def translate(exc: BaseException, what: str, settings: Settings, repo: str | None = None) -> CkptError:
    """Our error for a client exception, with a one-line message that says what to do."""
    from huggingface_hub.errors import (
        HfHubHTTPError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, CkptError):
        return exc
    if isinstance(exc, RequestDeadline):
        bound = exc.bound or f"within {settings.request_deadline:g} s (CKPT_REQUEST_DEADLINE)"
        return RemoteError(f"{what}: the Hub did not finish answering {bound}: try again later, or raise it if"
                           " the Hub is only slow")
    where = f" in {repo}" if repo else ""
    status = _status(exc)
    if isinstance(exc, RevisionNotFoundError):
        return NotFoundError(f"{what}: revision not found{where}: check --revision (a SHA, branch or tag)")
    if isinstance(exc, RepositoryNotFoundError) and status not in (401,):
        return NotFoundError(
            f"{what}: repo {repo or ''} not found at {settings.endpoint}, or not visible to this token:"
            " check --repo and HF_TOKEN"
        )
    if isinstance(exc, RemoteEntryNotFoundError):
        return NotFoundError(f"{what}: path not found{where}: check --subfolder")
    if status == 401:
        return AuthError(f"{what}: the Hub refused the credentials (401): check HF_TOKEN / --token")
    if status == 403:
        return AuthError(f"{what}: the token may not do this (403){where}: use a token with write access")
    if isinstance(exc, HfHubHTTPError) and status is not None:
        detail = _one_line(getattr(exc, "server_message", None) or (str(exc).splitlines() or [""])[0], 200)
        hint = "try again later" if status in TRANSIENT_STATUS else "see the message"
        return RemoteError(f"{what}: the Hub answered {status} ({detail}): {hint}")
    if is_transient(exc):
        return RemoteError(
            f"{what}: cannot reach {settings.endpoint} ({type(exc).__name__}: {_one_line(str(exc), 160)}):"
            " check --endpoint and the network"
        )
    return RemoteError(f"{what}: {type(exc).__name__}: {_one_line(str(exc))}")


def backoff(settings: Settings, attempt: int) -> float:
    """The sleep before retry number ``attempt`` (0-based): exponential from retry_delay,
    capped at retry_max_delay, jittered so concurrent jobs spread out."""
    base = min(settings.retry_max_delay, settings.retry_delay * 2 ** min(attempt, 32))
    return base * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not a secret


def retry_wait(settings: Settings, exc: BaseException, attempt: int, what: str) -> float:
    """The sleep before retry number ``attempt`` (0-based) after ``exc``.

    A rate-limited answer is waited out for as long as it announces (its reset, or
    ``Retry-After``), a little past it, up to ``max_rate_limit_wait``; asking for longer
    raises at once, since sleeping past the job's patience helps nobody. Otherwise the
    exponential backoff.
    """
    wait = announced_wait(exc)
    if wait is None:
        return backoff(settings, attempt)
    if wait > settings.max_rate_limit_wait:
        raise RemoteError(
            f"{what}: the Hub answered {_status(exc)} and asks to wait {wait:.0f} s, more than"
            f" {settings.max_rate_limit_wait:g} s (CKPT_MAX_RATE_LIMIT_WAIT): try again later, or raise it"
        ) from exc
    return wait + random.uniform(0.1, 0.5)  # noqa: S311 - past the reset (whole seconds, rounded), never before


def call(settings: Settings, what: str, fn: Callable[..., T], *args: object, repo: str | None = None,
         client_retries: bool = False, **kwargs: object) -> T:
    """Run one client call with bounded retries on transient failures (see :func:`retry_wait`).

    Only for idempotent calls (reads, and writes that are safe to repeat); commits go
    through the commit primitive, which first looks at what landed. ``client_retries``
    marks calls huggingface_hub already retries itself (6 attempts, 23 s of sleeps): one
    more round of those after a pause is enough, more would multiply the wait.
    """
    retries = min(1, settings.retries) if client_retries else settings.retries
    for attempt in range(retries + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if attempt == retries or not is_transient(exc):
                raise translate(exc, what, settings, repo) from exc
            time.sleep(retry_wait(settings, exc, attempt, what))
    raise AssertionError("unreachable")


def get_bounded(settings: Settings, url: str, headers: dict[str, str], *, limit: int,
                too_big: Callable[[], CkptError], params: dict[str, str] | None = None) -> httpx2.Response:
    """One GET of a small answer (refs, a listing page, a manifest), read whole.

    Bounded in wall clock by ``request_deadline`` (headers and body) and in size by
    ``limit`` bytes; past it, ``too_big()`` is raised (a message naming the bound and the
    setting that raises it). Errors are raised as huggingface_hub's (so ``translate``
    knows them), from a body read under the same bounds.
    """
    import httpx2
    from huggingface_hub.utils import get_session, hf_raise_for_status

    with deadline(settings.request_deadline), \
            get_session().stream("GET", url, headers=headers, params=params) as response:
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise too_big()
    kept = {k: v for k, v in response.headers.items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")}
    done = httpx2.Response(response.status_code, headers=kept, content=bytes(body), request=response.request)
    hf_raise_for_status(done)
    return done
