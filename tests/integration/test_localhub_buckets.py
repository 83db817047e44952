"""The local Hub's Storage Buckets, driven by the real huggingface_hub client and hf_xet."""

from __future__ import annotations

import json
import os

import httpx
import pytest
from huggingface_hub import HfApi, HfFileSystem
from huggingface_hub.errors import BucketBatchError, BucketNotFoundError, HfHubHTTPError

from ckpt_localhub import api_bucket_files
from tests.conftest import RETRY_DELAY, RETRY_MAX_DELAY
from tests.helpers.localhub_fixtures import TOKEN, entries

USER = "local-user"
B = f"{USER}/ckpts"


@pytest.fixture
def hub(hub_server, xet_client):
    return hub_server(token=TOKEN)


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.url, token=TOKEN)


def _paths(api: HfApi, bucket: str, **kwargs) -> list[str]:
    return [f.path for f in api.list_bucket_tree(bucket, **kwargs)]


def test_create_info_list_settings_move_delete(api, hub):
    url = api.create_bucket("ckpts", private=True)
    assert url.bucket_id == B and url.url == f"{hub.url}/buckets/{B}"
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_bucket(B)
    assert exc.value.response.status_code == 409
    assert api.create_bucket(B, exist_ok=True) == url
    info = api.bucket_info(B)
    assert (info.id, info.private, info.size, info.total_files) == (B, True, 0, 0)
    api.create_bucket(f"{USER}/other")
    assert [b.id for b in api.list_buckets()] == [B, f"{USER}/other"]
    assert [b.id for b in api.list_buckets(search="oth")] == [f"{USER}/other"]
    api.update_bucket_settings(B, private=False)
    assert api.bucket_info(B).private is False
    api.move_bucket(B, f"{USER}/renamed")
    assert api.bucket_info(f"{USER}/renamed").id == f"{USER}/renamed"
    api.delete_bucket(f"{USER}/renamed")
    with pytest.raises(BucketNotFoundError):
        api.bucket_info(f"{USER}/renamed")
    api.delete_bucket(f"{USER}/renamed", missing_ok=True)


def test_batch_tree_paths_info_and_download_through_xet(api, hub, tmp_path, monkeypatch):
    api.create_bucket(B, private=True)
    weights = os.urandom(3 * 1024 * 1024 + 5)
    (tmp_path / "w.bin").write_bytes(weights)
    api.batch_bucket_files(B, add=[(str(tmp_path / "w.bin"), "step-1/w.bin"), (b"{}", "step-1/state.json"),
                                   (b"note", "README.md"), (b"x", "step-10/w.bin")])
    assert [e["status"] for e in entries(hub, "POST", "/v1/shards", listener="cas")] == [200]
    assert [e["status"] for e in entries(hub, "POST", f"/api/buckets/{B}/batch")] == [200]
    info = api.bucket_info(B)
    assert (info.size, info.total_files) == (len(weights) + 2 + 4 + 1, 4)
    assert _paths(api, B, recursive=False) == ["README.md", "step-1", "step-10"]
    assert _paths(api, B) == ["README.md", "step-1/state.json", "step-1/w.bin", "step-10/w.bin"]  # the Hub's default
    assert _paths(api, B, prefix="step-1", recursive=True) == ["step-1/state.json", "step-1/w.bin", "step-10/w.bin"]
    assert _paths(api, B, prefix="step-1/", recursive=False) == ["step-1/state.json", "step-1/w.bin"]
    monkeypatch.setattr(api_bucket_files, "TREE_PAGE", 2)  # pages: the client follows Link
    assert _paths(api, B, recursive=True) == ["README.md", "step-1/state.json", "step-1/w.bin", "step-10/w.bin"]
    assert len(entries(hub, "GET", f"/api/buckets/{B}/tree?recursive=true&cursor=")) == 1
    [w] = api.get_bucket_paths_info(B, ["step-1/w.bin", "missing"])
    assert (w.path, w.size, len(w.xet_hash)) == ("step-1/w.bin", len(weights), 64)
    api.download_bucket_files(B, [("step-1/w.bin", tmp_path / "out.bin"), ("README.md", tmp_path / "r.md")])
    assert (tmp_path / "out.bin").read_bytes() == weights and (tmp_path / "r.md").read_bytes() == b"note"
    recon = entries(hub, "GET", "/reconstructions/", listener="cas")
    assert recon and all(e["status"] == 200 for e in recon)
    api.batch_bucket_files(B, add=[(b"", "step-1/.complete")])  # hf_xet's shard of an empty file: no terms
    [empty] = api.get_bucket_paths_info(B, ["step-1/.complete"])
    assert empty.size == 0 and empty.xet_hash == "0" * 64
    listed = list(api.list_bucket_tree(B))
    hub.restart()  # the bucket, its index and its bytes are on disk
    api = HfApi(endpoint=hub.url, token=TOKEN)
    assert list(api.list_bucket_tree(B)) == listed
    api.download_bucket_files(B, [("step-1/w.bin", tmp_path / "again.bin")])
    assert (tmp_path / "again.bin").read_bytes() == weights


def test_resolve_answers_xet_headers_and_bridges_ranges(api, hub):
    api.create_bucket(B)
    data = os.urandom(100_000)
    api.batch_bucket_files(B, add=[(data, "a/w.bin")])
    [w] = api.get_bucket_paths_info(B, ["a/w.bin"])
    url = f"{hub.url}/buckets/{B}/resolve/a/w.bin"
    head = httpx.head(url)
    assert head.status_code == 302 and head.headers["X-Xet-Hash"] == w.xet_hash
    assert head.headers["X-Linked-Size"] == str(len(data))
    assert head.links["xet-auth"]["url"] == f"{hub.url}/api/buckets/{B}/xet-read-token"
    part = httpx.get(url, headers={"Range": "bytes=10-19"}, follow_redirects=True)
    assert part.status_code == 206 and part.content == data[10:20]
    assert entries(hub, "GET", f"/buckets/{B}/resolve/a/w.bin", listener="cdn")
    assert api.get_bucket_file_metadata(B, "a/w.bin").size == len(data)


def test_copies_by_xet_hash_send_no_bytes(api, hub, tmp_path):
    api.create_bucket(B)
    api.create_bucket(f"{USER}/release")
    data = os.urandom(2 * 1024 * 1024)
    api.batch_bucket_files(B, add=[(data, "step-3/w.bin"), (b"m", "step-3/manifest.json")])
    api.create_repo(f"{USER}/model")
    api.upload_file(path_or_fileobj=data[::-1], path_in_repo="w.bin", repo_id=f"{USER}/model")
    xorbs_before = len(entries(hub, "POST", "/v1/xorbs/", listener="cas"))
    shards_before = len(entries(hub, "POST", "/v1/shards", listener="cas"))
    api.copy_files(f"hf://buckets/{B}/step-3", f"hf://buckets/{USER}/release/")
    api.copy_files(f"hf://{USER}/model/w.bin", f"hf://buckets/{USER}/release/from-repo.bin")
    assert len(entries(hub, "POST", "/v1/xorbs/", listener="cas")) == xorbs_before
    assert len(entries(hub, "POST", "/v1/shards", listener="cas")) == shards_before
    assert _paths(api, f"{USER}/release", recursive=True) == ["from-repo.bin", "step-3/manifest.json",
                                                             "step-3/w.bin"]
    api.download_bucket_files(f"{USER}/release", [("step-3/w.bin", tmp_path / "a"), ("from-repo.bin", tmp_path / "b")])
    assert (tmp_path / "a").read_bytes() == data and (tmp_path / "b").read_bytes() == data[::-1]


def test_deletes_free_storage(api, hub, tmp_path):
    api.create_bucket(B)
    data = os.urandom(1024 * 1024)
    api.batch_bucket_files(B, add=[(data, "old/w.bin"), (b"kept", "new/w.bin")])
    store = hub.hub.hub.store
    [old] = api.get_bucket_paths_info(B, ["old/w.bin"])
    sha256 = store.buckets.files(B)["old/w.bin"]["sha256"]
    assert store.objects.lfs_size(sha256) == len(data)
    api.batch_bucket_files(B, delete=["old/w.bin"])
    assert _paths(api, B, recursive=True) == ["new/w.bin"]
    assert api.bucket_info(B).size == 4
    assert store.objects.lfs_size(sha256) is None and store.xet.file_record(old.xet_hash) is None
    kept = store.buckets.files(B)["new/w.bin"]["sha256"]
    api.create_bucket(f"{USER}/copy")
    api.copy_files(f"hf://buckets/{B}/new/w.bin", f"hf://buckets/{USER}/copy/w.bin")
    api.delete_bucket(B)
    assert store.objects.lfs_size(kept) == 4  # another bucket names it
    api.download_bucket_files(f"{USER}/copy", [("w.bin", tmp_path / "w.bin")])
    assert (tmp_path / "w.bin").read_bytes() == b"kept"
    api.delete_bucket(f"{USER}/copy")
    assert store.objects.lfs_size(kept) is None


def test_hf_file_system_and_the_hf_cli_on_buckets(api, hub, tmp_path):
    api.create_bucket(B)
    fs = HfFileSystem(endpoint=hub.url, token=TOKEN)
    fs.pipe(f"buckets/{B}/run/a.txt", b"alpha")
    assert fs.cat(f"buckets/{B}/run/a.txt") == b"alpha"
    assert fs.ls(f"buckets/{B}", detail=False) == [f"buckets/{B}/run"]
    fs.rm(f"buckets/{B}/run/a.txt")
    assert _paths(api, B, recursive=True) == []
    from tests.helpers.xet_fixtures import run_hf, xet_env

    env = xet_env(hub.url, tmp_path / "home", TOKEN)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "w.bin").write_bytes(b"weights")
    run_hf(["buckets", "sync", str(tmp_path / "src"), f"hf://buckets/{B}/synced"], env)
    listed = run_hf(["buckets", "list", B, "-R", "--quiet"], env).stdout.split()
    assert listed == ["synced/w.bin"]
    run_hf(["buckets", "cp", f"hf://buckets/{B}/synced/w.bin", str(tmp_path / "back.bin")], env)
    assert (tmp_path / "back.bin").read_bytes() == b"weights"


def test_anonymous_callers_read_public_buckets_only(api, hub):
    api.create_bucket(B, private=True)
    api.create_bucket(f"{USER}/public")
    api.batch_bucket_files(B, add=[(b"secret", "s.bin")])
    api.batch_bucket_files(f"{USER}/public", add=[(b"open", "o.bin")])
    anon = HfApi(endpoint=hub.url, token=False)
    assert anon.bucket_info(f"{USER}/public").private is False
    assert _paths(anon, f"{USER}/public") == ["o.bin"]
    for call in (lambda: anon.bucket_info(B), lambda: list(anon.list_bucket_tree(B)),
                 lambda: list(anon.get_bucket_paths_info(B, ["s.bin"]))):
        with pytest.raises(HfHubHTTPError) as exc:
            call()
        assert exc.value.response.status_code == 401
    assert httpx.get(f"{hub.url}/buckets/{B}/resolve/s.bin").status_code == 401
    assert httpx.get(f"{hub.url}/api/buckets/{B}/xet-read-token").status_code == 401
    assert [b.id for b in anon.list_buckets(namespace=USER)] == [f"{USER}/public"]
    with pytest.raises(HfHubHTTPError) as exc:
        anon.batch_bucket_files(f"{USER}/public", delete=["o.bin"])
    assert exc.value.response.status_code == 401
    assert httpx.post(f"{hub.url}/api/buckets/{USER}/new").status_code == 401
    assert _paths(api, f"{USER}/public") == ["o.bin"]


def test_a_bucket_write_token_reaches_nothing_else(api, hub):
    api.create_bucket(B, private=True)
    api.create_bucket(f"{USER}/other", private=True)
    api.batch_bucket_files(f"{USER}/other", add=[(b"other's bytes", "o.bin")])
    [other] = api.get_bucket_paths_info(f"{USER}/other", ["o.bin"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    grant = httpx.get(f"{hub.url}/api/buckets/{B}/xet-write-token", headers=auth).json()
    cas = {"Authorization": f"Bearer {grant['accessToken']}"}
    # The CAS reads nothing of another bucket with it, and the Hub takes it for no write at all.
    assert httpx.get(f"{grant['casUrl']}/v1/reconstructions/{other.xet_hash}", headers=cas).status_code == 404
    assert httpx.head(f"{grant['casUrl']}/v1/files/{other.xet_hash}", headers=cas).status_code == 404
    body = '{"type":"deleteFile","path":"o.bin"}\n'
    assert httpx.post(f"{hub.url}/api/buckets/{USER}/other/batch", content=body, headers=cas).status_code == 401
    # A Xet hash read elsewhere is no key: this bucket's uploads never registered it.
    with pytest.raises(BucketBatchError) as exc:
        api.batch_bucket_files(B, add=[_known(other.xet_hash, "stolen.bin")])
    assert exc.value.response.status_code == 422
    assert [f["path"] for f in exc.value.failures] == ["stolen.bin"]
    assert _paths(api, B) == []


def _known(xet_hash: str, path: str):
    """An add naming an already-uploaded Xet file (huggingface_hub skips the upload for it)."""
    from huggingface_hub._buckets import _BucketAddFile

    op = _BucketAddFile(source=b"", destination=path)
    op.xet_hash = xet_hash
    return op


def test_batch_reports_partial_failures_and_a_fault_fails_one_batch(api, hub):
    api.create_bucket(B)
    api.batch_bucket_files(B, add=[(b"content", "a.txt")])
    [a] = api.get_bucket_paths_info(B, ["a.txt"])
    with pytest.raises(BucketBatchError) as exc:
        api.batch_bucket_files(B, copy=[("bucket", B, a.xet_hash, "b.txt"), ("bucket", B, "0" * 64, "bogus.txt")])
    assert exc.value.response.status_code == 200 and [f["path"] for f in exc.value.failures] == ["bogus.txt"]
    assert _paths(api, B) == ["a.txt", "b.txt"]
    hub.set_faults([{"method": "POST", "path": f"^/api/buckets/{B}/batch$", "status": 503, "times": 1}])
    api.batch_bucket_files(B, delete=["b.txt"])  # the client retries a 503
    assert [e["status"] for e in entries(hub, "POST", f"/api/buckets/{B}/batch")][-2:] == [503, 200]
    assert _paths(api, B) == ["a.txt"]
    hub.set_faults([{"method": "GET", "path": f"^/api/buckets/{B}/tree", "tree_escape": "../escape.bin"}])
    assert _paths(api, B) == ["a.txt", "../escape.bin"]
    assert _paths(api, B) == ["a.txt"]


def test_the_change_feed_refreshes_a_followed_listing(api, hub, monkeypatch):
    import time

    from huggingface_hub import _bucket_live_follow
    from huggingface_hub._bucket_live_follow import BUCKET_FOLLOWERS

    # A feed session is held open HOLD_S (2 s) waiting for a change, and the follower waits 1 s
    # before the next one: the same sessions, from the tests' backoff settings.
    monkeypatch.setattr(api_bucket_files, "HOLD_S", RETRY_MAX_DELAY)
    monkeypatch.setattr(_bucket_live_follow, "RECONNECT_MIN_DELAY", RETRY_DELAY)
    api.create_bucket(B)
    api.batch_bucket_files(B, add=[(b"data", "data/a.txt")])
    fs = HfFileSystem(endpoint=hub.url, token=TOKEN, skip_instance_cache=True, live_follow=True)
    try:
        assert fs.ls(f"buckets/{B}/data", detail=False) == [f"buckets/{B}/data/a.txt"]  # cached from now on
        follower, _ = BUCKET_FOLLOWERS[(fs.endpoint, fs.token, B)]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not follower.subscribed and follower.is_alive():
            time.sleep(0.1)
        assert follower.subscribed  # the feed answered "ready": the listing is kept fresh by it, not re-read
        assert fs.ls(f"buckets/{B}/data", detail=False) == [f"buckets/{B}/data/a.txt"]  # cached again after the
        # follower's first reconcile
        api.batch_bucket_files(B, add=[(b"data", "data/b.txt")])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(fs.ls(f"buckets/{B}/data", detail=False)) < 2:
            time.sleep(0.2)
        assert fs.ls(f"buckets/{B}/data", detail=False) == [f"buckets/{B}/data/a.txt", f"buckets/{B}/data/b.txt"]
        assert entries(hub, "GET", f"/api/buckets/{B}/events")
    finally:
        for key, (follower, subscribers) in list(BUCKET_FOLLOWERS.items()):
            follower.stop()
            subscribers.clear()
            del BUCKET_FOLLOWERS[key]
    stale = httpx.get(f"{hub.url}/api/buckets/{B}/events", params={"cursor": "0.1"},
                      headers={"Authorization": f"Bearer {TOKEN}"})
    assert stale.headers["Content-Type"].startswith("text/event-stream") and stale.text.startswith("event: reset")


def _feed(hub, bucket: str, **params) -> httpx.Response:
    return httpx.get(f"{hub.url}/api/buckets/{bucket}/events", params=params, timeout=30)


def test_a_malformed_or_ahead_cursor_is_400_and_a_known_one_replays(api, hub, monkeypatch):
    monkeypatch.setattr(api_bucket_files, "HOLD_S", 0)
    public = f"{USER}/public"
    api.create_bucket(public)
    api.batch_bucket_files(public, add=[(b"one", "a.txt")])
    ready = _feed(hub, public)  # anonymous: the bucket is public
    assert ready.status_code == 200
    cursor = ready.text.split('"cursor": "')[1].split('"')[0]
    epoch, _, seq = cursor.partition(".")
    for bad in (f"{epoch}.\u00b2", f"{epoch}.\u0663", f"{epoch}." + "9" * 5000, f"{epoch}", "x.1", f"{epoch}.-1"):
        answer = _feed(hub, public, cursor=bad)
        assert answer.status_code == 400, (bad[:40], answer.status_code, answer.text[:200])
        assert "cursor" in answer.json()["error"]
    ahead = _feed(hub, public, cursor=f"{epoch}.{int(seq) + 5}")
    assert ahead.status_code == 400 and "ahead" in ahead.json()["error"]
    api.batch_bucket_files(public, add=[(b"two", "b.txt")])
    replay = _feed(hub, public, cursor=cursor)
    assert replay.status_code == 200 and '"path": "b.txt"' in replay.text and "a.txt" not in replay.text
    assert _feed(hub, public, cursor="0.1").text.startswith("event: reset")  # another run's cursor


def test_a_batch_body_past_its_byte_bound_is_413_with_the_bound(api, hub):
    api.create_bucket(B)
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-ndjson"}
    line = json.dumps({"type": "deleteFile", "path": "gone.bin", "pad": "x" * 60_000}).encode() + b"\n"
    count = api_bucket_files.MAX_BATCH_BYTES // len(line) + 2  # far fewer lines than MAX_BATCH_LINES

    def body():
        for _ in range(count):
            yield line

    for content in (body(), b"".join(body())):  # read as it streams; declared by Content-Length
        answer = httpx.post(f"{hub.url}/api/buckets/{B}/batch", content=content, headers=auth, timeout=60)
        assert answer.status_code == 413, answer.text[:200]
        assert str(api_bucket_files.MAX_BATCH_BYTES) in answer.json()["error"]
    assert count < api_bucket_files.MAX_BATCH_LINES
    small = httpx.post(f"{hub.url}/api/buckets/{B}/batch", content=line * 3, headers=auth)
    assert small.status_code == 200  # the same lines, fewer of them: the bound is the bytes
    huge = json.dumps({"type": "addFile", "path": "a", "xetHash": "0" * 64, "mtime": 10 ** 30}).encode()
    digits = b'{"type": "addFile", "path": "a", "xetHash": "' + b"0" * 64 + b'", "mtime": ' + b"9" * 5000 + b"}"
    for content in (huge, digits):
        answer = httpx.post(f"{hub.url}/api/buckets/{B}/batch", content=content, headers=auth)
        assert answer.status_code == 400, answer.text[:200]
