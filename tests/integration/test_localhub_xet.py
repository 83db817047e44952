"""The local Hub on the Xet path, driven by the real hf_xet client (huggingface_hub and ``hf``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, hf_hub_download, hf_hub_url

from tests.helpers.localhub_fixtures import REPO, TOKEN, entries
from tests.helpers.xet_fixtures import cas_bytes_in, run_hf, xet_env


def _no_lfs_batch(hub) -> None:
    assert entries(hub, contains="/info/lfs/objects/batch") == []
    assert entries(hub, "PUT", "/localhub-lfs/") == []


def test_hfapi_uploads_through_xorbs_and_a_shard_and_lists_the_xet_hash(xet_hub, xet_client, tmp_path):
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    api.create_repo(REPO)
    weights = os.urandom(3 * 1024 * 1024)
    (tmp_path / "w.bin").write_bytes(weights)
    api.upload_file(path_or_fileobj=str(tmp_path / "w.bin"), path_in_repo="model/w.bin", repo_id=REPO)
    xorbs = entries(xet_hub, "POST", "/v1/xorbs/default/", listener="cas")
    assert xorbs and all(e["status"] == 200 for e in xorbs)
    assert cas_bytes_in(xet_hub, "POST", "/v1/xorbs/") >= len(weights)  # random bytes do not compress
    assert [e["status"] for e in entries(xet_hub, "POST", "/v1/shards", listener="cas")] == [200]
    _no_lfs_batch(xet_hub)
    tree = {f.path: f for f in api.list_repo_tree(REPO, recursive=True)}
    sha256 = hashlib.sha256(weights).hexdigest()
    item = tree["model/w.bin"]
    assert item.lfs is not None and item.lfs.sha256 == sha256
    assert item.xet_hash is not None and len(item.xet_hash) == 64
    [info] = api.get_paths_info(REPO, ["model/w.bin"])
    assert info.xet_hash == item.xet_hash
    head = httpx.head(hf_hub_url(REPO, "model/w.bin", endpoint=xet_hub.url))
    assert head.status_code == 302 and head.headers["X-Xet-Hash"] == item.xet_hash
    link = head.links["xet-auth"]["url"]
    assert link.startswith(f"{xet_hub.url}/api/models/{REPO}/xet-read-token/")
    token = httpx.get(link).json()
    assert token["casUrl"] == xet_hub.cas_url and token["exp"] > 0 and token["accessToken"]


def test_hf_hub_download_reconstructs_from_the_cas(xet_hub, xet_client):
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    api.create_repo(REPO)
    weights = os.urandom(2 * 1024 * 1024 + 17)
    api.upload_file(path_or_fileobj=weights, path_in_repo="w.bin", repo_id=REPO)
    path = hf_hub_download(REPO, "w.bin", endpoint=xet_hub.url, token=TOKEN, cache_dir=xet_client)
    assert Path(path).read_bytes() == weights
    recon = entries(xet_hub, "GET", "/reconstructions/", listener="cas")
    assert recon and recon[-1]["status"] == 200
    fetched = entries(xet_hub, "GET", "/v1/fetch/xorb/", listener="cas")
    assert fetched and all(e["auth"] is False for e in fetched)  # signed URLs, no token
    assert sum(e["bytes_out"] for e in fetched) >= len(weights)
    assert entries(xet_hub, "GET", "/resolve/", listener="cdn") == []  # not through the bridge


def test_plain_get_of_a_xet_file_is_redirected_to_a_bridge_with_ranges(xet_hub, xet_client):
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    api.create_repo(REPO)
    weights = os.urandom(1024 * 1024)
    api.upload_file(path_or_fileobj=weights, path_in_repo="w.bin", repo_id=REPO)
    url = hf_hub_url(REPO, "w.bin", endpoint=xet_hub.url)
    got = httpx.get(url, follow_redirects=True)
    assert got.status_code == 200 and got.content == weights
    part = httpx.get(url, headers={"Range": "bytes=1000-1999"}, follow_redirects=True)
    assert part.status_code == 206 and part.content == weights[1000:2000]


def test_hf_cli_round_trip_small_file(xet_hub, tmp_path):
    _cli_round_trip(xet_hub, tmp_path, 4 * 1024 * 1024 + 3)


@pytest.mark.slow
def test_hf_cli_round_trip_100_mib(xet_hub, tmp_path):
    _cli_round_trip(xet_hub, tmp_path, 100 * 1024 * 1024)


def _cli_round_trip(hub, tmp_path: Path, size: int) -> None:
    HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
    src = tmp_path / "big.bin"
    with open(src, "wb") as fh:
        left = size
        while left:
            fh.write(os.urandom(min(left, 8 << 20)))
            left -= min(left, 8 << 20)
    run_hf(["upload", REPO, str(src), "big.bin"], xet_env(hub.url, tmp_path / "up", TOKEN))
    assert entries(hub, "POST", "/v1/xorbs/", listener="cas")
    assert entries(hub, "POST", "/v1/shards", listener="cas")
    _no_lfs_batch(hub)
    out = tmp_path / "out"
    run_hf(["download", REPO, "big.bin", "--local-dir", str(out)], xet_env(hub.url, tmp_path / "down", TOKEN))
    assert entries(hub, "GET", "/reconstructions/", listener="cas")
    got, want = hashlib.sha256(), hashlib.sha256()
    for digest, path in ((got, out / "big.bin"), (want, src)):
        with open(path, "rb") as fh:
            while block := fh.read(8 << 20):
                digest.update(block)
    assert got.hexdigest() == want.hexdigest()


def test_a_push_sharing_most_bytes_uploads_only_changed_chunks(xet_hub, tmp_path):
    """Each push from a fresh Xet cache: only the server's dedupe answers can save bytes."""
    HfApi(endpoint=xet_hub.url, token=TOKEN).create_repo(REPO)
    size = 8 * 1024 * 1024
    base = bytearray(os.urandom(size))
    (tmp_path / "n.bin").write_bytes(base)
    run_hf(["upload", REPO, str(tmp_path / "n.bin"), "n.bin"], xet_env(xet_hub.url, tmp_path / "h1", TOKEN))
    first = cas_bytes_in(xet_hub, "POST", "/v1/xorbs/")
    assert first >= size
    changed = bytearray(base)
    changed[size // 2: size // 2 + size // 10] = os.urandom(size // 10)
    (tmp_path / "n1.bin").write_bytes(changed)
    run_hf(["upload", REPO, str(tmp_path / "n1.bin"), "n1.bin"], xet_env(xet_hub.url, tmp_path / "h2", TOKEN))
    second = cas_bytes_in(xet_hub, "POST", "/v1/xorbs/") - first
    assert second < size * 0.3, (first, second)
    assert any(e["status"] == 200 for e in entries(xet_hub, "GET", "/v1/chunks/", listener="cas"))
    out = tmp_path / "out"
    run_hf(["download", REPO, "n1.bin", "--local-dir", str(out)], xet_env(xet_hub.url, tmp_path / "h3", TOKEN))
    assert (out / "n1.bin").read_bytes() == bytes(changed)


def test_files_packed_into_one_xorb_each_download_whole(xet_hub, xet_client, tmp_path):
    """hf_xet packs small files' chunks into shared xorbs: every range of one needs its own fetch."""
    files = {f"c/f{i}.bin": os.urandom(n) for i, n in enumerate([1_200_000, 300, 1_200_000, 50_000, 700_000])}
    for name, data in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_bytes(data)
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.upload_folder(folder_path=str(tmp_path / "src"), repo_id=REPO)
    assert len(entries(xet_hub, "POST", "/v1/xorbs/", listener="cas")) < len(files)
    out = tmp_path / "out"
    run_hf(["download", REPO, "--local-dir", str(out)], xet_env(xet_hub.url, tmp_path / "down", TOKEN))
    assert {name: (out / name).read_bytes() for name in files} == files


def test_a_file_repeating_its_own_chunks_downloads_whole(xet_hub, xet_client, tmp_path):
    """Repeated content dedupes within a file: terms name the same chunks again, and each
    must still find the bytes it needs in the reconstruction's fetch ranges."""
    data = (b"\x00\x00\x00\x04" * 300_001)[:1_200_000] + os.urandom(64)
    api = HfApi(endpoint=xet_hub.url, token=TOKEN)
    api.create_repo(REPO)
    api.upload_file(path_or_fileobj=data, path_in_repo="m.bin", repo_id=REPO)
    out = tmp_path / "out"
    run_hf(["download", REPO, "m.bin", "--local-dir", str(out)], xet_env(xet_hub.url, tmp_path / "down", TOKEN))
    assert (out / "m.bin").read_bytes() == data
