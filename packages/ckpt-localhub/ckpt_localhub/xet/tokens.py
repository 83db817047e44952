"""CAS access tokens: what the Hub's ``xet-read-token`` / ``xet-write-token`` routes hand out.

A token is ``xet_<scope>_<expiry>_<signature>``: the signer's HMAC over the scope and the
expiry, so the CAS listener checks it without any state, and it stops working on its own.
``write`` covers every CAS route, ``read`` only the reads (a read token on a write route
gets 403, as the specification says; a missing, forged or expired one gets 401).

Example:

    >>> from ckpt_localhub.signing import Signer
    >>> signer = Signer()
    >>> token, exp = mint(signer, "read", 60)
    >>> scope_of(signer, token)
    'read'
"""

from __future__ import annotations

import time

from ..signing import Signer

SCOPES = ("read", "write")


def mint(signer: Signer, scope: str, ttl_s: int) -> tuple[str, int]:
    expires, sig = signer.sign("xet-token", scope, ttl_s=ttl_s)
    return f"xet_{scope}_{expires}_{sig}", expires


def scope_of(signer: Signer, token: str | None) -> str | None:
    """The scope a token grants, or None when it is absent, not ours, or expired."""
    if not token:
        return None
    parts = token.split("_")
    if len(parts) != 4 or parts[0] != "xet" or parts[1] not in SCOPES or not parts[2].isdigit():
        return None
    expires = int(parts[2])
    if not signer.verify(parts[3], expires, "xet-token", parts[1]) or expires < time.time():
        return None
    return parts[1]
