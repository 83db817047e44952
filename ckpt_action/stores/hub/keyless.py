"""Keyless CI: a short-lived Hub token per repo, exchanged from the job's OIDC id token.

huggingface_hub 2.4 does the two requests (``huggingface_hub._oidc``): minting the id token
from GitHub Actions (``get_oidc_token``) and the RFC 8693 exchange at ``POST
{endpoint}/oauth/token`` (``exchange_oidc_token``). Its own use of them (``get_token()`` with
``HF_OIDC_RESOURCE``) is one token for the process, for one resource, at the endpoint of its
import-time constants. What this module adds:

- one exchange per repo a command touches (``resource``: the repo, or ``HF_OIDC_RESOURCE``
  when set), kept by the client (``Settings.exchanges``), at the configured endpoint only, the
  audience that endpoint;
- the token read at every request (:class:`ExchangedToken`, the ``HfApi``'s ``token``), and
  exchanged again :data:`REFRESH_MARGIN_S` before it expires (or half its life, if shorter),
  so a watch, a callback or a long push never sends an expired one; a given
  ``HF_OIDC_ID_TOKEN`` cannot be minted again: it is exchanged again while it is valid, and
  the current token used to its end;
- what the exchange may do, checked before a write (:meth:`ExchangedToken.require`): a token
  scoped to another repo, or only to read, is a one-line error naming the missing scope;
- buckets refused plainly (:func:`refuse_bucket`): the exchange's ``resource`` names repos and users;
- every token masked in a GitHub Actions log (``::add-mask::``, before it is used), kept in
  memory only, and scrubbed from every message (:func:`secrets_of`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckpt_action.errors import AuthError, InputError, one_line, param
from ckpt_action.settings import OidcSource, Settings

REFRESH_MARGIN_S = 300.0
"""Exchange again this long before the token expires (huggingface_hub's margin)."""
DEFAULT_LIFE_S = 3600
"""The life assumed when the answer gives none (the Hub's is about an hour)."""

clock: Callable[[], float] = time.monotonic
"""The clock of expiries (a test moves it on, with the local Hub's, instead of sleeping)."""


def refuse_bucket(name: str) -> InputError:
    """The error for a Storage Bucket under ``auth`` oidc: what the exchange can scope and what to do."""
    return InputError(f"{name}: a Storage Bucket cannot be reached keyless: the Hub's token exchange scopes a token"
                      " to a repo or a user (its resource names repos and users), never a bucket; use a token that"
                      f" may write the bucket ({param('auth')} token with HF_TOKEN or {param('token')}), or push to a"
                      " model repo keyless and copy it to the bucket with a token", param="auth")


def _mask(token: str) -> None:
    """Mask ``token`` in a GitHub Actions job's log before anything could print it, as the
    action masks its token input; outside GitHub Actions nothing is printed. On stderr, where
    the runner reads workflow commands too, so that stdout stays the command's own (``--json``
    is one JSON object there)."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        sys.stderr.write(f"::add-mask::{token.replace('%', '%25')}\n")
        sys.stderr.flush()


def _refusal(exc: BaseException) -> str:
    """The exchange's refusal in one line: the Hub's ``error_description`` (RFC 6749), else its status."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    detail = ""
    try:
        body = json.loads(getattr(response, "content", b"")[:4096] or b"{}")
        if isinstance(body, dict):
            detail = str(body.get("error_description") or body.get("error") or body.get("message") or "")
    except ValueError:
        pass
    detail = detail or getattr(exc, "server_message", None) or type(exc).__name__
    return f"{status or 'no answer'}: {one_line(str(detail), 200)}"


@dataclass
class ExchangedToken:
    """The Hub token of one ``resource`` at one endpoint, exchanged when first read and again
    before it expires; :attr:`issued` keeps every token it got, for scrubbing."""

    settings: Settings
    source: OidcSource
    resource: str
    value: str | None = field(default=None, repr=False)
    scope: str | None = None
    expires_at: float = 0.0
    refresh_at: float = 0.0
    exchanges: int = 0
    issued: list[str] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def current(self) -> str:
        """The token to send now, exchanged (again) when none is held or it is near expiry."""
        with self._lock:
            now = clock()
            if self.value is None or now >= self.refresh_at:
                try:
                    self._exchange(now)
                except AuthError:
                    if self.value is None or now >= self.expires_at:
                        raise
                    self.refresh_at = now + min(30.0, (self.expires_at - now) / 2)  # try again soon; still valid
            assert self.value is not None
            return self.value

    def _id_token(self) -> str:
        from huggingface_hub._oidc import Provider, get_oidc_token

        if self.source.id_token is not None:
            return self.source.id_token
        from ckpt_action.stores.hub.deadline import deadline

        env = {"ACTIONS_ID_TOKEN_REQUEST_URL": self.source.request_url,
               "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.source.request_token}
        missing = [k for k, v in env.items() if not v]
        if missing:
            raise AuthError(f"{param('auth')} oidc: {', '.join(missing)} not set: give the job"
                            " `permissions: id-token: write`, or set HF_OIDC_ID_TOKEN")
        # huggingface_hub reads the two variables from the environment; they are the ones read
        # with the settings (the same process, the same values), so nothing is set here.
        with deadline(self.settings.request_deadline):
            return get_oidc_token(provider=Provider.GITHUB, audience=self.settings.endpoint)

    def _exchange(self, now: float) -> None:
        from huggingface_hub._oidc import exchange_oidc_token

        from ckpt_action.stores.hub.deadline import deadline

        what = f"exchanging the job's OIDC id token for a token scoped to {self.resource}"
        try:
            subject = self._id_token()
            _mask(subject)  # the id token is a credential too, for its few minutes
            with deadline(self.settings.request_deadline):
                answer = exchange_oidc_token(subject_token=subject, resource=self.resource,
                                             endpoint=self.settings.endpoint)
        except AuthError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the exchange is the one error below
            from ckpt_action.errors import scrub_chain

            scrub_chain(exc, (*self.settings.secrets, *self.issued))
            raise AuthError(f"{what} at {self.settings.endpoint}: refused ({_refusal(exc)}): check the Hub's trusted"
                            f" publisher for {self.resource} (this GitHub repository, write for a push), or use"
                            f" {param('auth')} token") from None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable() \
                or len(token) > 4096:
            raise AuthError(f"{what}: the Hub answered no usable access_token")
        _mask(token)
        life = answer.get("expires_in", DEFAULT_LIFE_S)
        life = float(life) if isinstance(life, (int, float)) and not isinstance(life, bool) and life > 0 \
            else float(DEFAULT_LIFE_S)
        scope = answer.get("scope")
        self.value, self.scope = token, scope if isinstance(scope, str) else None
        self.issued.append(token)
        self.expires_at = now + life
        # A given id token cannot be minted again: exchange it again only near the end.
        margin = min(REFRESH_MARGIN_S, life / 2)
        self.refresh_at = now + life - margin
        self.exchanges += 1

    def require(self, repo: str, *, write: bool, command: str) -> None:
        """Refuse, before anything is sent, a ``command`` on ``repo`` this token cannot do:
        scoped to another repo, or to read only when it writes. Exchanges now when none is held."""
        if self.resource.lower() != repo.lower():
            raise AuthError(f"{command} {'writes' if write else 'reads'} {repo}, but HF_OIDC_RESOURCE scopes the"
                            f" exchanged token to {self.resource}: missing scope {'write' if write else 'read'} on"
                            f" {repo}; set HF_OIDC_RESOURCE={repo}, or unset it (one exchange per repo)")
        self.current()
        if write and self.scope is not None and self.scope != "write":
            raise AuthError(f"{command} writes {repo}, but the token exchanged for it may only {self.scope}: missing"
                            f" scope write on {repo}; make the Hub's trusted publisher for {repo} write, or use"
                            f" {param('auth')} token")


def token_for(settings: Settings, repo: str) -> ExchangedToken:
    """The exchanged token for ``repo`` (``HF_OIDC_RESOURCE`` when set) at ``settings.endpoint``,
    the same object for every store of the client that asks for the same resource."""
    assert settings.auth == "oidc" and settings.oidc is not None
    resource = settings.oidc.resource or repo
    if settings.oidc.resource is not None:
        _same_endpoint(settings)
    kept: dict[tuple[str, str], ExchangedToken] = settings.exchanges if settings.exchanges is not None else {}
    key = (settings.endpoint, resource.lower())
    found = kept.get(key)
    if found is None:
        found = kept[key] = ExchangedToken(settings, settings.oidc, resource)
    return found


def _same_endpoint(settings: Settings) -> None:
    """With ``HF_OIDC_RESOURCE`` set, huggingface_hub exchanges the id token itself whenever it
    looks for a token (an LFS upload does), at its own endpoint (``HF_ENDPOINT`` as it read
    it): refuse, before any request, to let it send the id token anywhere but the configured
    endpoint."""
    from huggingface_hub import constants

    from ckpt_action.names import origin_parts

    theirs = constants.ENDPOINT.rstrip("/")
    if origin_parts(theirs) != origin_parts(settings.endpoint):
        raise InputError(f"HF_OIDC_RESOURCE is set, so huggingface_hub exchanges the id token at its own endpoint,"
                         f" {theirs}, which is not {param('endpoint')} {settings.endpoint}: set HF_ENDPOINT to"
                         f" {settings.endpoint}, or unset HF_OIDC_RESOURCE (ckpt-action then scopes a token to each"
                         " repo)", param="endpoint")


def secrets_of(settings: Settings) -> tuple[str, ...]:
    """Every token exchanged under ``settings``' client, for scrubbing messages."""
    kept: Any = settings.exchanges
    if not kept:
        return ()
    return tuple(t for token in list(kept.values()) for t in token.issued)
