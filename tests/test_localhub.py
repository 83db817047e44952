"""The local Hub, driven by the real huggingface_hub client and ``hf`` CLI over HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationCopy,
    CommitOperationDelete,
    HfApi,
    RepoFile,
    RepoFolder,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    snapshot_download,
)
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from ckpt_action.localhub import FaultFileError, FaultSet, LocalHub
from tests.localhub_fixtures import *  # noqa: F403 - the fixtures under test

TOKEN = "hf_local_test_token"
REPO = "local-user/ckpts"


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def make_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def entries(server, method: str | None = None, contains: str = "") -> list[dict]:
    return [e for e in server.log_entries()
            if (method is None or e["method"] == method) and contains in e["path"]]


@pytest.fixture
def served(hub_server, hf_client):
    """A subprocess hub (no token) with one repo holding a regular and an LFS file."""
    server = hub_server()
    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    weights = os.urandom(5000)
    api.create_commit(REPO, [CommitOperationAdd("model/weights.bin", weights),
                             CommitOperationAdd("model/config.json", b'{"a": 1}')], commit_message="first")
    return server, api, weights


# ---------------------------------------------------------------- repos, commits, trees


def test_create_repo_keeps_private_flag(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    url = api.create_repo("local-user/secret", private=True)
    assert url.repo_id == "local-user/secret"
    api.create_repo("local-user/open")
    assert api.repo_info("local-user/secret").private is True
    info = api.repo_info("local-user/open")
    assert info.private is False and info.id == "local-user/open" and len(info.sha or "") == 40
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_repo("local-user/open")
    assert exc.value.response.status_code == 409
    api.create_repo("local-user/open", exist_ok=True)
    api.update_repo_settings("local-user/open", private=True)
    assert api.repo_info("local-user/open").private is True
    api.delete_repo("local-user/open")
    assert not api.repo_exists("local-user/open")


def test_upload_folder_with_delete_patterns(local_hub, tmp_path):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    first = make_folder(tmp_path / "one", {"a.txt": b"a", "ckpt/x.bin": os.urandom(100),
                                            "ckpt/y.bin": os.urandom(100)})
    api.upload_folder(folder_path=first, repo_id=REPO)
    assert set(api.list_repo_files(REPO)) == {".gitattributes", "a.txt", "ckpt/x.bin", "ckpt/y.bin"}
    second = make_folder(tmp_path / "two", {"ckpt/z.bin": os.urandom(100), "b.txt": b"b"})
    info = api.upload_folder(folder_path=second, repo_id=REPO, delete_patterns=["ckpt/*"])
    assert set(api.list_repo_files(REPO)) == {".gitattributes", "a.txt", "b.txt", "ckpt/z.bin"}
    assert api.repo_info(REPO).sha == info.oid
    # Unchanged files are skipped by the client thanks to the preupload oids.
    again = api.upload_folder(folder_path=second, repo_id=REPO)
    assert again.oid == info.oid


def test_copy_lfs_and_regular_sources(local_hub, hf_client):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    big = os.urandom(20000)
    api.create_commit(REPO, [CommitOperationAdd("w.safetensors", big), CommitOperationAdd("c.json", b"{}")],
                      commit_message="add")
    puts_before = local_hub.access_log.read_text().count('"PUT"')
    api.create_commit(REPO, [CommitOperationCopy("w.safetensors", "copy/w.safetensors"),
                             CommitOperationCopy("c.json", "copy/c.json")], commit_message="copy")
    assert local_hub.access_log.read_text().count('"PUT"') == puts_before  # an LFS copy re-uses the stored object
    info = {f.path: f for f in api.get_paths_info(REPO, ["w.safetensors", "copy/w.safetensors", "copy/c.json"])
            if isinstance(f, RepoFile)}
    copied, original = info["copy/w.safetensors"].lfs, info["w.safetensors"].lfs
    assert copied is not None and original is not None and copied.sha256 == original.sha256
    assert info["copy/c.json"].lfs is None
    path = hf_hub_download(REPO, "copy/w.safetensors", endpoint=local_hub.url, token=TOKEN, cache_dir=hf_client)
    assert Path(path).read_bytes() == big


def test_parent_commit_and_stale_parent(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    head = api.repo_info(REPO).sha
    new = api.create_commit(REPO, [CommitOperationAdd("a", b"1")], commit_message="one", parent_commit=head)
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_commit(REPO, [CommitOperationAdd("b", b"2")], commit_message="two", parent_commit=head)
    assert exc.value.response.status_code == 412
    assert "A commit has happened since. Please refresh and try again." in str(exc.value)
    assert api.repo_info(REPO).sha == new.oid


def test_delete_missing_file_is_entry_not_found(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    with pytest.raises(EntryNotFoundError):
        api.create_commit(REPO, [CommitOperationDelete("nope.txt")], commit_message="del")
    api.create_commit(REPO, [CommitOperationAdd("d/a", b"1"), CommitOperationAdd("d/b", b"2")], commit_message="x")
    api.create_commit(REPO, [CommitOperationDelete("d/")], commit_message="rm folder")
    assert api.list_repo_files(REPO) == [".gitattributes"]


def test_tree_listing_and_paths_info(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.create_commit(REPO, [CommitOperationAdd("ckpt/1/w.bin", os.urandom(64)),
                             CommitOperationAdd("ckpt/1/meta.json", b"{}"),
                             CommitOperationAdd("top.txt", b"top")], commit_message="1")
    top = {e.path: e for e in api.list_repo_tree(REPO)}
    assert set(top) == {".gitattributes", "ckpt", "top.txt"}
    folder = top["ckpt"]
    assert isinstance(folder, RepoFolder)
    tree_before = folder.tree_id
    deep = {e.path for e in api.list_repo_tree(REPO, recursive=True)}
    assert {"ckpt", "ckpt/1", "ckpt/1/w.bin", "ckpt/1/meta.json"} <= deep
    sub = {e.path for e in api.list_repo_tree(REPO, path_in_repo="ckpt/1")}
    assert sub == {"ckpt/1/w.bin", "ckpt/1/meta.json"}
    expanded = list(api.list_repo_tree(REPO, path_in_repo="ckpt/1", expand=True))
    assert all(e.last_commit is not None and e.last_commit.title == "1" for e in expanded)
    # Unchanged subtrees keep their oid: commits share them.
    api.create_commit(REPO, [CommitOperationAdd("other.txt", b"o")], commit_message="2")
    assert [e.tree_id for e in api.list_repo_tree(REPO) if isinstance(e, RepoFolder)] == [tree_before]
    info = api.get_paths_info(REPO, ["ckpt/1/w.bin", "ckpt", "missing"])
    kinds = {type(i).__name__: i.path for i in info}
    assert kinds == {"RepoFile": "ckpt/1/w.bin", "RepoFolder": "ckpt"}
    with pytest.raises(EntryNotFoundError):
        list(api.list_repo_tree(REPO, path_in_repo="missing"))


def test_tree_pagination_over_1000_entries(hub_server, hf_client):
    server = hub_server()
    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    ops = [CommitOperationAdd(f"many/f{i:05d}.txt", str(i).encode()) for i in range(2100)]
    api.create_commit(REPO, ops, commit_message="many")
    before = len(entries(server, "GET", "/tree/"))
    listed = [e.path for e in api.list_repo_tree(REPO, path_in_repo="many")]
    assert len(listed) == 2100 and len(set(listed)) == 2100
    tree_calls = entries(server, "GET", "/tree/")[before:]
    assert len(tree_calls) == 3 and sum("cursor=" in e["path"] for e in tree_calls) == 2
    assert len(list(api.list_repo_tree(REPO, recursive=True))) == 2100 + 2  # + .gitattributes, many/


def test_refs_tags_branches_and_commit_pages(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    for i in range(55):
        api.create_commit(REPO, [CommitOperationAdd("step.txt", str(i).encode())], commit_message=f"step {i}",
                          commit_description=f"desc {i}")
    commits = api.list_repo_commits(REPO)
    assert len(commits) == 56
    assert commits[0].title == "step 54" and commits[0].message == "desc 54" and commits[0].authors == ["local-user"]
    assert commits[-1].title == "initial commit"
    head = commits[0].commit_id
    api.create_tag(REPO, tag="v1", revision=commits[5].commit_id)
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_tag(REPO, tag="v1")
    assert exc.value.response.status_code == 409
    api.create_branch(REPO, branch="dev", revision="v1")
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_branch(REPO, branch="dev")
    assert exc.value.response.status_code == 409
    refs = api.list_repo_refs(REPO)
    assert {(b.name, b.ref, b.target_commit) for b in refs.branches} == {
        ("main", "refs/heads/main", head), ("dev", "refs/heads/dev", commits[5].commit_id)}
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1", commits[5].commit_id)]
    assert refs.converts == []
    assert api.list_repo_commits(REPO, revision="dev")[0].commit_id == commits[5].commit_id
    # Ref names with a slash travel URL-quoted.
    api.create_branch(REPO, branch="runs/a")
    api.create_commit(REPO, [CommitOperationAdd("only-on-run.txt", b"r")], commit_message="r", revision="runs/a")
    assert "only-on-run.txt" in [e.path for e in api.list_repo_tree(REPO, revision="runs/a")]
    assert "only-on-run.txt" not in api.list_repo_files(REPO)
    api.delete_branch(REPO, branch="runs/a")
    api.delete_tag(REPO, tag="v1")
    api.delete_branch(REPO, branch="dev")
    refs = api.list_repo_refs(REPO)
    assert refs.tags == [] and [b.name for b in refs.branches] == ["main"]


def test_concurrent_commits_are_serialized(local_hub):
    api = HfApi(endpoint=local_hub.url, token=TOKEN)
    api.create_repo(REPO)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(8):
                api.create_commit(REPO, [CommitOperationAdd(f"w{n}/{i}", b"x")], commit_message=f"{n}-{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(api.list_repo_commits(REPO)) == 25
    assert len([f for f in api.list_repo_files(REPO) if f.startswith("w")]) == 24


# ---------------------------------------------------------------- downloads


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


def test_resolve_headers_and_ranges(served):
    server, api, weights = served
    url = hf_hub_url(REPO, "model/weights.bin", endpoint=server.url)
    head = httpx.head(url)
    assert head.status_code == 200
    assert head.headers["X-Linked-Etag"] == f'"{hashlib.sha256(weights).hexdigest()}"'
    assert head.headers["X-Linked-Size"] == "5000" and head.headers["Accept-Ranges"] == "bytes"
    assert head.headers["X-Repo-Commit"] == api.repo_info(REPO).sha
    part = httpx.get(url, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == weights[100:200]
    assert part.headers["Content-Range"] == "bytes 100-199/5000"
    tail = httpx.get(url, headers={"Range": "bytes=4990-"})
    assert tail.status_code == 206 and tail.content == weights[4990:]
    assert httpx.get(url, headers={"Range": "bytes=6000-"}).status_code == 416
    config = httpx.head(hf_hub_url(REPO, "model/config.json", endpoint=server.url))
    blob_oid = hashlib.sha1(b'blob 8\0{"a": 1}').hexdigest()  # noqa: S324
    assert config.headers["ETag"] == f'"{blob_oid}"' and "X-Linked-Etag" not in config.headers
    missing = httpx.head(hf_hub_url(REPO, "nope", endpoint=server.url))
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"
    assert missing.headers["X-Repo-Commit"] == head.headers["X-Repo-Commit"]
    assert httpx.get(f"{server.url}/api/models/{REPO}/xet-write-token/main").status_code == 404
    assert httpx.get(f"{server.url}/api/agent-harnesses").status_code == 404


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
    subprocess.run(["hf", "repos", "create", REPO, "--private"], env=env, check=True, capture_output=True)
    up = subprocess.run(["hf", "upload", REPO, str(src), ".", "--commit-message", "cli upload"],
                        env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stderr
    puts = entries(server, "PUT")
    assert [e["bytes_in"] for e in puts] == [size] and puts[0]["status"] == 200
    down = subprocess.run(["hf", "download", REPO, "--local-dir", str(tmp_path / "dst")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr
    assert sha256_file(tmp_path / "dst/model.safetensors") == sha256_file(src / "model.safetensors")
    assert (tmp_path / "dst/notes.txt").read_text() == "hello\n"
    gets = [e for e in entries(server, "GET", "/resolve/") if "model.safetensors" in e["path"]]
    assert gets[-1]["bytes_out"] == size


# ---------------------------------------------------------------- persistence and crash safety


def test_restart_keeps_everything_and_ignores_torn_temp_files(served, hf_client):
    server, api, weights = served
    api.create_repo("local-user/private", private=True)
    api.create_tag(REPO, tag="keep")
    refs = api.list_repo_refs(REPO)
    torn = server.data_dir / "tmp" / "torn-write"
    torn.write_bytes(b"half a tree obj")
    server.restart()
    api = HfApi(endpoint=server.url, token=False)
    assert api.list_repo_refs(REPO) == refs
    assert api.repo_info("local-user/private").private is True
    path = hf_hub_download(REPO, "model/weights.bin", revision="keep", endpoint=server.url, token=False,
                           cache_dir=hf_client, force_download=True)
    assert Path(path).read_bytes() == weights
    assert not torn.exists()


def test_commit_with_missing_lfs_object_is_refused(served):
    server, api, _ = served
    head = api.repo_info(REPO).sha
    body = "\n".join(json.dumps(line) for line in [
        {"key": "header", "value": {"summary": "bad", "description": ""}},
        {"key": "file", "value": {"path": "ok.txt", "content": base64.b64encode(b"x").decode(),
                                  "encoding": "base64"}},
        {"key": "lfsFile", "value": {"path": "ghost.bin", "algo": "sha256", "oid": "ab" * 32, "size": 10}},
    ])
    r = httpx.post(f"{server.url}/api/models/{REPO}/commit/main", content=body,
                   headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 400 and "never uploaded" in r.json()["error"]
    assert api.repo_info(REPO).sha == head
    copy = body.replace(', "size": 10', "")
    assert httpx.post(f"{server.url}/api/models/{REPO}/commit/main", content=copy).status_code == 400
    assert api.repo_info(REPO).sha == head


def test_server_killed_during_upload_keeps_nothing_partial(served):
    import socket

    server, api, _ = served
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


# ---------------------------------------------------------------- auth and access log


def test_auth(hub_server, hub_env, hf_client):
    server = hub_server(token=TOKEN)
    owner = HfApi(endpoint=server.url, token=TOKEN)
    owner.create_repo("local-user/pub")
    owner.create_repo("local-user/priv", private=True)
    owner.upload_file(path_or_fileobj=b"data", path_in_repo="f.txt", repo_id="local-user/pub")
    owner.upload_file(path_or_fileobj=b"data", path_in_repo="f.txt", repo_id="local-user/priv")
    assert owner.whoami()["name"] == "local-user"

    wrong = HfApi(endpoint=server.url, token="hf_wrong")
    with pytest.raises(HfHubHTTPError) as exc:
        wrong.repo_info("local-user/pub")
    assert exc.value.response.status_code == 401 and "Invalid credentials" in str(exc.value)
    with pytest.raises(HfHubHTTPError):
        wrong.whoami()

    anon = HfApi(endpoint=server.url, token=False)
    assert anon.repo_info("local-user/pub").id == "local-user/pub"
    path = hf_hub_download("local-user/pub", "f.txt", endpoint=server.url, token=False, cache_dir=hf_client)
    assert Path(path).read_bytes() == b"data"
    with pytest.raises(RepositoryNotFoundError):
        anon.repo_info("local-user/priv")
    for write in (lambda: anon.create_repo("local-user/new"),
                  lambda: anon.upload_file(path_or_fileobj=b"x", path_in_repo="g", repo_id="local-user/pub"),
                  lambda: anon.create_tag("local-user/pub", tag="t")):
        with pytest.raises(HfHubHTTPError) as exc:
            write()
        assert exc.value.response.status_code == 401
    who = subprocess.run(["hf", "auth", "whoami"], env=hub_env(server), capture_output=True, text=True)
    assert who.returncode == 0 and "local-user" in who.stdout
    bad = subprocess.run(["hf", "auth", "whoami"], env=hub_env(server, token="hf_wrong"),
                         capture_output=True, text=True)
    assert bad.returncode != 0


def test_access_log_counts_requests_and_bytes(hub_server, hf_client):
    server = hub_server()
    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    data = os.urandom(123_456)
    api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=REPO)
    log = server.log_entries()
    assert {"ts", "method", "path", "status", "bytes_in", "bytes_out", "ms"} <= set(log[0])
    assert next(e["path"] for e in log if e["method"] == "POST") == "/api/repos/create"
    puts = [e for e in log if e["method"] == "PUT"]
    assert len(puts) == 1 and puts[0]["bytes_in"] == len(data) and puts[0]["status"] == 200
    assert len([e for e in log if "/commit/" in e["path"]]) == 1
    hf_hub_download(REPO, "w.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    gets = entries(server, "GET", "/resolve/")
    assert len(gets) == 1 and gets[0]["bytes_out"] == len(data) and gets[0]["status"] == 200


# ---------------------------------------------------------------- faults


def test_fault_status_with_retry_after_is_retried(served):
    server, api, _ = served
    server.set_faults([{"method": "POST", "path": "/preupload/", "status": 503, "times": 2, "retry_after": 0}])
    api.create_commit(REPO, [CommitOperationAdd("new.txt", b"n")], commit_message="retried")
    pre = entries(server, "POST", "/preupload/")
    assert [e["status"] for e in pre[-3:]] == [503, 503, 200]
    assert "new.txt" in api.list_repo_files(REPO)
    # The plain commit POST is not retried by the client: the fault surfaces, then clears.
    server.set_faults([{"method": "POST", "path": "/commit/", "status": 503, "times": 1}])
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_commit(REPO, [CommitOperationAdd("n2.txt", b"n")], commit_message="fails")
    assert exc.value.response.status_code == 503
    api.create_commit(REPO, [CommitOperationAdd("n2.txt", b"n")], commit_message="works")


def test_fault_reset_on_download_resumes_with_range(served, hf_client):
    server, api, _ = served
    # The client only keeps whole 10 MB chunks, so a resume needs a cut past the first one.
    big = os.urandom(1 << 20) * 12
    api.upload_file(path_or_fileobj=big, path_in_repo="big.bin", repo_id=REPO)
    cut = 11 * (1 << 20) + 5
    server.set_faults([{"method": "GET", "path": "/resolve/", "reset": cut}])
    path = hf_hub_download(REPO, "big.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    assert sha256_file(path) == hashlib.sha256(big).hexdigest()
    gets = entries(server, "GET", "/resolve/")
    assert [e["status"] for e in gets] == ["reset", 206]
    assert gets[0]["bytes_out"] == cut and gets[1]["bytes_out"] == len(big) - 10 * (1 << 20)


def test_fault_reset_on_small_download_restarts(served, hf_client):
    server, _api, weights = served
    server.set_faults([{"method": "GET", "path": "/resolve/", "reset": 1000}])
    path = hf_hub_download(REPO, "model/weights.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    assert Path(path).read_bytes() == weights
    assert [e["status"] for e in entries(server, "GET", "/resolve/")] == ["reset", 200]


def test_fault_reset_on_upload_put_is_retried(served):
    server, api, _ = served
    data = os.urandom(50_000)
    server.set_faults([{"method": "PUT", "path": "/localhub-lfs/", "reset": 1000}])
    before = len(entries(server, "PUT"))
    api.upload_file(path_or_fileobj=data, path_in_repo="up.bin", repo_id=REPO)
    puts = entries(server, "PUT")[before:]
    assert puts[0]["status"] == "reset" and puts[0]["bytes_in"] == 1000
    assert puts[1]["status"] == 200 and puts[1]["bytes_in"] == len(data)
    assert "up.bin" in api.list_repo_files(REPO)


def test_fault_delay(served):
    server, api, _ = served
    server.set_faults([{"method": "GET", "path": f"/api/models/{REPO}$", "delay_s": 1.0}])
    started = time.monotonic()
    assert api.repo_info(REPO).id == REPO
    assert time.monotonic() - started >= 1.0
    assert entries(server, "GET", f"/api/models/{REPO}")[-1]["ms"] >= 1000


def test_fault_corrupt_flips_a_byte(served, hf_client):
    server, _api, weights = served
    server.set_faults([{"method": "GET", "path": "/resolve/", "corrupt": True}])
    path = hf_hub_download(REPO, "model/weights.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    got = Path(path).read_bytes()
    assert len(got) == len(weights) and got != weights
    assert sum(a != b for a, b in zip(got, weights, strict=True)) == 1


def test_fault_tree_escape_is_refused_by_client(served, tmp_path):
    server, api, _ = served
    server.set_faults([{"path": "/tree/", "tree_escape": "../evil.bin", "times": -1}])
    assert "../evil.bin" in [e.path for e in api.list_repo_tree(REPO, recursive=True)]
    with pytest.raises(ValueError, match=r"cannot contain a '\.\.' path segment"):
        snapshot_download(REPO, endpoint=server.url, token=False, local_dir=tmp_path / "out")
    assert not (tmp_path / "evil.bin").exists()
    server.set_faults([{"method": "POST", "path": "/paths-info/", "tree_escape": "/abs/x"}])
    assert "/abs/x" in [e.path for e in api.get_paths_info(REPO, ["model"])]


def test_fault_hostile_etag(served):
    server, _api, _ = served
    server.set_faults([{"method": "HEAD", "path": "/resolve/", "etag": '"../../../x"'}])
    meta = get_hf_file_metadata(hf_hub_url(REPO, "model/weights.bin", endpoint=server.url), token=False)
    assert meta.etag == "../../../x"


def test_faults_reload_at_runtime(served):
    server, api, _ = served
    server.set_faults([{"method": "GET", "path": "/refs", "status": 500, "times": -1}])
    for _ in range(2):
        with pytest.raises(HfHubHTTPError):
            api.list_repo_refs(REPO)
    server.faults_path.write_text("{not json")
    with pytest.raises(HfHubHTTPError):
        api.list_repo_refs(REPO)  # a bad edit keeps the previous rules
    assert "keeping previous fault rules" in server.stderr_path.read_text()
    server.set_faults([])
    assert [b.name for b in api.list_repo_refs(REPO).branches] == ["main"]


def test_bad_faults_file_is_a_startup_error(tmp_path):
    faults = tmp_path / "faults.json"
    faults.write_text('[{"path": "(", "status": 500}]')
    proc = subprocess.run([sys.executable, "-m", "ckpt_action.localhub", "--data-dir", str(tmp_path / "d"),
                           "--faults", str(faults)], capture_output=True, text=True, timeout=30,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "bad 'path' regex" in proc.stderr


@pytest.mark.parametrize("text,message", [
    ("{}", "expected a JSON list"),
    ('[{"path": "x"}]', "needs one of"),
    ('[{"path": "x", "status": 503, "times": 0}]', "'times'"),
    ('[{"path": "x", "reset": -1}]', "'reset'"),
    ('[{"path": "x", "bogus": 1, "status": 500}]', "unknown key"),
])
def test_fault_file_validation(tmp_path, text, message):
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(FaultFileError, match=message):
        FaultSet(path)


def test_fault_rules_fire_in_order_and_count(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"method": "GET", "path": "/resolve/", "reset": 10, "times": 2},
                                {"path": "/resolve/", "corrupt": True}]))
    faults = FaultSet(path)
    assert faults.take("HEAD", "/a/b/resolve/main/x") is None  # corrupt never matches a HEAD
    assert [getattr(faults.take("GET", "/a/b/resolve/main/x"), "index", None) for _ in range(4)] == [0, 0, 1, None]


def test_local_hub_context_manager(tmp_path, hf_client):
    with LocalHub(tmp_path / "d", token=TOKEN) as hub:
        assert hub.url == f"http://127.0.0.1:{hub.port}"
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
    with LocalHub(tmp_path / "d", token=TOKEN) as hub:
        assert HfApi(endpoint=hub.url, token=TOKEN).repo_exists(REPO)


def test_cli_prints_url_first_and_stops_on_sigterm(tmp_path):
    cmd = [sys.executable, "-m", "ckpt_action.localhub", "--data-dir", str(tmp_path / "d"), "--port", "0",
           "--port-file", str(tmp_path / "port")]
    cwd = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first == f"http://127.0.0.1:{int((tmp_path / 'port').read_text())}"
        assert httpx.get(f"{first}/api/models/a/b").status_code == 404
        # A second server on the same data dir is refused with a one-line error.
        other = subprocess.run(cmd[:-4], cwd=cwd, capture_output=True, text=True, timeout=30)
        assert other.returncode != 0 and "in use by another local hub" in other.stderr
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
