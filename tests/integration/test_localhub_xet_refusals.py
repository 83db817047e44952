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
    [stored] = [p for p in (other_hub.data_dir / "xet" / "xorbs").rglob(name)]
    assert stored.read_bytes() == data
    # HEAD answers only for xorbs of files the token's repo holds: this one is no file's yet.
    assert httpx.head(url, headers=auth).status_code == 404


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
    for odd in ("xet_write_\u00b2_6d6f64656c2f612f62_00", "xet_write_1_zz_00", "xet_write_1__00"):
        assert httpx.post(url, content=data, headers={"Authorization": f"Bearer {odd}".encode("latin-1")}
                          ).status_code == 401, odd
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


def test_a_hash_followed_by_a_newline_is_malformed_and_stores_nothing(stored_xorb, other_hub):
    """``%0A`` after a hash: the whole path part must be the hash (issue 27, item 19)."""
    name, data = stored_xorb
    auth = _token(other_hub)
    for route in ("xorbs/default", "reconstructions", "files"):
        method = "POST" if route == "xorbs/default" else ("HEAD" if route == "files" else "GET")
        got = httpx.request(method, f"{other_hub.cas_url}/v1/{route}/{name}%0A", content=data if method == "POST"
                            else None, headers=auth)
        assert got.status_code == 400, (route, got.status_code)
    stored = [p.name for p in (other_hub.data_dir / "xet").rglob("*") if p.is_file()]
    assert not any(name in p for p in stored), stored
    dedupe = httpx.get(f"{other_hub.cas_url}/v1/chunks/default/{name}%0A", headers=auth)
    assert dedupe.status_code == 400


def _chunk(payload: bytes, scheme: int = 0) -> bytes:
    """A chunk as the specification lays it out: version 0, stored length (3 bytes), scheme,
    decoded length (3 bytes), then the stored bytes."""
    stored = payload
    if scheme == 1:
        import lz4.frame

        stored = lz4.frame.compress(payload)
    return bytes([0]) + len(stored).to_bytes(3, "little") + bytes([scheme]) + len(payload).to_bytes(3, "little") \
        + stored


def test_a_xorb_past_the_specifications_chunk_count_is_refused_before_it_is_all_read(other_hub):
    """The specification caps a xorb at 8192 chunks (item 9): one more is refused, and the refusal
    comes before the rest is parsed (a truncated chunk after it would be an error of its own)."""
    auth = _token(other_hub)
    url = f"{other_hub.cas_url}/v1/xorbs/default/{'0' * 64}"
    too_many = b"".join(_chunk(bytes([i % 251])) for i in range(8193)) + b"\x00\x01"
    refused = httpx.post(url, content=too_many, headers=auth)
    assert refused.status_code == 400 and "8192 chunks" in refused.json()["error"], refused.text
    empty = _chunk(b"") * 1000
    refused = httpx.post(url, content=empty, headers=auth)
    assert refused.status_code == 400 and "empty chunk" in refused.json()["error"], refused.text
    assert not [p for p in (other_hub.data_dir / "xet" / "xorbs").rglob("*") if p.is_file()]


def _shard_of(file_hash: bytes, terms: list[tuple[bytes, int, int, int, bytes]]) -> bytes:
    """An upload shard (no footer) with one file of these terms: (xorb, unpacked, start, end, verification)."""
    header = SHARD_TAG + struct.pack("<QQ", 2, 0)
    file_header = file_hash + struct.pack("<II", 1 << 31, len(terms)) + bytes(8)
    body = b"".join(x + struct.pack("<IIII", 0, n, s, e) for x, n, s, e, _ in terms)
    checks = b"".join(v + bytes(16) for *_, v in terms)
    return header + file_header + body + checks + BOOKEND + BOOKEND


def test_a_small_shard_may_not_make_the_server_rebuild_more_than_its_bound(tmp_path, xet_client):
    """80 terms over one compressed chunk of zeros: a 8 KB shard naming 10 MiB of file (item 8).
    With the bound set to 4 MiB it is refused before a byte is written; under it, accepted."""
    from ckpt_localhub.xet.hashes import chunk_hash, file_hash, hash_hex, verification_hash, xorb_hash

    zeros = bytes(128 * 1024)
    h = chunk_hash(zeros)
    xorb = xorb_hash([(h, len(zeros))])
    check = verification_hash([h])
    many = _shard_of(file_hash([(h, len(zeros))] * 80), [(xorb, len(zeros), 0, 1, check)] * 80)
    few = _shard_of(file_hash([(h, len(zeros))] * 8), [(xorb, len(zeros), 0, 1, check)] * 8)
    assert len(many) < 8 * 1024
    with LocalHub(tmp_path / "bounded", xet_max_materialize_bytes=4 * 1024 * 1024) as hub:
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
        auth = _token(hub)
        stored = httpx.post(f"{hub.cas_url}/v1/xorbs/default/{hash_hex(xorb)}", content=_chunk(zeros, 1),
                            headers=auth)
        assert stored.status_code == 200, stored.text
        lfs = hub.data_dir / "objects" / "lfs"
        before = sorted(lfs.rglob("*"))
        refused = httpx.post(f"{hub.cas_url}/v1/shards", content=many, headers=auth)
        assert refused.status_code == 400, refused.text
        assert "10485760 bytes" in refused.json()["error"] and "4194304" in refused.json()["error"]
        assert sorted(lfs.rglob("*")) == before and not list((hub.data_dir / "tmp").iterdir())
        assert not list((hub.data_dir / "xet" / "files").rglob("*.*")) and not [
            p for p in (hub.data_dir / "xet" / "files").rglob("*") if p.is_file()]
        accepted = httpx.post(f"{hub.cas_url}/v1/shards", content=few, headers=auth)
        assert accepted.status_code == 200 and accepted.json() == {"result": 1}, accepted.text


def test_a_shard_past_the_term_bound_is_refused(tmp_path, xet_client, monkeypatch):
    from ckpt_localhub.xet import shard

    monkeypatch.setattr(shard, "MAX_SHARD_TERMS", 10)
    with LocalHub(tmp_path / "terms") as hub:
        HfApi(endpoint=hub.url, token=TOKEN).create_repo(REPO)
        terms = [(os.urandom(32), 1, 0, 1, os.urandom(32))] * 11
        refused = httpx.post(f"{hub.cas_url}/v1/shards", content=_shard_of(os.urandom(32), terms),
                             headers=_token(hub))
        assert refused.status_code == 400 and "more than 10 terms" in refused.json()["error"], refused.text


def test_a_cas_token_reads_only_what_its_repo_holds(tmp_path, xet_client):
    """A CAS token is scoped to the repo it was issued for (item 5): an anonymous read token of a
    public repo, or any token of another repo, neither reconstructs a private repo's file by its
    hash nor learns from HEAD that the file or its xorbs exist."""
    with LocalHub(tmp_path / "scoped", token=TOKEN) as hub:
        api = HfApi(endpoint=hub.url, token=TOKEN)
        api.create_repo("local-user/pub")
        api.create_repo("local-user/priv", private=True)
        api.upload_file(path_or_fileobj=os.urandom(200_000), path_in_repo="p.bin", repo_id="local-user/pub")
        api.upload_file(path_or_fileobj=os.urandom(200_000), path_in_repo="s.bin", repo_id="local-user/priv")
        [secret] = api.get_paths_info("local-user/priv", ["s.bin"])
        [public] = api.get_paths_info("local-user/pub", ["p.bin"])
        assert secret.xet_hash and public.xet_hash

        def token(repo: str, scope: str, owner: bool) -> dict[str, str]:
            headers = {"Authorization": f"Bearer {TOKEN}"} if owner else {}
            got = httpx.get(f"{hub.url}/api/models/{repo}/xet-{scope}-token/main", headers=headers)
            assert got.status_code == 200, got.text
            return {"Authorization": f"Bearer {got.json()['accessToken']}"}

        own = token("local-user/priv", "read", True)
        recon = httpx.get(f"{hub.cas_url}/v1/reconstructions/{secret.xet_hash}", headers=own)
        assert recon.status_code == 200
        xorbs = {t["hash"] for t in recon.json()["terms"]}
        assert httpx.head(f"{hub.cas_url}/v1/files/{secret.xet_hash}", headers=own).status_code == 200
        assert all(httpx.head(f"{hub.cas_url}/v1/xorbs/default/{x}", headers=own).status_code == 200 for x in xorbs)
        others = [token("local-user/pub", "read", False), token("local-user/pub", "read", True),
                  token("local-user/pub", "write", True)]
        for other in others:
            assert httpx.get(f"{hub.cas_url}/v1/reconstructions/{public.xet_hash}", headers=other).status_code == 200
            for path in (f"/v1/reconstructions/{secret.xet_hash}", f"/v2/reconstructions/{secret.xet_hash}"):
                got = httpx.get(f"{hub.cas_url}{path}", headers=other)
                assert got.status_code == 404 and "url" not in got.text, got.text
            assert httpx.head(f"{hub.cas_url}/v1/files/{secret.xet_hash}", headers=other).status_code == 404
            for x in xorbs:
                assert httpx.head(f"{hub.cas_url}/v1/xorbs/default/{x}", headers=other).status_code == 404
        # The private repo's own token still reads its file after the public one was read.
        assert httpx.get(f"{hub.cas_url}/v1/reconstructions/{secret.xet_hash}", headers=own).status_code == 200


def test_a_dedupe_answer_lists_chunk_hashes_keyed_not_in_clear(stored_xorb, xet_hub):
    """The dedupe query names a xorb's chunks keyed with its answer's HMAC key, as the Hub does:
    a client finds the chunks it holds, but learns no other chunk's hash (from which it could
    build a shard naming another repo's bytes)."""
    import blake3

    from ckpt_localhub.xet.hashes import hash_hex
    from ckpt_localhub.xet.xorb import parse_xorb

    _name, data = stored_xorb
    hashes = [c.hash for c in parse_xorb(data)]
    assert len(hashes) > 1
    answer = httpx.get(f"{xet_hub.cas_url}/v1/chunks/default-merkledb/{hash_hex(hashes[0])}",
                       headers=_token(xet_hub, "read"))
    assert answer.status_code == 200
    shard = answer.content
    key = shard[-200 + 72:-200 + 104]  # the footer's chunk hash HMAC key
    assert key != bytes(32)
    assert not any(h in shard for h in hashes), "a chunk hash in clear"
    assert all(blake3.blake3(h, key=key).digest() in shard for h in hashes)
