"""Keyless CI in every door: no Hub token anywhere, the job's OIDC id token exchanged (by
huggingface_hub's own ``_oidc``) for a short-lived token per repo at the local Hub's
``/oauth/token``, against the test issuer that answers as GitHub's
``ACTIONS_ID_TOKEN_REQUEST_URL`` does. The local Hub runs with a static token the client
never sees, so every request it accepts carried a credential the access log names."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import HfApi, constants

import ckpt_action as ckpt
from ckpt_action.client import Client
from ckpt_action.errors import AuthError, InputError
from ckpt_action.stores.hub import keyless
from ckpt_localhub.testissuer import TestIssuer
from tests.helpers.localhub_fixtures import entries

ADMIN = "hf_admin_only_for_setup"
GITHUB_REPO = "acme/train"
REPOS = ("org/run", "org/release", "org/ro", "org/theirs")
UPLOADS = ("/preupload/", "/commit/", "/info/lfs/", "xet-write-token", "/upload")


@pytest.fixture
def issuer() -> Iterator[TestIssuer]:
    with TestIssuer(repository=GITHUB_REPO) as issuer:
        yield issuer


def start_hub(hub_server, issuer: TestIssuer, ttl: int = 3600):
    hub = hub_server(token=ADMIN, extra_args=(
        "--oidc-issuer", issuer.url, "--oidc-token-ttl", str(ttl),
        "--trusted-publisher", f"org/run={GITHUB_REPO}",
        "--trusted-publisher", f"org/release={GITHUB_REPO}",
        "--trusted-publisher", f"org/ro={GITHUB_REPO}:read",
        "--trusted-publisher", "org/theirs=someone/else"))
    admin = HfApi(endpoint=hub.url, token=ADMIN)
    for repo in REPOS:
        admin.create_repo(repo, private=True)
    hub.access_log.write_text("")  # the setup's requests are the admin's: the job's start here
    return hub


@pytest.fixture
def hub(hub_server, issuer: TestIssuer, hf_client, monkeypatch: pytest.MonkeyPatch):
    server = start_hub(hub_server, issuer)
    job_env(monkeypatch, issuer)
    return server


def job_env(monkeypatch: pytest.MonkeyPatch, issuer: TestIssuer) -> None:
    """A GitHub Actions job with ``permissions: id-token: write`` and no token at all."""
    for name in ("HF_TOKEN", "HF_OIDC_RESOURCE", "HF_OIDC_ID_TOKEN", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in issuer.actions_env().items():
        monkeypatch.setenv(name, value)


def checkpoint(root: Path, step: int, files: int = 2) -> Path:
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    for i in range(files):
        (folder / f"part-{i}.bin").write_bytes(bytes([step % 256, i]) * 2000)
    return folder


def issued(hub) -> list[str]:
    """Every token the local Hub exchanged (live or expired: its table keeps them until the next exchange)."""
    return list(hub.hub.hub.oidc._grants)


def job_requests(hub) -> list[dict]:
    """The job's requests to the Hub's API: all but the exchange itself and the uploads to
    presigned URLs (which carry the URL's signature, never the token, as on the Hub)."""
    return [e for e in entries(hub, listener="hub") if e["path"] != "/oauth/token"
            and not (e["path"].startswith("/localhub-lfs/") and "&sig=" in e["path"])]


def test_push_latest_pull_promote_keyless_every_request_an_exchanged_repo_token(hub, tmp_path) -> None:
    handle = ckpt.push(checkpoint(tmp_path / "out", 10), "org/run", step=10, endpoint=hub.url)
    found = ckpt.latest("org/run", endpoint=hub.url, auth="oidc")
    assert found == handle
    path = ckpt.pull(found, tmp_path / "resume", endpoint=hub.url)
    assert (path / "part-0.bin").read_bytes() == (tmp_path / "out" / "checkpoint-10" / "part-0.bin").read_bytes()
    released = ckpt.promote(handle, "release", tag="v1", endpoint=hub.url)
    assert released.subfolder == "release"
    requests = job_requests(hub)
    assert requests and all(e["credential"] == "exchanged:write:model/org/run" for e in requests), \
        {(e["path"], e["credential"]) for e in requests if e["credential"] != "exchanged:write:model/org/run"}
    assert {e["status"] for e in requests} <= {200, 201, 204, 302, 404}  # a 404: a tree not there yet


def test_a_read_scope_is_refused_before_any_upload_naming_the_missing_scope(hub, tmp_path) -> None:
    with pytest.raises(AuthError) as caught:
        ckpt.push(checkpoint(tmp_path / "out", 1), "org/ro", step=1, endpoint=hub.url)
    message = str(caught.value)
    assert "\n" not in message and "missing scope write on org/ro" in message and "auth=" in message
    assert not [e for e in entries(hub) if any(u in e["path"] for u in UPLOADS)]
    assert [e["path"] for e in entries(hub, "POST")] == ["/oauth/token"]
    # Reading with that token is what it is for.
    assert ckpt.latest("org/ro", endpoint=hub.url) is None


def test_a_token_scoped_to_another_repo_is_refused_before_any_upload(hub, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_OIDC_RESOURCE", "org/release")
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)  # HF_ENDPOINT, as huggingface_hub read it
    with pytest.raises(AuthError) as caught:
        ckpt.push(checkpoint(tmp_path / "out", 1), "org/run", step=1, endpoint=hub.url)
    message = str(caught.value)
    assert "missing scope write on org/run" in message and "HF_OIDC_RESOURCE" in message and "\n" not in message
    assert entries(hub) == []  # refused before even the exchange
    monkeypatch.delenv("HF_OIDC_RESOURCE")
    with pytest.raises(AuthError, match=r"trusts someone/else, not the id token.s repository"):
        ckpt.push(checkpoint(tmp_path / "out2", 1), "org/theirs", step=1, endpoint=hub.url)
    assert not [e for e in entries(hub) if any(u in e["path"] for u in UPLOADS)]


def test_a_bucket_says_what_the_exchange_can_scope_and_what_to_use(hub, tmp_path) -> None:
    with pytest.raises(InputError) as caught:
        ckpt.push(checkpoint(tmp_path / "out", 1), "hf://buckets/org/ckpts", step=1, endpoint=hub.url)
    message = str(caught.value)
    assert "repos and users" in message and "auth= token" in message and "\n" not in message
    assert entries(hub) == []


def test_promote_to_another_repo_exchanges_once_per_target(hub, tmp_path) -> None:
    handle = ckpt.push(checkpoint(tmp_path / "out", 5), "org/run", step=5, endpoint=hub.url)
    hub.access_log.write_text("")
    ckpt.promote(handle, "release", to_repo="org/release", tag="v1", endpoint=hub.url)
    assert len(entries(hub, "POST", "/oauth/token")) == 2
    reads = {e["credential"] for e in job_requests(hub) if "/org/run/" in e["path"] or "/org/run" == e["path"][-8:]}
    writes = {e["credential"] for e in job_requests(hub) if "org/release" in e["path"]}
    assert reads == {"exchanged:write:model/org/run"} and writes == {"exchanged:write:model/org/release"}
    assert HfApi(endpoint=hub.url, token=ADMIN).list_repo_refs("org/release").tags[0].name == "v1"


class SharedClock:
    """The one clock of the job and the Hub: every time the job reads it (each request it
    authenticates) ten seconds pass; the Hub reads it as it stands."""

    def __init__(self) -> None:
        self.now = time.time()

    def tick(self) -> float:
        self.now += 10.0
        return self.now

    def read(self) -> float:
        return self.now


def test_a_long_run_exchanges_again_before_expiry_and_never_sends_an_expired_token(
        hub_server, issuer, hf_client, monkeypatch, tmp_path) -> None:
    """A token living 60 s, while every request the job makes costs 10 s: a client kept across
    pushes (as the watch and the Trainer callback keep theirs) and each push's own requests
    outlive several tokens; each is exchanged again 30 s before it expires, none is refused."""
    hub = start_hub(hub_server, issuer, ttl=60)
    job_env(monkeypatch, issuer)
    clock = SharedClock()
    hub.hub.hub.oidc.clock = clock.read
    monkeypatch.setattr(keyless, "clock", clock.tick)
    client = Client(hub.url, auth="oidc")
    for step in (1, 2, 3):
        client.push(checkpoint(tmp_path / "out", step, files=3), "org/run", step=step)
    assert client.latest("org/run").handle.step == 3
    requests = job_requests(hub)
    assert len(requests) > 12  # the run outlived several tokens...
    assert all(e["credential"] == "exchanged:write:model/org/run" and e["status"] != 401 for e in requests)
    exchanges = len(entries(hub, "POST", "/oauth/token"))
    assert exchanges >= 3 and exchanges < len(requests)  # ...each exchanged again before it expired, not per request


def test_the_token_is_never_printed_nor_written(hub, cli, tmp_path) -> None:
    checkpoint(tmp_path / "out", 3)
    env = {"HF_ENDPOINT": hub.url, **{k: v for k, v in hub_env_of(tmp_path).items()}}
    runs = [cli("push", "--repo", "org/run", "--local-dir", "out/checkpoint-3", "--step", "3", "--auth", "oidc",
                **env),
            cli("latest", "--repo", "org/run", "--json", **env),
            cli("pull", "--repo", "org/run", "--latest", "--local-dir", "resume", "--auth", "oidc", **env),
            cli("push", "--repo", "org/ro", "--local-dir", "out/checkpoint-3", "--step", "3", **env)]
    assert [r.code for r in runs[:3]] == [0, 0, 0], [r.stderr for r in runs]
    refused = runs[3]
    assert refused.code != 0 and "--auth token" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    tokens = issued(hub)
    assert len(tokens) == 4
    for run in runs:
        assert not any(t in run.stdout or t in run.stderr for t in tokens)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(t.encode() in data for t in tokens), path


def test_in_github_actions_the_exchanged_token_is_masked_before_use(hub, cli, tmp_path) -> None:
    checkpoint(tmp_path / "out", 4)
    run = cli("push", "--repo", "org/run", "--local-dir", "out/checkpoint-4", "--step", "4", "--json",
              GITHUB_ACTIONS="true", HF_ENDPOINT=hub.url, **hub_env_of(tmp_path))
    assert run.code == 0, run
    (token,) = issued(hub)
    # before any other line, the runner masks them: the job's id token, then the one exchanged for it
    first, second = run.stderr.splitlines()[:2]
    id_token = first.removeprefix("::add-mask::")
    assert first.startswith("::add-mask::") and id_token.count(".") == 2, first  # a JWT
    assert second == f"::add-mask::{token}"
    for secret in (id_token, token):
        assert run.stderr.count(secret) == 1 and secret not in run.stdout
    assert run.json["revision"]  # stdout stays one JSON object


def hub_env_of(tmp_path: Path) -> dict[str, str]:
    import os

    return {k: os.environ[k] for k in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")} | {
        "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(tmp_path / "hf-home")}


@pytest.mark.parametrize(("auth", "env", "wanted"), [
    ("token", {}, "--auth token needs a token"),
    ("oidc", {"ACTIONS_ID_TOKEN_REQUEST_URL": ""}, "--auth oidc needs an OIDC id token"),
    ("sometimes", {}, "Invalid value for '--auth'"),
])
def test_an_auth_that_cannot_be_met_is_one_line_naming_auth(hub, cli, tmp_path, auth, env, wanted) -> None:
    run = cli("latest", "--repo", "org/run", "--auth", auth, HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "h"),
              **env)
    assert run.code == 2 and wanted in run.stderr, run
    assert entries(hub) == []


def test_a_given_id_token_is_exchanged_as_huggingface_hub_defines_it(hub, issuer, tmp_path, monkeypatch) -> None:
    """``HF_OIDC_ID_TOKEN`` (another CI system's id token) and ``HF_OIDC_RESOURCE`` (the one repo)."""
    for name in ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_OIDC_ID_TOKEN", issuer.mint(hub.url))
    monkeypatch.setenv("HF_OIDC_RESOURCE", "org/run")
    with pytest.raises(InputError, match="HF_ENDPOINT"):  # huggingface_hub would exchange it at the public Hub
        ckpt.latest("org/run", endpoint=hub.url)
    assert issuer.minted == [] and entries(hub) == []
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)  # HF_ENDPOINT, as huggingface_hub read it
    handle = ckpt.push(checkpoint(tmp_path / "out", 8), "org/run", step=8, endpoint=hub.url)
    assert ckpt.latest("org/run", endpoint=hub.url) == handle
    assert {e["credential"] for e in job_requests(hub)} == {"exchanged:write:model/org/run"}
    assert issuer.minted == []  # nothing minted: the given one was used


def test_a_watch_given_a_keyless_client_pushes_each_checkpoint_keyless(hub, tmp_path, monkeypatch) -> None:
    """``ckpt-action watch --auth oidc`` and ``Watcher(client=Client(auth="oidc"))``: its uploads
    exchange their own tokens (the connection, not a token, is what reaches them), even beside
    an HF_TOKEN in the environment, which ``auto`` would send."""
    from ckpt_action.watch.watcher import Watcher

    monkeypatch.setenv("HF_TOKEN", "hf_a_token_the_hub_refuses")
    out = tmp_path / "out"
    for step in (1, 2):
        folder = checkpoint(out, step)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    watch = Watcher(out, "org/run", client=Client(hub.url, auth="oidc"), poll=0.05, uploader="thread", settle=0.2)
    assert watch.hub["auth"] == "oidc" and watch.hub["token"] is None
    watch.request_stop(grace=60)
    watch.start()
    report = watch.stop()
    assert sorted(n for n, _, _ in report.pushed) == ["checkpoint-1", "checkpoint-2"], report
    assert {e["credential"] for e in job_requests(hub)} == {"exchanged:write:model/org/run"}
