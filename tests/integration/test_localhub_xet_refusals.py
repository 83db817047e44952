"""What the local Hub's CAS refuses, with the Xet specification's answers.

The xorb comes from a real hf_xet upload; the shards are built here from the
specification's byte layout, independently of the server's parser.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi

from ckpt_localhub import LocalHub
from tests.helpers.localhub_fixtures import REPO, TOKEN

SHARD_TAG = bytes([72, 70, 82, 101, 112, 111, 77, 101, 116, 97, 68, 97, 116, 97, 0, 85, 105, 103, 69, 106, 123,
                   129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169])
BOOKEND = b"\xff" * 32 + bytes(16)


def _token(hub: LocalHub, scope: str = "write") -> dict[str, str]:
    info = httpx.get(f"{hub.url}/api/models/{REPO}/xet-{scope}-token/main",
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert info.status_code == 200, info.text
    return {"Authorization": f"Bearer {info.json()['accessToken']}"}


@pytest.fixture
def stored_xorb(xet_hub, xet_client) -> tuple[str, bytes]:
    """(hash, bytes) of a xorb the real client uploaded."""
    HfApi(endpoint=xet_hub.url, token=TOKEN).create_repo(REPO)
    HfApi(endpoint=xet_hub.url, token=TOKEN).upload_file(path_or_fileobj=os.urandom(300_000), path_in_repo="w.bin",
                                                         repo_id=REPO)
    [path] = [p for p in (xet_hub.data_dir / "xet" / "xorbs").rglob("*") if p.is_file() and p.suffix != ".chunks"]
    return path.name, path.read_bytes()


@pytest.fixture
def other_hub(tmp_path: Path, xet_client) -> LocalHub:
    with LocalHub(tmp_path / "other", access_log=tmp_path / "other.log") as hub:
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
        yield hub


def test_a_xorb_is_stored_only_if_its_chunks_hash_to_its_name(stored_xorb, other_hub):
    name, data = stored_xorb
    url = f"{other_hub.cas_url}/v1/xorbs/default/{name}"
    auth = _token(other_hub)
    corrupt = bytearray(data)
    corrupt[100] ^= 0xFF
    refused = httpx.post(url, content=bytes(corrupt), headers=auth)
    assert refused.status_code == 400 and "hash" in refused.json()["error"]
    assert httpx.post(url, content=data[:len(data) // 2], headers=auth).status_code == 400  # truncated
    other = "0" * 64
    assert httpx.post(f"{other_hub.cas_url}/v1/xorbs/default/{other}", content=data, headers=auth).status_code == 400
    assert httpx.post(f"{other_hub.cas_url}/v1/xorbs/default/NOTAHASH", content=data, headers=auth).status_code == 400
    assert httpx.head(url, headers=auth).status_code == 404  # nothing refused was stored
    accepted = httpx.post(url, content=data, headers=auth)
    assert accepted.status_code == 200 and accepted.json() == {"was_inserted": True}
    assert httpx.post(url, content=data, headers=auth).json() == {"was_inserted": False}
    assert httpx.head(url, headers=auth).headers["Content-Length"] == str(len(data))


def _shard_naming(xorb: bytes, unpacked: int = 1000) -> bytes:
    """An upload shard (no footer) with one file of one term in ``xorb``, chunks [0, 1)."""
    header = SHARD_TAG + struct.pack("<QQ", 2, 0)
    file_header = os.urandom(32) + struct.pack("<II", 1 << 31, 1) + bytes(8)
    term = xorb + struct.pack("<IIII", 0, unpacked, 0, 1)
    verification = os.urandom(32) + bytes(16)
    return header + file_header + term + verification + BOOKEND + BOOKEND


def test_a_shard_naming_a_missing_xorb_or_malformed_is_refused(other_hub):
    url = f"{other_hub.cas_url}/v1/shards"
    auth = _token(other_hub)
    missing = httpx.post(url, content=_shard_naming(os.urandom(32)), headers=auth)
    assert missing.status_code == 400 and "never uploaded" in missing.json()["error"]
    assert httpx.post(url, content=b"not a shard at all" * 10, headers=auth).status_code == 400
    truncated = _shard_naming(os.urandom(32))[:-20]
    assert httpx.post(url, content=truncated, headers=auth).status_code == 400
    empty = SHARD_TAG + struct.pack("<QQ", 2, 0) + BOOKEND + BOOKEND
    assert httpx.post(url, content=empty, headers=auth).json() == {"result": 0}


def test_a_shard_with_a_wrong_verification_hash_is_refused(stored_xorb, other_hub):
    name, data = stored_xorb
    auth = _token(other_hub)
    assert httpx.post(f"{other_hub.cas_url}/v1/xorbs/default/{name}", content=data, headers=auth).status_code == 200
    raw = bytes.fromhex(name)
    xorb = b"".join(raw[i:i + 8][::-1] for i in range(0, 32, 8))  # the specification's string form, undone
    first_chunk_length = int.from_bytes(data[5:8], "little")  # the chunk header's decoded length
    refused = httpx.post(f"{other_hub.cas_url}/v1/shards", content=_shard_naming(xorb, first_chunk_length),
                         headers=auth)
    assert refused.status_code == 400 and "verification hash" in refused.json()["error"]


def test_cas_requests_need_a_live_token_of_the_right_scope(tmp_path, stored_xorb, xet_hub):
    name, data = stored_xorb
    url = f"{xet_hub.cas_url}/v1/xorbs/default/{name}"
    assert httpx.post(url, content=data).status_code == 401
    forged = {"Authorization": "Bearer xet_write_99999999999_00"}
    assert httpx.post(url, content=data, headers=forged).status_code == 401
    assert httpx.post(url, content=data, headers=_token(xet_hub, "read")).status_code == 403
    assert httpx.post(url, content=data, headers=_token(xet_hub, "write")).status_code == 200
    with LocalHub(tmp_path / "expiring", xet_token_ttl=-5) as hub:
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
        stale = _token(hub)
        assert httpx.get(f"{hub.cas_url}/v1/chunks/default-merkledb/{'0' * 64}", headers=stale).status_code == 401


def test_reconstruction_urls_are_signed_and_ranges_checked(stored_xorb, xet_hub):
    [item] = [f for f in HfApi(endpoint=xet_hub.url, token=TOKEN).list_repo_tree(REPO) if f.path == "w.bin"]
    auth = _token(xet_hub, "read")
    recon = httpx.get(f"{xet_hub.cas_url}/v1/reconstructions/{item.xet_hash}", headers=auth)
    assert recon.status_code == 200
    [fetch] = next(iter(recon.json()["fetch_info"].values()))
    byte_range = f"bytes={fetch['url_range']['start']}-{fetch['url_range']['end']}"
    got = httpx.get(fetch["url"], headers={"Range": byte_range})
    assert got.status_code == 206 and len(got.content) == fetch["url_range"]["end"] - fetch["url_range"]["start"] + 1
    assert httpx.get(fetch["url"].replace("sig=", "sig=0"), headers={"Range": byte_range}).status_code == 403
    assert httpx.get(f"{xet_hub.cas_url}/v1/reconstructions/{item.xet_hash}").status_code == 401
    past = httpx.get(f"{xet_hub.cas_url}/v1/reconstructions/{item.xet_hash}",
                     headers={**auth, "Range": "bytes=300000-300010"})
    assert past.status_code == 416
    assert httpx.get(f"{xet_hub.cas_url}/v1/reconstructions/{'1' * 64}", headers=auth).status_code == 404
    assert httpx.get(f"{xet_hub.cas_url}/v1/reconstructions/xyz", headers=auth).status_code == 400
    part = httpx.get(f"{xet_hub.cas_url}/v2/reconstructions/{item.xet_hash}", headers={**auth, "Range": "bytes=10-20"})
    assert part.status_code == 200 and part.json()["offset_into_first_range"] == 10
