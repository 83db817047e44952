"""``prune --free-storage`` on files pushed through Xet (issue 27, items 6 and 7): the freed
files' bytes leave the data dir and the CAS, and pushing the same bytes again brings them back.

The pushes are ckpt-action's own, on the default Xet path (the real hf_xet client, one Xet
cache for every push, as on one machine); the server is the in-process local Hub.
"""

from __future__ import annotations

import os

import httpx
import pytest
from huggingface_hub import HfApi

import ckpt_action as ckpt
from ckpt_action.errors import NotFoundError
from tests.conftest import write_checkpoint

REPO = "o/r"
SIZE = 400_000


def _auth(hub, scope: str = "write") -> dict[str, str]:
    info = httpx.get(f"{hub.url}/api/models/{REPO}/xet-{scope}-token/main")
    assert info.status_code == 200, info.text
    return {"Authorization": f"Bearer {info.json()['accessToken']}"}


def _xorbs_of(hub, file_hash: str) -> set[str]:
    """The xorbs a file's reconstruction names (asked through the CAS, as a client would)."""
    got = httpx.get(f"{hub.cas_url}/v1/reconstructions/{file_hash}", headers=_auth(hub))
    assert got.status_code == 200, got.text
    return {t["hash"] for t in got.json()["terms"]}


def _xorb_files(hub) -> set[str]:
    return {p.name for p in (hub.data_dir / "xet" / "xorbs").rglob("*") if p.is_file() and p.suffix != ".chunks"}


@pytest.fixture
def pushed(xet_hub, tmp_path):
    """Checkpoints 1 to 3 pushed through Xet, each of its own random bytes: (handles, xet hash per step)."""
    handles, hashes = {}, {}
    api = HfApi(endpoint=xet_hub.url)
    for step in (1, 2, 3):
        src = write_checkpoint(tmp_path / f"s{step}", {"model.safetensors": os.urandom(SIZE + step)})
        handles[step] = ckpt.push(src, repo=REPO, step=step, endpoint=xet_hub.url)
        [info] = api.get_paths_info(REPO, [f"checkpoint-{step}/model.safetensors"], revision=handles[step].revision)
        assert info.xet_hash is not None, "pushed through Xet"
        hashes[step] = info.xet_hash
    assert not [e for e in (xet_hub.access_log.read_text().splitlines()) if "/info/lfs/objects/batch" in e]
    return handles, hashes


def test_freed_xet_files_leave_the_cas_and_the_data_dir(xet_hub, pushed, tmp_path):
    handles, hashes = pushed
    xorbs = {step: _xorbs_of(xet_hub, h) for step, h in hashes.items()}
    assert xorbs[1] and xorbs[1] <= _xorb_files(xet_hub)
    res = ckpt.prune(REPO, keep_last=1, free_storage=True, endpoint=xet_hub.url)
    assert sorted(res.deleted) == ["checkpoint-1", "checkpoint-2"] and res.freed_objects == 2
    on_disk = _xorb_files(xet_hub)
    for step in (1, 2):
        for scope in ("read", "write"):
            gone = httpx.get(f"{xet_hub.cas_url}/v1/reconstructions/{hashes[step]}", headers=_auth(xet_hub, scope))
            assert gone.status_code == 404, (step, scope, gone.text)
        assert httpx.head(f"{xet_hub.cas_url}/v1/files/{hashes[step]}", headers=_auth(xet_hub)).status_code == 404
        only_theirs = xorbs[step] - xorbs[3]
        assert only_theirs and not only_theirs & on_disk, f"checkpoint-{step}'s xorbs stayed on disk"
    # What is kept is still on disk and served.
    assert xorbs[3] <= on_disk
    dest = ckpt.pull(handles[3], tmp_path / "kept", endpoint=xet_hub.url)
    assert (dest / "model.safetensors").read_bytes() == (tmp_path / "s3" / "model.safetensors").read_bytes()
    with pytest.raises(NotFoundError, match="deleted to free storage"):
        ckpt.pull(handles[1], tmp_path / "gone", endpoint=xet_hub.url)


def test_pushing_freed_bytes_again_through_xet_brings_them_back(xet_hub, pushed, tmp_path):
    handles, _hashes = pushed
    ckpt.prune(REPO, keep_last=1, free_storage=True, endpoint=xet_hub.url)
    again = ckpt.push(tmp_path / "s1", repo=REPO, step=1, endpoint=xet_hub.url)
    want = (tmp_path / "s1" / "model.safetensors").read_bytes()
    dest = ckpt.pull(again, tmp_path / "again", endpoint=xet_hub.url)
    assert (dest / "model.safetensors").read_bytes() == want
    # The old SHA names the same object: it pulls again too.
    old = ckpt.pull(handles[1], tmp_path / "old", endpoint=xet_hub.url)
    assert (old / "model.safetensors").read_bytes() == want
