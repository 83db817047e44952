"""CAS access tokens: what the Hub's ``xet-read-token`` / ``xet-write-token`` routes hand out.

A token is ``xet_<scope>_<expiry>_<repo>_<signature>``: the signer's HMAC over the scope, the
repo it was issued for (``<type>/<namespace>/<name>``, lower-cased, hex-encoded) and the
expiry, so the CAS listener checks it without any state, and it stops working on its own.
``write`` covers every CAS route, ``read`` only the reads (a read token on a write route
gets 403, as the specification says; a missing, forged or expired one gets 401). As on the
Hub, a token is scoped to its repo: reads answer only files (and xorbs of files) that the
repo's refs reach.

Example:

    >>> from ckpt_localhub.signing import Signer
    >>> signer = Signer()
    >>> token, exp = mint(signer, "read", "model", "Me/Ckpts", 60)
    >>> grant_of(signer, token)
    Grant(scope='read', repo_type='model', repo_id='me/ckpts')
"""

from __future__ import annotations

import re
import time
from typing import NamedTuple

from ..signing import Signer

SCOPES = ("read", "write")
_DIGITS = re.compile(r"[0-9]{1,12}")
_HEX = re.compile(r"(?:[0-9a-f]{2}){1,256}")


class Grant(NamedTuple):
    scope: str
    repo_type: str
    repo_id: str
    """Lower-cased: repo ids are case-insensitive."""


def mint(signer: Signer, scope: str, repo_type: str, repo_id: str, ttl_s: int) -> tuple[str, int]:
    repo = f"{repo_type}/{repo_id.lower()}".encode().hex()
    expires, sig = signer.sign("xet-token", scope, repo, ttl_s=ttl_s)
    return f"xet_{scope}_{expires}_{repo}_{sig}", expires


def grant_of(signer: Signer, token: str | None) -> Grant | None:
    """What a token grants, or None when it is absent, not ours, or expired."""
    if not token:
        return None
    parts = token.split("_")
    # Whole-string patterns: str.isdigit() also takes digits such as "²" that int() refuses.
    if len(parts) != 5 or parts[0] != "xet" or parts[1] not in SCOPES or not _DIGITS.fullmatch(parts[2]) \
            or not _HEX.fullmatch(parts[3]):
        return None
    expires, repo = int(parts[2]), parts[3]
    if not signer.verify(parts[4], expires, "xet-token", parts[1], repo) or expires < time.time():
        return None
    try:
        repo_type, _, repo_id = bytes.fromhex(repo).decode().partition("/")
    except ValueError:  # signed by us, so never; but a parse is no place to trust that
        return None
    return Grant(parts[1], repo_type, repo_id)
