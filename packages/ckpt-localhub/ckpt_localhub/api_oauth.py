"""``POST /oauth/token``: the RFC 8693 token exchange of keyless CI (:mod:`.oidc`).

The body is JSON, as huggingface_hub sends it, or a form, as RFC 8693 writes it. Refusals
answer RFC 6749's ``{"error": ..., "error_description": ...}``; without a trusted issuer
(``--oidc-issuer``) the route answers 404 like any route this Hub does not offer.
"""

from __future__ import annotations

from typing import Any

from .context import Call
from .httpmessages import HttpError, Response, json_response
from .oidc import OidcRefused


def token(call: Call) -> Response:
    issuer = call.hub.oidc
    if issuer is None or call.hub.url is None:
        raise HttpError(404, "Not found: this Hub trusts no OIDC issuer (start it with --oidc-issuer)")
    content_type = (call.req.headers.get("Content-Type") or "").lower()
    body: dict[str, Any]
    if content_type.startswith("application/x-www-form-urlencoded"):
        body = {k: v[0] for k, v in call.form().items() if v}
    else:
        body = call.json_object()
    try:
        answer = issuer.exchange(body, audience=call.hub.url)
    except OidcRefused as exc:
        message = str(exc)
        return json_response({"error": exc.error, "error_description": message}, exc.status,
                             {"X-Error-Message": message.encode("ascii", "replace").decode()[:500]})
    return json_response(answer, 200, {"Cache-Control": "no-store"})
