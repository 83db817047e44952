"""Trusted publishers: id tokens from one OIDC issuer exchanged for repo-scoped, expiring tokens.

The Hub's keyless CI authentication (RFC 8693 token exchange at ``POST /oauth/token``, as
huggingface_hub's ``_oidc.py`` calls it): a CI job's id token, signed by its issuer, is
checked here and answered with a short-lived token that may touch one repo, to write or only
to read, as the trusted publisher configured for that repo says.

What an id token must be to be taken, each a refusal otherwise:

- signed with RS256 (the header's ``alg`` is pinned: ``none``, HS256 and the rest are refused
  before any key is looked at) by a key of the issuer's JWKS, found by OIDC discovery
  (``{issuer}/.well-known/openid-configuration``, then its ``jwks_uri``);
- ``iss`` the configured issuer, ``aud`` this Hub's own URL (what huggingface_hub requests: its
  endpoint), ``exp`` in the future and ``nbf``/``iat`` not in it (a minute's leeway each way);
- its ``repository`` claim (``GITHUB_ORG/GITHUB_REPO``) the one the trusted publisher names.

The tokens issued live in this process only (a restart forgets them), each until its expiry;
an expired one is refused with 401 like any unknown token, so a replayed one gets nothing.

>>> p = TrustedPublisher.parse("org/run=acme/train:read")
>>> (p.repo_type, p.repo_id, p.github_repository, p.scope)
('model', 'org/run', 'acme/train', 'read')
>>> TrustedPublisher.parse("datasets/org/data=acme/train").repo_type
'dataset'
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LEEWAY_S = 60
"""Clock skew allowed on ``exp``, ``nbf`` and ``iat``."""
MAX_ID_TOKEN_BYTES = 16 * 1024
"""An id token is a couple of KiB; a bigger one is not read."""
MAX_DISCOVERY_BYTES = 256 * 1024
"""What the issuer's discovery document and JWKS may take."""
DISCOVERY_TIMEOUT_S = 10.0
TOKEN_PREFIX = "hf_oidc_"  # noqa: S105 - a prefix, not a secret
"""Exchanged tokens are told from the static one by this prefix (and found in the table)."""
SCOPES = ("read", "write")
_TYPES = {"datasets": "dataset", "spaces": "space", "models": "model"}


class OidcRefused(Exception):
    """An exchange refused: ``status`` and the RFC 6749 ``error`` code go into the answer."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


def _b64url(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


def parse_resource(resource: str) -> tuple[str, str]:
    """(repo type, repo id) of an exchange's ``resource``: ``ns/name`` a model repo,
    ``datasets/ns/name``, ``spaces/ns/name``; a bare user name (huggingface_hub's read-only
    gated-repos token) or anything else is refused."""
    parts = resource.split("/")
    if len(parts) == 3 and parts[0] in _TYPES:
        return _TYPES[parts[0]], f"{parts[1]}/{parts[2]}"
    if len(parts) == 2 and all(parts):
        return "model", resource
    raise OidcRefused(400, "invalid_target", f"resource {resource[:200]!r} is not a repo (namespace/name, "
                      "datasets/namespace/name or spaces/namespace/name); this Hub scopes exchanged tokens to repos")


@dataclass(frozen=True)
class TrustedPublisher:
    """One ``OWNER/NAME=GITHUB_ORG/GITHUB_REPO[:write|read]``: jobs of that GitHub repo may
    get a token for that Hub repo (``datasets/``/``spaces/`` before the repo for the others),
    write by default."""

    repo_type: str
    repo_id: str
    github_repository: str
    scope: str = "write"

    @classmethod
    def parse(cls, spec: str) -> TrustedPublisher:
        target, sep, source = spec.partition("=")
        source, _, scope = source.partition(":")
        scope = scope or "write"
        if not sep or source.count("/") != 1 or not all(source.split("/")) or scope not in SCOPES:
            raise ValueError(f"trusted publisher {spec!r}: expected OWNER/NAME=GITHUB_ORG/GITHUB_REPO[:write|read]")
        try:
            repo_type, repo_id = parse_resource(target)
        except OidcRefused as exc:
            raise ValueError(f"trusted publisher {spec!r}: {exc}") from None
        return cls(repo_type, repo_id, source, scope)


@dataclass(frozen=True)
class Grant:
    """What an exchanged token may do: ``scope`` on one repo, until ``expires_at`` (unix time)."""

    repo_type: str
    repo_id: str
    scope: str
    expires_at: float
    subject: str

    def covers(self, repo_type: str, repo_id: str, write: bool) -> str | None:
        """None when this grant covers the access, else why not (one line, for a 403)."""
        if (repo_type, repo_id.lower()) != (self.repo_type, self.repo_id.lower()):
            return f"this token is scoped to the {self.repo_type} repo {self.repo_id}, not {repo_id}"
        if write and self.scope != "write":
            return f"this token may only read {self.repo_id} (a read-only trusted publisher)"
        return None


class IssuerKeys:
    """The issuer's RSA public keys by ``kid``, from discovery; fetched again (at most once a
    minute) when a token names a key not yet seen, so a rotation is followed."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer.rstrip("/")
        self._lock = threading.Lock()
        self._keys: dict[str, Any] = {}
        self._fetched_at = 0.0

    @staticmethod
    def _get_json(url: str) -> dict[str, Any]:
        if not url.startswith(("https://", "http://")):
            raise OidcRefused(500, "server_error", "the issuer's discovery names a jwks_uri that is not http(s)")
        with urllib.request.urlopen(url, timeout=DISCOVERY_TIMEOUT_S) as response:  # noqa: S310 - scheme checked
            body = response.read(MAX_DISCOVERY_BYTES + 1)
        if len(body) > MAX_DISCOVERY_BYTES:
            raise OidcRefused(500, "server_error", f"the issuer's answer at {url} is too large")
        value = json.loads(body)
        if not isinstance(value, dict):
            raise OidcRefused(500, "server_error", f"the issuer's answer at {url} is not a JSON object")
        return value

    def _fetch(self) -> None:
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicNumbers

        config = self._get_json(f"{self.issuer}/.well-known/openid-configuration")
        jwks = self._get_json(str(config.get("jwks_uri") or ""))
        keys: dict[str, Any] = {}
        for jwk in jwks.get("keys") or []:
            if not isinstance(jwk, dict) or jwk.get("kty") != "RSA" or not isinstance(jwk.get("kid"), str):
                continue
            n = int.from_bytes(_b64url(jwk["n"]), "big")
            e = int.from_bytes(_b64url(jwk["e"]), "big")
            keys[jwk["kid"]] = RSAPublicNumbers(e, n).public_key()
        self._keys = keys
        self._fetched_at = time.monotonic()

    def key(self, kid: str) -> Any:
        with self._lock:
            if (kid not in self._keys and time.monotonic() - self._fetched_at > 60) or not self._fetched_at:
                try:
                    self._fetch()
                except OidcRefused:
                    raise
                except Exception as exc:  # noqa: BLE001 - the issuer unreachable or broken: refuse, say why
                    why = f"cannot read the issuer's keys from {self.issuer}: {type(exc).__name__}"
                    raise OidcRefused(503, "temporarily_unavailable", why) from None
            found = self._keys.get(kid)
        if found is None:
            raise OidcRefused(401, "invalid_grant", "the id token is signed by a key the issuer does not publish")
        return found


def verify_id_token(token: str, keys: IssuerKeys, audience: str, now: float | None = None) -> dict[str, Any]:
    """The claims of ``token`` once every check of the module's list has passed."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def refuse(why: str) -> OidcRefused:
        return OidcRefused(401, "invalid_grant", f"the id token {why}")

    if len(token) > MAX_ID_TOKEN_BYTES or token.count(".") != 2:
        raise refuse("is not a signed JWT")
    head_b64, body_b64, sig_b64 = token.split(".")
    try:
        header = json.loads(_b64url(head_b64))
        claims = json.loads(_b64url(body_b64))
        signature = _b64url(sig_b64)
    except ValueError:
        raise refuse("is not a signed JWT") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise refuse("is not a signed JWT")
    # Pinned before any key is looked at: "none" and HS256 (a public key used as an HMAC secret) never pass.
    if header.get("alg") != "RS256":
        raise refuse(f"is signed with {str(header.get('alg'))[:20]!r}: only RS256 is accepted")
    key = keys.key(str(header.get("kid")))
    try:
        key.verify(signature, f"{head_b64}.{body_b64}".encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, ValueError):
        raise refuse("has a signature that does not verify with the issuer's key") from None
    now = time.time() if now is None else now
    if claims.get("iss") != keys.issuer:
        raise refuse(f"was issued by {str(claims.get('iss'))[:200]!r}, not the trusted issuer")
    aud = claims.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    if audience.rstrip("/") not in [str(a).rstrip("/") for a in audiences]:
        raise refuse(f"is for the audience {str(aud)[:200]!r}, not this Hub ({audience})")
    exp, nbf, iat = claims.get("exp"), claims.get("nbf"), claims.get("iat")
    if not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp + LEEWAY_S < now:
        raise refuse("has expired")
    for name, value in (("nbf", nbf), ("iat", iat)):
        if value is not None and (not isinstance(value, (int, float)) or value - LEEWAY_S > now):
            raise refuse(f"is not valid yet ({name})")
    if not isinstance(claims.get("repository"), str):
        raise refuse("has no repository claim")
    return claims


@dataclass
class TrustedIssuer:
    """The issuer this Hub trusts, the publishers it allows, and the tokens it issued."""

    issuer: str
    publishers: tuple[TrustedPublisher, ...]
    token_ttl: int = 3600
    clock: Callable[[], float] = time.time
    """Unix time now: the one clock of expiries (a test moves it on instead of sleeping)."""
    keys: IssuerKeys = field(init=False)
    _grants: dict[str, Grant] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.issuer = self.issuer.rstrip("/")
        self.keys = IssuerKeys(self.issuer)

    def exchange(self, body: dict[str, Any], audience: str) -> dict[str, Any]:
        """The token-exchange answer for a request ``body`` (RFC 8693), or :class:`OidcRefused`."""
        if body.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            raise OidcRefused(400, "unsupported_grant_type", "grant_type must be token-exchange (RFC 8693)")
        if body.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token":
            raise OidcRefused(400, "invalid_request", "subject_token_type must be an id_token")
        subject, resource = body.get("subject_token"), body.get("resource")
        if not isinstance(subject, str) or not isinstance(resource, str):
            raise OidcRefused(400, "invalid_request", "subject_token and resource are required")
        repo_type, repo_id = parse_resource(resource)
        claims = verify_id_token(subject, self.keys, audience, now=self.clock())
        wanted = (repo_type, repo_id.lower())
        publisher = next((p for p in self.publishers if (p.repo_type, p.repo_id.lower()) == wanted), None)
        if publisher is None:
            raise OidcRefused(403, "invalid_target", f"no trusted publisher is configured for {resource}")
        if claims["repository"].lower() != publisher.github_repository.lower():
            raise OidcRefused(403, "invalid_grant", f"{resource} trusts {publisher.github_repository}, not the id"
                              f" token's repository {claims['repository'][:200]!r}")
        asked = body.get("scope")
        if asked is not None and asked not in SCOPES[:SCOPES.index(publisher.scope) + 1]:
            raise OidcRefused(403, "invalid_scope", f"the trusted publisher of {resource} grants {publisher.scope},"
                              f" not {str(asked)[:20]!r}")
        scope = asked or publisher.scope
        # The Hub's exchanged tokens outlive the id token (about an hour against minutes); so do these.
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        grant = Grant(publisher.repo_type, publisher.repo_id, scope, self.clock() + self.token_ttl,
                      str(claims.get("sub") or claims["repository"]))
        with self._lock:
            now = self.clock()
            for old in [t for t, g in self._grants.items() if g.expires_at < now]:
                del self._grants[old]  # forgotten once expired: a replay is then an unknown token
            self._grants[token] = grant
        return {"access_token": token, "token_type": "bearer", "expires_in": self.token_ttl,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "scope": scope}

    def grant(self, token: str) -> Grant | None:
        """The live grant of an exchanged token; None when unknown or expired."""
        with self._lock:
            found = self._grants.get(token)
        if found is None or found.expires_at < self.clock():
            return None
        return found
