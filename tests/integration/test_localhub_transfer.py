"""Bytes in and out of the local Hub: LFS uploads, downloads, and the cross-origin CDN redirect
LFS downloads take on the Hub, driven by the real client, the ``hf`` CLI and ckpt-action."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download, hf_hub_url, snapshot_download
from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

from ckpt_localhub import LocalHub
from tests.conftest import read_tree
from tests.helpers.chaos_helpers import ckpt, env_for
from tests.helpers.localhub_fixtures import REPO, TOKEN, entries, sha256_file

HF = str(Path(sys.executable).with_name("hf"))


def test_download_at_branch_tag_and_sha(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    v1 = api.create_commit(REPO, [CommitOperationAdd("w.bin", b"\0one")], commit_message="v1").oid
    api.create_tag(REPO, tag="step-1")
    api.create_commit(REPO, [CommitOperationAdd("w.bin", b"\0two")], commit_message="v2")

    def get(rev: str) -> bytes:
        return Path(hf_hub_download(REPO, "w.bin", revision=rev, endpoint=local_hub.url, token=TOKEN,
                                    cache_dir=hf_client)).read_bytes()

    assert get("main") == b"\0two"
    assert get("step-1") == b"\0one"
    assert get(v1) == b"\0one"
    with pytest.raises(RevisionNotFoundError):
        get("nope")
    with pytest.raises(RevisionNotFoundError):
        get("0" * 40)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(REPO, "missing.bin", endpoint=local_hub.url, token=TOKEN, cache_dir=hf_client)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("local-user/none", "w.bin", endpoint=local_hub.url, token=TOKEN, cache_dir=hf_client)


def test_lfs_resolve_redirects_to_another_origin_and_regular_files_do_not(served):
    server, api, weights = served
    url = hf_hub_url(REPO, "model/weights.bin", endpoint=server.url)
    head = httpx.head(url)
    assert head.status_code == 302
    sha = api.repo_info(REPO).sha
    assert head.headers["X-Linked-Etag"] == f'"{hashlib.sha256(weights).hexdigest()}"'
    assert head.headers["X-Linked-Size"] == "5000" and head.headers["X-Repo-Commit"] == sha
    location = httpx.URL(head.headers["Location"])
    assert location.host == "127.0.0.1" and location.port != server.port  # another origin
    assert location.path == f"/{REPO}/resolve/{sha}/model/weights.bin"  # pinned to the commit it resolved to
    assert "token" not in str(location).lower()
    cdn = httpx.get(location)
    assert cdn.status_code == 200 and cdn.content == weights and cdn.headers["ETag"] == head.headers["X-Linked-Etag"]
    part = httpx.get(location, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == weights[100:200]
    assert part.headers["Content-Range"] == "bytes 100-199/5000"
    tail = httpx.get(location, headers={"Range": "bytes=4990-"})
    assert tail.status_code == 206 and tail.content == weights[4990:]
    assert httpx.get(location, headers={"Range": "bytes=6000-"}).status_code == 416
    config = httpx.head(hf_hub_url(REPO, "model/config.json", endpoint=server.url))
    blob_oid = hashlib.sha1(b'blob 8\0{"a": 1}', usedforsecurity=False).hexdigest()
    assert config.status_code == 200 and config.headers["ETag"] == f'"{blob_oid}"'
    assert "X-Linked-Etag" not in config.headers and config.headers["Content-Length"] == "8"
    missing = httpx.head(hf_hub_url(REPO, "nope", endpoint=server.url))
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"
    assert missing.headers["X-Repo-Commit"] == sha
    # Xet is on by default: the token route answers as the Hub's (tests/integration/test_localhub_xet*.py cover it).
    assert httpx.get(f"{server.url}/api/models/{REPO}/xet-write-token/main").json()["casUrl"].startswith("http://")
    assert httpx.get(f"{server.url}/api/agent-harnesses").status_code == 404


def test_cdn_urls_need_their_signature_and_expire(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.upload_file(path_or_fileobj=b"\0weights", path_in_repo="w.bin", repo_id=REPO)
    location = httpx.head(f"{local_hub.url}/{REPO}/resolve/main/w.bin").headers["Location"]
    assert httpx.get(location).content == b"\0weights"
    url = urlsplit(location)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    base = f"{url.scheme}://{url.netloc}"

    def get(path: str = url.path, **change: str) -> int:
        return httpx.get(f"{base}{path}", params={**query, **change}).status_code

    assert get(expires=str(int(query["expires"]) + 3600)) == 403  # a longer life is not what was signed
    assert get(signature="0" * 64) == 403
    assert get(path=url.path.replace("w.bin", "other.bin")) == 403
    expires, sig = local_hub.hub.signer.sign("cdn", url.path, query["oid"], query["size"], ttl_s=-1)
    assert get(expires=str(expires), signature=sig) == 403  # signed, but expired


def test_no_token_reaches_the_cdn(hub_server, hub_env, hf_client, tmp_path):
    """The client drops Authorization when the redirect leaves the Hub's origin: the CDN never sees it."""
    server = hub_server(token=TOKEN)
    api = HfApi(endpoint=server.url, token=TOKEN)
    api.create_repo(REPO, private=True)
    data = os.urandom(300_000)
    api.create_commit(REPO, [CommitOperationAdd("w.safetensors", data), CommitOperationAdd("c.json", b"{}")],
                      commit_message="add")
    path = hf_hub_download(REPO, "w.safetensors", endpoint=server.url, token=TOKEN, cache_dir=hf_client)
    assert Path(path).read_bytes() == data
    down = subprocess.run([HF, "download", REPO, "--local-dir", str(tmp_path / "dst")], env=hub_env(server),
                          capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert (tmp_path / "dst/w.safetensors").read_bytes() == data
    cdn = entries(server, listener="cdn")
    assert len(cdn) == 2 and all(e["status"] == 200 and e["bytes_out"] == len(data) for e in cdn)
    assert not any(e["auth"] for e in cdn)
    # The Hub got the token with every call but the signed LFS upload and the CLI's telemetry ping.
    assert all(e["auth"] for e in entries(server, listener="hub")
               if not e["path"].startswith(("/localhub-lfs/", "/api/agent-harnesses")))
    # Without the token the private file is not found, redirect or not.
    assert httpx.head(hf_hub_url(REPO, "w.safetensors", endpoint=server.url)).status_code == 404


def test_ckpt_action_push_pull_and_promote_across_the_redirect(hub_server, hf_client, cli, tmp_path):
    server = hub_server(token=TOKEN)
    files = ckpt(3)
    src = tmp_path / "src"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    env = env_for(server, tmp_path, HF_TOKEN=TOKEN)
    push = cli("push", "--repo", REPO, "--local-dir", str(src), "--step", "3", "--json", env=env)
    assert push.code == 0, push.stderr
    pull = cli("pull", "--repo", REPO, "--subfolder", "checkpoint-3", "--local-dir", str(tmp_path / "dst"),
               "--json", env=env)
    assert pull.code == 0, pull.stderr
    got = read_tree(tmp_path / "dst")
    got.pop("ckpt-manifest.json")
    assert got == files
    promote = cli("promote", "--repo", REPO, "--subfolder", "checkpoint-3", "--to", "release", "--to-repo",
                  "local-user/released", "--json", env=env)
    assert promote.code == 0, promote.stderr
    cdn = entries(server, "GET", listener="cdn")
    lfs_files = {p for p in files if p.endswith((".safetensors", ".pt", ".bin", ".pth"))}
    assert lfs_files and len(cdn) >= 2 * len(lfs_files)  # pull and promote --to-repo both read through it
    assert not any(e["auth"] for e in cdn)
    assert all(e["status"] in (200, 206) for e in cdn)


def test_lfs_direct_serves_from_the_hub_itself(hub_server, hf_client):
    server = hub_server(extra_args=("--lfs-direct",))
    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    api.upload_file(path_or_fileobj=b"\0weights", path_in_repo="w.bin", repo_id=REPO)
    head = httpx.head(hf_hub_url(REPO, "w.bin", endpoint=server.url))
    assert head.status_code == 200 and head.headers["X-Linked-Size"] == "8"
    assert httpx.get(hf_hub_url(REPO, "w.bin", endpoint=server.url)).content == b"\0weights"
    assert entries(server, listener="cdn") == []


def test_snapshot_download(served, hf_client, tmp_path):
    server, _api, weights = served
    out = snapshot_download(REPO, endpoint=server.url, token=False, local_dir=tmp_path / "snap")
    assert (Path(out) / "model/weights.bin").read_bytes() == weights
    cached = snapshot_download(REPO, endpoint=server.url, token=False, cache_dir=hf_client)
    assert (Path(cached) / "model/config.json").read_bytes() == b'{"a": 1}'


@pytest.mark.slow
def test_hf_cli_upload_and_download_100mb(hub_server, hub_env, tmp_path):
    server = hub_server(token=TOKEN)
    env = hub_env(server)
    src = tmp_path / "src"
    src.mkdir()
    block = os.urandom(1 << 20)
    with open(src / "model.safetensors", "wb") as fh:
        for i in range(100):
            fh.write(i.to_bytes(8, "big") + block[8:])
    (src / "notes.txt").write_text("hello\n")
    size = (src / "model.safetensors").stat().st_size
    subprocess.run([HF, "repos", "create", REPO, "--private"], env=env, check=True, capture_output=True)
    up = subprocess.run([HF, "upload", REPO, str(src), ".", "--commit-message", "cli upload"],
                        env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    puts = entries(server, "PUT")
    assert [e["bytes_in"] for e in puts] == [size] and puts[0]["status"] == 200
    down = subprocess.run([HF, "download", REPO, "--local-dir", str(tmp_path / "dst")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr
    assert sha256_file(tmp_path / "dst/model.safetensors") == sha256_file(src / "model.safetensors")
    assert (tmp_path / "dst/notes.txt").read_text() == "hello\n"
    gets = [e for e in entries(server, "GET", "/resolve/") if "model.safetensors" in e["path"]]
    assert gets[-1]["bytes_out"] == size and gets[-1]["listener"] == "cdn"


def test_access_log_counts_requests_and_bytes(hub_server, hf_client):
    server = hub_server()
    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    data = os.urandom(123_456)
    api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=REPO)
    log = server.log_entries()
    assert {"ts", "method", "path", "status", "bytes_in", "bytes_out", "ms", "listener", "auth",
            "request_id"} <= set(log[0])
    assert next(e["path"] for e in log if e["method"] == "POST") == "/api/repos/create"
    puts = [e for e in log if e["method"] == "PUT"]
    assert len(puts) == 1 and puts[0]["bytes_in"] == len(data) and puts[0]["status"] == 200
    assert len([e for e in log if "/commit/" in e["path"]]) == 1
    hf_hub_download(REPO, "w.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    assert [(e["method"], e["status"], e["listener"]) for e in entries(server, contains="/resolve/")] == [
        ("HEAD", 302, "hub"), ("GET", 200, "cdn")]
    assert entries(server, "GET", "/resolve/")[0]["bytes_out"] == len(data)


def test_log_lines_are_written_before_the_answer_completes(served):
    """A client holding a whole response finds its line already in the log (no waiting, ever)."""
    server, api, _ = served
    for i in range(40):
        api.list_repo_refs(REPO)
        assert len(entries(server, "GET", "/refs")) == i + 1
        assert httpx.get(f"{server.url}/{REPO}/resolve/main/model/config.json").status_code == 200
        assert len(entries(server, "GET", "config.json")) == i + 1


# ---------------------------------------------------------------- uploads


def test_commit_with_many_big_regular_files_streams(local_hub):
    """12 regular files of 9 MB in one commit body (over 100 MB of NDJSON), as huggingface_hub's tests send."""
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    ops = [CommitOperationAdd(f"file-{n}.text", b"Hello regular " + bytes([65 + n]) * (9 * 1024 * 1024))
           for n in range(12)]
    api.create_commit(REPO, ops, commit_message="huge regular files")
    files = {f.path: f for f in api.get_paths_info(REPO, [f"file-{n}.text" for n in range(12)])}
    assert len(files) == 12 and all(f.lfs is None for f in files.values())


@pytest.mark.process("kills the server's process (kill -9) mid-upload")
def test_server_killed_during_upload_keeps_nothing_partial(served_process):
    server, api, _ = served_process
    files_before = api.list_repo_files(REPO)
    data = os.urandom(2_000_000)
    oid = hashlib.sha256(data).hexdigest()
    batch = httpx.post(f"{server.url}/{REPO}.git/info/lfs/objects/batch",
                       json={"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]}).json()
    href = httpx.URL(batch["objects"][0]["actions"]["upload"]["href"])
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        target = href.raw_path.decode()
        sock.sendall(f"PUT {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode())
        sock.sendall(data[:1_000_000])
        deadline = time.monotonic() + 10
        while not list((server.data_dir / "tmp").iterdir()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.proc is not None
        server.proc.kill()  # kill -9 mid-upload
        server.proc.wait()
    server.restart()
    assert not list((server.data_dir / "objects/lfs").glob(f"*/{oid}"))
    assert not list((server.data_dir / "tmp").iterdir())
    assert HfApi(endpoint=server.url, token=False).list_repo_files(REPO) == files_before


def test_lfs_put_with_wrong_bytes_is_rejected(served):
    from huggingface_hub.utils import get_session

    server, _api, _ = served
    data = os.urandom(4096)
    oid = hashlib.sha256(data).hexdigest()
    batch_url = f"{server.url}/{REPO}.git/info/lfs/objects/batch"
    payload = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": len(data)}],
               "hash_algo": "sha256"}
    session = get_session()
    href = session.post(batch_url, json=payload).json()["objects"][0]["actions"]["upload"]["href"]
    assert session.put(href, content=os.urandom(4096)).status_code == 400
    assert session.put(href, content=data[:-1]).status_code == 400
    assert session.put(href.split("&sig=")[0] + "&sig=" + "0" * 64, content=data).status_code == 403
    assert "actions" in session.post(batch_url, json=payload).json()["objects"][0]
    assert not list((server.data_dir / "objects/lfs").glob(f"*/{oid}"))
    assert session.put(href, content=data).status_code == 200
    assert "actions" not in session.post(batch_url, json=payload).json()["objects"][0]


def test_chunked_and_malformed_requests(served):
    server, _api, _ = served
    data = os.urandom(70_000)
    oid = hashlib.sha256(data).hexdigest()
    batch = httpx.post(f"{server.url}/{REPO}.git/info/lfs/objects/batch",
                       json={"operation": "upload", "objects": [{"oid": oid, "size": len(data)}]}).json()
    href = batch["objects"][0]["actions"]["upload"]["href"]
    put = httpx.put(href, content=(data[i:i + 7000] for i in range(0, len(data), 7000)))  # chunked encoding
    assert put.status_code == 200 and put.request.headers.get("Transfer-Encoding") == "chunked"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    # Expect: 100-continue: the server asks for the body when it wants it...
    other = os.urandom(1000)
    oid = hashlib.sha256(other).hexdigest()
    batch = httpx.post(f"{server.url}/{REPO}.git/info/lfs/objects/batch",
                       json={"operation": "upload", "objects": [{"oid": oid, "size": len(other)}]}).json()
    target = httpx.URL(batch["objects"][0]["actions"]["upload"]["href"]).raw_path.decode()
    expect = f"Host: x\r\nContent-Length: {len(other)}\r\nExpect: 100-continue\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(f"PUT {target} HTTP/1.1\r\n{expect}".encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 100")
        sock.sendall(other)
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
    # ... and refuses without it, hanging up rather than waiting for a body that will not come.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(f"PUT {target.replace('sig=', 'sig=0')} HTTP/1.1\r\n{expect}".encode())
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 403") and b"connection: close" in answer.lower()


def test_in_process_hub_stops_its_connections(tmp_path, hf_client):
    hub = LocalHub(tmp_path / "d")
    client = httpx.Client()
    assert client.get(f"{hub.url}/api/models/a/b").status_code == 404  # a keep-alive connection now
    hub.stop()
    with pytest.raises(httpx.HTTPError):
        client.get(f"{hub.url}/api/models/a/b")
    client.close()
