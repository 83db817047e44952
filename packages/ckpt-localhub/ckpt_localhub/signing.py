"""Signed, expiring URLs: LFS upload hrefs and the CDN's download URLs carry no token.

The real protocol sends LFS PUTs and CDN GETs without ``Authorization`` (the client
strips it when a redirect leaves the Hub's origin), so these URLs prove themselves: an
HMAC over what they grant and until when, with a key that lives only in this process.

Example:

    >>> signer = Signer()
    >>> expires, sig = signer.sign("cdn", "abc", 3)
    >>> signer.verify(sig, expires, "cdn", "abc", 3)
    True
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time


class Signer:
    def __init__(self, ttl_s: int = 3600) -> None:
        self._key = secrets.token_bytes(32)
        self.ttl_s = ttl_s

    def _mac(self, expires: int, fields: tuple[object, ...]) -> str:
        message = "\n".join(str(f) for f in (*fields, expires)).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, *fields: object, ttl_s: int | None = None) -> tuple[int, str]:
        """(expiry as a unix time, signature) for a URL granting ``fields``."""
        expires = int(time.time()) + (self.ttl_s if ttl_s is None else ttl_s)
        return expires, self._mac(expires, fields)

    def verify(self, signature: str, expires: int, *fields: object) -> bool:
        """True when the signature is ours for these fields and has not expired."""
        return hmac.compare_digest(signature, self._mac(expires, fields)) and expires >= time.time()
