"""A test OIDC issuer: signs id tokens as a CI provider does, for the tests and the demo of
keyless CI authentication (never for anything real: its key lives in this process, and it
hands a token to whoever shows its request token).

It serves, on loopback:

- ``/.well-known/openid-configuration`` and ``/jwks``: discovery and its RSA public key, as
  the local Hub's ``--oidc-issuer`` reads them;
- ``/token?audience=AUD`` with ``Authorization: Bearer REQUEST_TOKEN``: ``{"value": JWT}``, as
  GitHub Actions answers at ``ACTIONS_ID_TOKEN_REQUEST_URL`` for a job with
  ``permissions: id-token: write`` (:attr:`TestIssuer.actions_env` gives the two variables).

:meth:`TestIssuer.mint` makes a token with any claim, algorithm or key changed, for the
attacks a verifier must refuse.

>>> with TestIssuer(repository="acme/train") as issuer:
...     token = issuer.mint("http://127.0.0.1:1")
...     sorted(issuer.actions_env()) == ["ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL"]
True
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ID_TOKEN_TTL_S = 300
"""GitHub's id tokens live minutes; so do these."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def new_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class TestIssuer:
    """An OIDC issuer on ``host`` (a free port), for jobs of ``repository`` (``ORG/REPO``)."""

    __test__ = False  # not a pytest class

    def __init__(self, repository: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.repository = repository
        self.key = new_key()
        self.kid = secrets.token_hex(8)
        self.request_token = secrets.token_urlsafe(24)
        self.minted: list[dict[str, Any]] = []
        """The claims of every token handed out at ``/token``."""
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == "/.well-known/openid-configuration":
                    return self._json({"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks",
                                       "id_token_signing_alg_values_supported": ["RS256"]})
                if parts.path == "/jwks":
                    return self._json(issuer.jwks())
                if parts.path == "/token":
                    given = self.headers.get("Authorization") or ""
                    if not hmac.compare_digest(given.encode(), f"Bearer {issuer.request_token}".encode()):
                        return self._json({"message": "bad request token"}, 401)
                    audience = (parse_qs(parts.query).get("audience") or [""])[0]
                    return self._json({"value": issuer.mint(audience, record=True)})
                return self._json({"message": "not found"}, 404)

            def _json(self, value: Any, status: int = 200) -> None:
                body = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="test-issuer", daemon=True)
        self._thread.start()

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
        e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.kid, "n": _b64(n), "e": _b64(e)}]}

    def claims(self, audience: str, **changes: Any) -> dict[str, Any]:
        """GitHub's claims for a push to main of ``repository``, with ``changes`` applied."""
        now = int(time.time())
        org = self.repository.split("/")[0]
        claims = {"iss": self.url, "aud": audience, "sub": f"repo:{self.repository}:ref:refs/heads/main",
                  "repository": self.repository, "repository_owner": org, "ref": "refs/heads/main",
                  "workflow_ref": f"{self.repository}/.github/workflows/example-keyless.yml@refs/heads/main",
                  "run_id": "1", "iat": now, "nbf": now, "exp": now + ID_TOKEN_TTL_S}
        claims.update(changes)
        return claims

    def mint(self, audience: str, *, alg: str = "RS256", key: Any = None, kid: str | None = None,
             record: bool = False, **changes: Any) -> str:
        """An id token for ``audience``: RS256 with this issuer's key unless ``alg``/``key`` say
        otherwise (``alg="none"``: unsigned), its claims :meth:`claims` with ``changes``."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        claims = self.claims(audience, **changes)
        if record:
            self.minted.append(claims)
        header = {"alg": alg, "typ": "JWT", "kid": kid or self.kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        if alg == "none":
            return f"{signing_input}."
        signature = (key or self.key).sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def actions_env(self) -> dict[str, str]:
        """The two variables GitHub Actions gives a job with ``permissions: id-token: write``."""
        return {"ACTIONS_ID_TOKEN_REQUEST_URL": f"{self.url}/token",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.request_token}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> TestIssuer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
