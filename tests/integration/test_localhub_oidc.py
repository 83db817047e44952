"""The local Hub's keyless CI authentication: ``POST /oauth/token`` exchanges an id token of
the issuer it trusts (``--oidc-issuer``, ``--trusted-publisher``) for a repo-scoped, expiring
token, and its routes hold that token to its scope. Every exchange goes through
huggingface_hub's own ``exchange_oidc_token``, as a CI job's would; the id tokens come from the
test issuer (``ckpt_localhub.testissuer``), which also mints the attacks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from huggingface_hub import HfApi
from huggingface_hub._oidc import exchange_oidc_token
from huggingface_hub.errors import HfHubHTTPError

from ckpt_localhub.testissuer import TestIssuer, new_key
from tests.helpers.localhub_fixtures import entries

TOKEN = "hf_static_oidc_test"
GITHUB_REPO = "acme/train"


@pytest.fixture
def issuer() -> Iterator[TestIssuer]:
    with TestIssuer(repository=GITHUB_REPO) as issuer:
        yield issuer


@pytest.fixture
def hub(hub_server, issuer: TestIssuer):
    server = hub_server(token=TOKEN, extra_args=(
        "--oidc-issuer", issuer.url,
        "--trusted-publisher", f"org/run={GITHUB_REPO}",
        "--trusted-publisher", f"org/other={GITHUB_REPO}",
        "--trusted-publisher", f"org/ro={GITHUB_REPO}:read",
        "--trusted-publisher", "org/theirs=someone/else"))
    admin = HfApi(endpoint=server.url, token=TOKEN)
    for repo in ("org/run", "org/other", "org/ro", "org/theirs"):
        admin.create_repo(repo, private=True)
    admin.upload_file(path_or_fileobj=b"x", path_in_repo="a.txt", repo_id="org/ro")
    return server


def exchange(hub, id_token: str, resource: str = "org/run") -> dict:
    return exchange_oidc_token(subject_token=id_token, resource=resource, endpoint=hub.url)


def refused(hub, id_token: str, resource: str = "org/run") -> int:
    with pytest.raises(HfHubHTTPError) as caught:
        exchange(hub, id_token, resource)
    return caught.value.response.status_code


def test_exchanged_token_writes_its_repo_and_is_logged_as_exchanged(hub, issuer: TestIssuer) -> None:
    answer = exchange(hub, issuer.mint(hub.url))
    assert answer["token_type"] == "bearer" and answer["expires_in"] == 3600
    api = HfApi(endpoint=hub.url, token=answer["access_token"])
    api.upload_file(path_or_fileobj=b"weights", path_in_repo="model.bin", repo_id="org/run")
    assert "model.bin" in api.list_repo_files("org/run")
    commits = entries(hub, "POST", "/api/models/org/run/commit/")
    assert commits and all(e["credential"] == "exchanged:write:model/org/run" for e in commits)
    assert answer["access_token"] not in hub.access_log.read_text()


def test_static_token_still_accepted_and_anything_else_refused(hub) -> None:
    HfApi(endpoint=hub.url, token=TOKEN).list_repo_files("org/run")
    with pytest.raises(HfHubHTTPError) as caught:
        HfApi(endpoint=hub.url, token="hf_oidc_made_up").list_repo_files("org/run")
    assert caught.value.response.status_code == 401


def test_an_id_token_for_another_audience_is_refused(hub, issuer: TestIssuer) -> None:
    assert refused(hub, issuer.mint("https://huggingface.co")) == 401


def test_an_expired_id_token_is_refused(hub, issuer: TestIssuer) -> None:
    assert refused(hub, issuer.mint(hub.url, exp=1_000_000_000, iat=999_999_000, nbf=999_999_000)) == 401


def test_an_unsigned_id_token_is_refused(hub, issuer: TestIssuer) -> None:
    assert refused(hub, issuer.mint(hub.url, alg="none")) == 401


def test_an_hs256_id_token_keyed_with_anything_is_refused(hub, issuer: TestIssuer) -> None:
    import base64
    import hashlib
    import hmac
    import json

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "kid": issuer.kid}).encode())
    body = b64(json.dumps(issuer.claims(hub.url)).encode())
    mac = hmac.new(json.dumps(issuer.jwks()).encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    assert refused(hub, f"{head}.{body}.{b64(mac)}") == 401


def test_an_id_token_signed_by_another_key_is_refused(hub, issuer: TestIssuer) -> None:
    assert refused(hub, issuer.mint(hub.url, key=new_key())) == 401


def test_an_id_token_of_another_issuer_is_refused(hub, issuer: TestIssuer) -> None:
    assert refused(hub, issuer.mint(hub.url, iss="https://token.actions.githubusercontent.com")) == 401


def test_an_id_token_of_another_repository_is_refused(hub, issuer: TestIssuer) -> None:
    assert refused(hub, issuer.mint(hub.url, repository="mallory/fork")) == 403
    assert refused(hub, issuer.mint(hub.url), resource="org/theirs") == 403
    assert refused(hub, issuer.mint(hub.url), resource="org/untrusted") == 403


def test_an_exchanged_token_replayed_after_expiry_is_refused(hub, issuer: TestIssuer) -> None:
    id_token = issuer.mint(hub.url)
    token = exchange(hub, id_token)["access_token"]
    api = HfApi(endpoint=hub.url, token=token)
    api.list_repo_files("org/run")
    trusted = hub.hub.hub.oidc
    later = trusted.clock() + 3601
    trusted.clock = lambda: later
    with pytest.raises(HfHubHTTPError) as caught:
        api.list_repo_files("org/run")
    assert caught.value.response.status_code == 401
    assert refused(hub, id_token) == 401  # nor is the id token good for another exchange by then
    assert entries(hub, "GET", "/api/models/org/run")[-1]["credential"] == "invalid"


def test_scope_escalation_is_refused(hub, issuer: TestIssuer) -> None:
    read_token = exchange(hub, issuer.mint(hub.url), "org/ro")["access_token"]
    reader = HfApi(endpoint=hub.url, token=read_token)
    assert reader.list_repo_files("org/ro")  # a read token reads
    with pytest.raises(HfHubHTTPError) as caught:
        reader.upload_file(path_or_fileobj=b"x", path_in_repo="b.txt", repo_id="org/ro")
    assert caught.value.response.status_code == 403
    # asking the exchange for more than the publisher grants
    with pytest.raises(HfHubHTTPError) as caught:
        from huggingface_hub.utils import get_session

        response = get_session().post(f"{hub.url}/oauth/token", json={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "subject_token": issuer.mint(hub.url), "resource": "org/ro", "scope": "write"})
        from huggingface_hub.utils import hf_raise_for_status

        hf_raise_for_status(response)
    assert caught.value.response.status_code == 403
    # a token for one repo on another, to read or to write, or on a bucket or a repo's deletion
    writer = HfApi(endpoint=hub.url, token=exchange(hub, issuer.mint(hub.url))["access_token"])
    for attempt in (lambda: writer.list_repo_files("org/other"),
                    lambda: writer.upload_file(path_or_fileobj=b"x", path_in_repo="c.txt", repo_id="org/other"),
                    lambda: writer.create_repo("org/new", private=True),
                    lambda: writer.delete_repo("org/run"),
                    lambda: writer.create_bucket("org/bucket")):
        with pytest.raises(HfHubHTTPError) as caught:
            attempt()
        assert caught.value.response.status_code == 403
    assert HfApi(endpoint=hub.url, token=TOKEN).list_repo_files("org/run")  # still there
