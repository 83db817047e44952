"""The Hub's Xet endpoints: the CAS connection info that ``hf_xet`` asks for.

``GET /api/{type}s/{repo}/xet-{read|write}-token/{rev}`` answers ``casUrl``,
``accessToken`` and ``exp`` in JSON and the same in ``X-Xet-Cas-Url``,
``X-Xet-Access-Token`` and ``X-Xet-Token-Expiration`` headers. A write token needs write
access to the repo, a read token read access to the revision's files. ``resolve`` and
the listings name the same route (``Link: <...>; rel="xet-auth"``) for files in Xet.
"""

from __future__ import annotations

from urllib.parse import quote

from .context import Call
from .httpserver import HttpError, Response, json_response
from .xet.tokens import mint


def token(call: Call) -> Response:
    scope = call.params["scope"]
    if call.hub.xet is None or call.hub.cas_url is None:
        raise HttpError(404, f"Not found: {call.req.method} {call.req.path}")
    if scope == "write":
        call.repo(write=True)
    else:
        call.head(call.params["rev"])
        assert call.meta is not None
        call.require_file_access(call.meta)
    access, exp = mint(call.hub.signer, scope, call.hub.xet_token_ttl)
    headers = {"X-Xet-Cas-Url": call.hub.cas_url, "X-Xet-Access-Token": access, "X-Xet-Token-Expiration": str(exp)}
    return json_response({"casUrl": call.hub.cas_url, "accessToken": access, "exp": exp}, headers=headers)


def read_token_url(call: Call, revision: str) -> str:
    repo_type, _ = call.repo_ref()
    return (f"{call.req.base_url}/api/{repo_type}s/{quote(call.params['ns'])}/{quote(call.params['name'])}"
            f"/xet-read-token/{quote(revision, safe='')}")


def xet_hash(call: Call, sha256: str | None) -> str | None:
    """The Xet file hash of an LFS object uploaded through Xet (None with Xet off)."""
    if sha256 is None or call.hub.xet is None:
        return None
    return call.hub.xet.xet_hash_of(sha256)
