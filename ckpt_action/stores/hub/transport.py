"""A huggingface_hub client for one endpoint, its calls retried, its errors turned into ours.

Everything a call needs is set per client or per call, never for the process: the
endpoint and token on the ``HfApi`` (:func:`make_api`), our user agent without the
client's telemetry off the public Hub (that telemetry asks ``constants.ENDPOINT`` for a
list), and the per-read timeout and wall-clock deadline around each call
(:mod:`.deadline`), under the shared client whatever factory made it. The one exception
is the Xet switch for a non-public endpoint (:func:`prepare`), until the local Hub speaks
Xet. It also holds the one bounded GET the reads of refs, listings and manifests go
through: a wall-clock deadline and a byte cap on what the Hub may send back.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from ckpt_action.errors import (
    AuthError,
    CkptError,
    NotFoundError,
    RemoteError,
    one_line,
    param,
    quoted,
    scrub_chain,
)
from ckpt_action.names import is_public_hub
from ckpt_action.settings import Settings
from ckpt_action.stores.hub.deadline import RequestDeadline, deadline, install, stall
from ckpt_action.stores.hub.failures import (
    TRANSIENT_STATUS,
    announced_wait,
    cas_refusal,
    direct_status,
    is_transient,
    retried_by_client,
)

if TYPE_CHECKING:
    import httpx2
    from huggingface_hub import HfApi

    from ckpt_action.stores.hub.keyless import ExchangedToken

T = TypeVar("T")
LIBRARY_NAME = "ckpt-action"


def bind_shared_client() -> None:
    """Put the per-thread deadline and stall timeout under huggingface_hub's shared client.

    The client is whatever the factory in place made (``huggingface_hub.set_client_factory``:
    the user's proxy or certificates, say), and stays it: the factory is never replaced, and
    the wrapper under its connections does nothing outside our calls (:mod:`.deadline`).
    Done per call, since a factory set since then makes a new client.
    """
    from huggingface_hub.utils import get_session

    install(get_session())


def client_headers(endpoint: str, token: bool | str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The headers our client sends to ``endpoint``: the client library's own on the public
    Hub; elsewhere our user agent without the client's telemetry (that telemetry asks
    ``constants.ENDPOINT``, the public Hub unless HF_ENDPOINT says otherwise, for a list of
    agent harnesses: a request to a host nobody named). Per client, so the process's own
    setting (HF_HUB_DISABLE_TELEMETRY) stays the user's. Without ``HfApi``: a read needs no
    more than these, and importing the API costs a fresh process a tenth of a second."""
    if is_public_hub(endpoint):
        from huggingface_hub.utils import build_hf_headers

        return build_hf_headers(token=token, library_name=LIBRARY_NAME, headers=extra)
    import platform

    import huggingface_hub

    from ckpt_action.version import __version__

    headers = {"user-agent": f"ckpt-action/{__version__}; hf_hub/{huggingface_hub.__version__};"
                             f" python/{platform.python_version()}"}
    if isinstance(token, str):  # given: sent as is (the client's rule), without importing its token store
        sent: str | None = token
    else:
        from huggingface_hub.utils._headers import get_token_to_send

        sent = get_token_to_send(token)
    if sent is not None:
        headers["authorization"] = f"Bearer {sent}"
    headers.update(extra or {})
    return headers


@functools.cache
def _api_class() -> type[HfApi]:
    from huggingface_hub import HfApi

    class Api(HfApi):
        """HfApi whose headers are :func:`client_headers`, and whose token, keyless, is read at
        every request (:class:`~ckpt_action.stores.hub.keyless.ExchangedToken`: exchanged again
        before it expires)."""

        keyless: ExchangedToken | None = None

        @property
        def token(self) -> str | bool | None:
            return self.keyless.current() if self.keyless is not None else self._given_token

        @token.setter
        def token(self, value: str | bool | None) -> None:
            self._given_token = value

        def _build_hf_headers(self, token: bool | str | None = None, library_name: str | None = None,
                              library_version: str | None = None,
                              user_agent: dict[str, str] | str | None = None) -> dict[str, str]:
            if is_public_hub(self.endpoint):
                return super()._build_hf_headers(token, library_name, library_version, user_agent)
            return client_headers(self.endpoint, self.token if token is None else token, self.headers)

    return Api


def make_api(settings: Settings, repo: str | None = None) -> HfApi:
    """A client for ``settings.endpoint`` and its token, configured per client: nothing of
    the process (environment, huggingface_hub's constants, its client factory) changes.
    Keyless (``settings.auth == "oidc"``), its token is the one exchanged for ``repo``.

    Xet is left as the client decides it: on whenever ``hf_xet`` is installed, the Hub's
    default path and the local Hub's too; ``HF_HUB_DISABLE_XET=1`` (read by huggingface_hub
    itself) selects plain LFS, for an endpoint that does not speak Xet."""
    bind_shared_client()
    api = _api_class()(endpoint=settings.endpoint, token=settings.token or None, library_name=LIBRARY_NAME)
    if settings.auth == "oidc":
        if repo is None:
            raise AssertionError("a keyless client is made for one repo")
        from ckpt_action.stores.hub.keyless import token_for

        api.keyless = token_for(settings, repo)  # type: ignore[attr-defined]
    return api


def secrets(settings: Settings) -> tuple[str, ...]:
    """What a message must never show: the token as given, and every token exchanged keyless."""
    if settings.auth != "oidc":
        return settings.secrets
    from ckpt_action.stores.hub.keyless import secrets_of

    return (*settings.secrets, *secrets_of(settings))


def retry_budget(settings: Settings, exc: BaseException) -> int:
    """Retries a call gets after ``exc``: ``retries``, or one for what the client retried."""
    return min(1, settings.retries) if retried_by_client(exc) else settings.retries


def translate(exc: BaseException, what: str, settings: Settings, repo: str | None = None) -> CkptError:
    """Our error for a client exception, with a one-line message that says what to do.

    The server's text, or the client's (an illegal header value), may echo the token:
    the error, and the exceptions it is raised from, are scrubbed of it in every form.
    """
    hidden = secrets(settings)
    scrub_chain(exc, hidden)
    error = _translate(exc, what, settings, repo)
    scrub_chain(error, hidden)
    return error


def _translate(exc: BaseException, what: str, settings: Settings, repo: str | None) -> CkptError:
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
    status = direct_status(exc)
    if isinstance(exc, RevisionNotFoundError):
        return NotFoundError(f"{what}: revision not found{where}: check {param('revision')} (a SHA, branch or tag)")
    if isinstance(exc, RepositoryNotFoundError) and status not in (401,):
        return NotFoundError(
            f"{what}: repo {repo or ''} not found at {settings.endpoint}, or not visible to this token:"
            f" check {param('repo')} and HF_TOKEN"
        )
    if isinstance(exc, RemoteEntryNotFoundError):
        return NotFoundError(f"{what}: path not found{where}: check {param('subfolder')}")
    if status == 410:
        # The commit still names the file; its stored bytes were permanently deleted (the local
        # Hub's answer for permanently_delete_lfs_files without rewriting history).
        return NotFoundError(f"{what}: the Hub answered 410 Gone{where}: this checkpoint's files were deleted to"
                             f" free storage (by prune with {param('free_storage')}): pull a checkpoint that was"
                             " kept, or a tag")
    if status == 401:
        return AuthError(f"{what}: the Hub refused the credentials (401): check HF_TOKEN / {param('token')}")
    if status == 403:
        return AuthError(f"{what}: the token may not do this (403){where}: use a token with write access")
    if isinstance(exc, HfHubHTTPError) and status is not None:
        detail = hub_reason(exc)
        hint = "try again later" if status in TRANSIENT_STATUS else "see the message"
        return RemoteError(f"{what}: the Hub answered {status} ({detail}): {hint}")
    refused = cas_refusal(exc)
    if refused is not None:
        return _cas_error(what, *refused)
    if is_transient(exc):
        return RemoteError(
            f"{what}: cannot reach {settings.endpoint} ({type(exc).__name__}: {one_line(str(exc), 160)}):"
            f" check {param('endpoint')} and the network"
        )
    return RemoteError(f"{what}: {type(exc).__name__}: {one_line(str(exc))}")


MAX_REASON = 2000
"""Characters of the Hub's reason an error shows (whole below it: a bucket batch's reason
lists every failed path with why, as its client does, ten of them)."""


def hub_reason(exc: BaseException) -> str:
    """The Hub's reason for refusing, whole up to :data:`MAX_REASON`: its message (else the
    client's text for the answer, every line of it), on one line, any other non-printing
    character escaped.

    >>> shown = hub_reason(ValueError("Failed on 'me/b':" + chr(10) + "  - a: not" + chr(27) + "found"))
    >>> shown == "Failed on 'me/b': - a: not" + chr(92) + "x1bfound"
    True
    """
    text = " ".join(str(getattr(exc, "server_message", None) or exc).split())
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return shown if len(shown) <= MAX_REASON else shown[: MAX_REASON - 1] + "…"


def _cas_error(what: str, status: int, reason: str, url: str | None) -> CkptError:
    """What the Hub's Xet storage refused, in its client's words: the route and the status.
    The URL is the CAS's (any host the Hub's token answer named), shown quoted and bounded;
    the token is scrubbed by :func:`translate` like everything else."""
    parts = urlsplit(url or "")
    where = f" at {quoted(f'{parts.scheme}://{parts.netloc}', 100)[1:-1]}" if parts.scheme and parts.netloc else ""
    route = quoted(parts.path + (f"?{parts.query}" if parts.query else ""), 160) if parts.path else "a request"
    refusal = f"{status} {quoted(reason, 60)[1:-1]}".strip()
    if status in (401, 403):
        return AuthError(f"{what}: the Hub's Xet storage (CAS){where} refused the token on {route} ({refusal}):"
                         f" check HF_TOKEN / {param('token')} (write access to the repo)")
    return RemoteError(f"{what}: the Hub's Xet storage (CAS){where} refused {route} with {refusal} (a refusal, not"
                       " the network: not retried); if pushing again is refused the same way, report it with this"
                       " line")


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
            f"{what}: the Hub answered {direct_status(exc)} and asks to wait {wait:.0f} s, more than"
            f" {settings.max_rate_limit_wait:g} s (CKPT_MAX_RATE_LIMIT_WAIT): try again later, or raise it"
        ) from exc
    return wait + random.uniform(0.1, 0.5)  # noqa: S311 - past the reset (whole seconds, rounded), never before


def call(settings: Settings, what: str, fn: Callable[..., T], *args: object, repo: str | None = None,
         **kwargs: object) -> T:
    """Run one client call with bounded retries on transient failures (see :func:`retry_wait`).

    Only for idempotent calls (reads, and writes that are safe to repeat); commits go
    through the commit primitive, which first looks at what landed. A failure of a request
    huggingface_hub already retries itself gets one more round only (:func:`retry_budget`).
    """
    attempt = 0
    while True:
        try:
            with stall(settings.timeout):
                return fn(*args, **kwargs)
        except Exception as exc:
            if attempt >= retry_budget(settings, exc) or not is_transient(exc):
                error = translate(exc, what, settings, repo)
                if error is exc:  # ours already (a nested call's): its cause stays the client's error
                    raise
                raise error from exc
            time.sleep(retry_wait(settings, exc, attempt, what))
            attempt += 1


def get_bounded(settings: Settings, url: str, headers: dict[str, str], *, limit: int,
                too_big: Callable[[], CkptError], params: dict[str, str] | None = None,
                method: str = "GET", json: object = None) -> httpx2.Response:
    """One request for a small answer (refs, a listing page, a manifest, a bucket's info or
    paths-info: a POST of ``json``), read whole.

    Bounded in wall clock by ``request_deadline`` (headers and body) and in size by
    ``limit`` bytes; past it, ``too_big()`` is raised (a message naming the bound and the
    setting that raises it). Errors are raised as huggingface_hub's (so ``translate``
    knows them), from a body read under the same bounds.
    """
    import httpx2
    from huggingface_hub.utils import get_session, hf_raise_for_status

    with deadline(settings.request_deadline), stall(settings.timeout), \
            get_session().stream(method, url, headers=headers, params=params, json=json) as response:
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
