"""Both paths of the local Hub: Xet off (``--no-xet``), plain-LFS clients beside Xet ones,
restarts, and faults on the CAS routes. Servers run as subprocesses, clients are ``hf``."""

from __future__ import annotations

import os

import httpx
from huggingface_hub import HfApi, hf_hub_url

from ckpt_localhub import LocalHub
from tests.helpers.localhub_fixtures import REPO, TOKEN, make_hub_env
from tests.helpers.xet_fixtures import run_hf, xet_env


def lfs_env(server, home):
    """A client env for ``server`` with Xet disabled (plain LFS), its token if it has one."""
    return make_hub_env(server.url, home, server.token)


def _cas(server) -> list[dict]:
    return [e for e in server.log_entries() if e["listener"] == "cas"]


def _batch(server) -> list[dict]:
    return [e for e in server.log_entries() if e["path"].endswith("/info/lfs/objects/batch")]


def test_no_xet_serves_plain_lfs_only(hub_server, tmp_path):
    server = hub_server(token=TOKEN, extra_args=("--no-xet",))
    HfApi(endpoint=server.url, token=TOKEN).create_repo(REPO)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{server.url}/api/models/{REPO}/xet-write-token/main", headers=auth).status_code == 404
    assert httpx.get(f"{server.url}/api/models/{REPO}/xet-read-token/main", headers=auth).status_code == 404
    data = os.urandom(200_000)
    (tmp_path / "w.bin").write_bytes(data)
    run_hf(["upload", REPO, str(tmp_path / "w.bin"), "w.bin"], lfs_env(server, tmp_path / "h"))
    assert _batch(server) and _cas(server) == []
    head = httpx.head(hf_hub_url(REPO, "w.bin", endpoint=server.url), headers=auth)
    assert head.status_code == 302 and "X-Xet-Hash" not in head.headers and "Link" not in head.headers
    with LocalHub(tmp_path / "inproc", xet=False) as hub:
        assert hub.cas_url is None


def test_an_lfs_client_and_a_xet_client_share_one_hub(hub_server, tmp_path):
    server = hub_server(token=TOKEN)
    HfApi(endpoint=server.url, token=TOKEN).create_repo(REPO)
    via_lfs, via_xet = os.urandom(300_000), os.urandom(300_000)
    (tmp_path / "a.bin").write_bytes(via_lfs)
    (tmp_path / "b.bin").write_bytes(via_xet)
    run_hf(["upload", REPO, str(tmp_path / "a.bin"), "a.bin"], lfs_env(server, tmp_path / "lfs"))  # Xet disabled
    assert _batch(server) and _cas(server) == []
    run_hf(["upload", REPO, str(tmp_path / "b.bin"), "b.bin"], xet_env(server.url, tmp_path / "xet", TOKEN))
    assert len(_batch(server)) == 1 and any(e["path"] == "/v1/shards" for e in _cas(server))
    tree = {f.path: f for f in HfApi(endpoint=server.url, token=TOKEN).list_repo_tree(REPO)}
    assert tree["a.bin"].xet_hash is None and tree["b.bin"].xet_hash is not None
    # Each client reads both files: the LFS one through the CDN bridge, the Xet one from the CAS.
    clients = ((lfs_env(server, tmp_path / "lfs2"), "lfs"), (xet_env(server.url, tmp_path / "x2", TOKEN), "xet"))
    for env, name in clients:
        out = tmp_path / f"out-{name}"
        run_hf(["download", REPO, "a.bin", "b.bin", "--local-dir", str(out)], env)
        assert (out / "a.bin").read_bytes() == via_lfs and (out / "b.bin").read_bytes() == via_xet


def test_xet_content_and_the_dedupe_index_survive_a_restart(hub_server, tmp_path):
    server = hub_server(token=TOKEN)
    HfApi(endpoint=server.url, token=TOKEN).create_repo(REPO)
    data = os.urandom(4 * 1024 * 1024)
    (tmp_path / "n.bin").write_bytes(data)
    run_hf(["upload", REPO, str(tmp_path / "n.bin"), "n.bin"], xet_env(server.url, tmp_path / "h1", TOKEN))
    server.restart()
    out = tmp_path / "out"
    run_hf(["download", REPO, "n.bin", "--local-dir", str(out)], xet_env(server.url, tmp_path / "h2", TOKEN))
    assert (out / "n.bin").read_bytes() == data
    before = sum(e["bytes_in"] for e in _cas(server) if e["path"].startswith("/v1/xorbs/"))
    (tmp_path / "copy.bin").write_bytes(data)
    run_hf(["upload", REPO, str(tmp_path / "copy.bin"), "copy.bin"], xet_env(server.url, tmp_path / "h3", TOKEN))
    after = sum(e["bytes_in"] for e in _cas(server) if e["path"].startswith("/v1/xorbs/"))
    assert after == before  # the same bytes again: every chunk deduped against what was stored before


def test_faults_reach_the_cas_routes_and_the_client_retries(hub_server, tmp_path):
    server = hub_server(token=TOKEN, faults=[
        {"method": "POST", "path": "^/v1/xorbs/", "status": 503, "times": 1},
        {"method": "GET", "path": "^/v1/fetch/xorb/", "reset": 1000, "times": 1},
    ])
    HfApi(endpoint=server.url, token=TOKEN).create_repo(REPO)
    data = os.urandom(500_000)
    (tmp_path / "w.bin").write_bytes(data)
    run_hf(["upload", REPO, str(tmp_path / "w.bin"), "w.bin"], xet_env(server.url, tmp_path / "h1", TOKEN))
    xorbs = [e["status"] for e in _cas(server) if e["path"].startswith("/v1/xorbs/")]
    assert xorbs == [503, 200]
    out = tmp_path / "out"
    run_hf(["download", REPO, "w.bin", "--local-dir", str(out)], xet_env(server.url, tmp_path / "h2", TOKEN))
    assert (out / "w.bin").read_bytes() == data
    fetches = [e["status"] for e in _cas(server) if e["path"].startswith("/v1/fetch/xorb/")]
    assert fetches[0] == "reset" and fetches[-1] == 206
