"""The local Hub's injected faults, seen through the real huggingface_hub client (the fault
rules themselves, without a server: tests/unit/test_localhub_faults.py)."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, get_hf_file_metadata, hf_hub_download, hf_hub_url, snapshot_download
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import parse_ratelimit_headers

from tests.helpers.localhub_fixtures import REPO, entries, sha256_file


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


def test_rate_limit_headers_as_the_hub_sends_them(served):
    server, _api, _ = served
    refs = f"{server.url}/api/models/{REPO}/refs"
    server.set_faults([{"method": "GET", "path": "/refs$", "ratelimit_reset": 55}])
    first = httpx.get(refs)
    assert first.status_code == 429 and "Retry-After" not in first.headers
    assert first.headers["RateLimit"] == '"api";r=0;t=55'
    assert first.headers["RateLimit-Policy"] == '"fixed window";"api";q=500;w=300'
    info = parse_ratelimit_headers(first.headers)
    assert info is not None and (info.remaining, info.reset_in_seconds, info.limit, info.window_seconds) == (
        0, 55, 500, 300)
    # The window stays shut for every request until it ends, counting down.
    again = httpx.get(refs)
    assert again.status_code == 429 and 50 <= int(again.headers["RateLimit"].rsplit("=", 1)[1]) <= 55
    server.set_faults([{"path": "/refs$", "ratelimit_reset": 30, "retry_after": 31, "ratelimit_quota": 1000,
                        "ratelimit_window": 60, "status": 503}])
    other = httpx.get(refs)
    assert other.status_code == 503 and other.headers["Retry-After"] == "31"
    assert other.headers["RateLimit-Policy"] == '"fixed window";"api";q=1000;w=60'
    # A window that ends lets requests through again (times counts windows, default 1).
    server.set_faults([{"path": "/refs$", "ratelimit_reset": 1}])
    assert httpx.get(refs).status_code == 429
    deadline = time.monotonic() + 15
    while (status := httpx.get(refs).status_code) == 429 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 200


def test_the_client_waits_for_the_announced_reset(served):
    """huggingface_hub sleeps until the window ends (not 1 s, as its backoff would): one 429, then success."""
    server, api, _ = served
    server.set_faults([{"method": "POST", "path": "/preupload/", "ratelimit_reset": 2}])
    api.create_commit(REPO, [CommitOperationAdd("later.txt", b"l")], commit_message="after the window")
    assert [e["status"] for e in entries(server, "POST", "/preupload/")][-2:] == [429, 200]
    assert "later.txt" in api.list_repo_files(REPO)


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
    # The rule passes over the Hub's redirect and cuts the bytes, on the CDN, where the client resumes.
    assert [(e["status"], e["listener"]) for e in gets] == [("reset", "cdn"), (206, "cdn")]
    assert gets[0]["bytes_out"] == cut and gets[1]["bytes_out"] == len(big) - 10 * (1 << 20)


def test_fault_reset_on_small_download_restarts(served, hf_client):
    server, _api, weights = served
    server.set_faults([{"method": "GET", "path": "/resolve/", "reset": 1000}])
    path = hf_hub_download(REPO, "model/weights.bin", endpoint=server.url, token=False, cache_dir=hf_client)
    assert Path(path).read_bytes() == weights
    assert [e["status"] for e in entries(server, "GET", "/resolve/")] == ["reset", 200]


def test_a_status_fault_hits_the_redirect_itself(served, hf_client):
    server, _api, weights = served
    server.set_faults([{"method": "HEAD", "path": "/resolve/", "status": 500, "times": 1}])
    with pytest.raises(HfHubHTTPError):
        get_hf_file_metadata(hf_hub_url(REPO, "model/weights.bin", endpoint=server.url), token=False)
    meta = get_hf_file_metadata(hf_hub_url(REPO, "model/weights.bin", endpoint=server.url), token=False)
    assert meta.size == len(weights)


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
    server.set_faults([{"method": "GET", "path": f"/api/models/{REPO}$", "delay_s": 0.25}])
    assert api.repo_info(REPO).id == REPO
    # No wait needed: the line is written before the answer's last byte leaves.
    assert entries(server, "GET", f"/api/models/{REPO}")[-1]["ms"] >= 250


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


def test_faults_reload_at_runtime(served, capsys):
    server, api, _ = served
    server.set_faults([{"method": "GET", "path": "/refs", "status": 500, "times": -1}])
    for _ in range(2):
        with pytest.raises(HfHubHTTPError):
            api.list_repo_refs(REPO)
    server.faults_path.write_text("{not json")
    with pytest.raises(HfHubHTTPError):
        api.list_repo_refs(REPO)  # a bad edit keeps the previous rules
    assert "keeping previous fault rules" in capsys.readouterr().err
    server.set_faults([])
    assert [b.name for b in api.list_repo_refs(REPO).branches] == ["main"]
