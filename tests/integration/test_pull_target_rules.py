"""What a pull does to its target and what the tool keeps for itself (issue 18, items 5, 8-10).

In process, against the local Hub, through the Python API and the core it calls.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action.errors import CkptError, InputError, IntegrityError
from ckpt_localhub import LocalHub
from tests.conftest import write_checkpoint
from tests.helpers.localhub_fixtures import entries

FILES = {"model.safetensors": b"w" * 5000, "config.json": b'{"a": 1}', "optimizer/state.pt": b"o" * 300}


@pytest.fixture
def hub(local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch) -> LocalHub:
    for name in list(os.environ):
        if name.startswith("CKPT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CKPT_RETRY_DELAY", "0.05")
    return local_hub


def _push(hub: LocalHub, tmp_path: Path, files: dict[str, bytes], step: int = 1) -> ckpt.CheckpointHandle:
    return ckpt.push(write_checkpoint(tmp_path / f"src-{step}", files), repo="o/r", step=step, endpoint=hub.url)


# --- item 5: names the tool writes in a target are reserved ------------------------------------

@pytest.mark.parametrize("name", [".ckpt-pull.json.tmp", ".ckpt-pull.json"])
def test_a_checkpoint_holding_a_reserved_name_is_refused_by_pull(name, hub, tmp_path):
    from tests.helpers.chaos_helpers import seed

    # Complete, its manifest naming the file: only the name is wrong.
    sha = seed(hub.url, "o/r", "checkpoint-1", {**FILES, name: b"mine"}, tmp_path, step=1)
    dest = tmp_path / "got"
    with pytest.raises(IntegrityError, match="reserved") as err:
        ckpt.pull("o/r", dest, subfolder="checkpoint-1", revision=sha, endpoint=hub.url)
    assert name in str(err.value) and err.value.exit_code == 1
    assert not dest.exists()


@pytest.mark.parametrize("name", [".ckpt-pull.json", ".ckpt-pull.json.tmp", ".dest.ckpt-lock",
                                  ".dest.ckpt-abcd1234", ".dest.ckpt-old-abcd1234"])
def test_push_refuses_a_local_dir_holding_a_reserved_name(name, hub, tmp_path):
    src = write_checkpoint(tmp_path / "src", {**FILES, name: b"x"})
    with pytest.raises(InputError, match="reserved"):
        ckpt.push(src, repo="o/r", step=1, endpoint=hub.url)
    assert entries(hub) == []


# --- item 8: the target's mode is kept ---------------------------------------------------------

@pytest.mark.parametrize("again", [False, True], ids=["first-pull", "update"])
def test_pull_keeps_the_mode_of_an_existing_target(again, hub, tmp_path):
    handle = _push(hub, tmp_path, FILES)
    dest = tmp_path / "private"
    dest.mkdir(mode=0o700)
    os.chmod(dest, 0o700)  # whatever the umask
    ckpt.pull(handle, dest, endpoint=hub.url)
    if again:
        ckpt.pull(_push(hub, tmp_path, {**FILES, "config.json": b"{}"}, step=2), dest, endpoint=hub.url)
    assert (dest.stat().st_mode & 0o7777) == 0o700


# --- item 9: a partial pull never leaves a manifest claiming absent files ----------------------

def _local_manifest(dest: Path) -> dict | None:
    path = dest / "ckpt-manifest.json"
    return json.loads(path.read_bytes()) if path.exists() else None


@pytest.mark.parametrize(("include", "exclude"), [(["ckpt-manifest.json"], []), ([], ["optimizer/"]),
                                                  (["*.safetensors", "ckpt-manifest.json"], [])],
                         ids=["manifest-only", "exclude-folder", "include-some"])
def test_a_partial_pull_leaves_no_manifest_claiming_absent_files(include, exclude, hub, tmp_path):
    handle = _push(hub, tmp_path, FILES)
    dest = ckpt.pull(handle, tmp_path / "part", include=include, exclude=exclude, endpoint=hub.url)
    manifest = _local_manifest(dest)
    if manifest is not None:
        assert manifest["complete"] is False
        for rel in manifest["files"]:
            assert (dest / rel).is_file(), f"the manifest lists {rel}, which is not there"
    # A full pull into the same dir writes the complete manifest again.
    ckpt.pull(handle, dest, endpoint=hub.url)
    full = _local_manifest(dest)
    assert full is not None and full["complete"] is True and set(full["files"]) == set(FILES)


# --- item 10: free space, and a cap on one attempt's deadline ----------------------------------

def test_a_pull_that_cannot_fit_fails_before_downloading(hub, tmp_path, monkeypatch):
    handle = _push(hub, tmp_path, FILES)
    need = sum(len(b) for b in FILES.values())
    real = shutil.disk_usage

    def tiny(path):  # the target's file system has room for less than the checkpoint
        return real(path)._replace(free=need - 1)

    monkeypatch.setattr(shutil, "disk_usage", tiny)
    start = len(entries(hub, "GET", "/resolve/"))
    with pytest.raises(CkptError) as err:
        ckpt.pull(handle, tmp_path / "full", endpoint=hub.url)
    assert err.value.exit_code == 1 and str(need) in str(err.value) and str(need - 1) in str(err.value)
    after = len(entries(hub, "GET", "/resolve/"))
    assert after - start <= 1  # the manifest at most: no checkpoint file was fetched
    assert not (tmp_path / "full").exists()


def test_one_download_attempt_has_a_capped_deadline():
    from ckpt_action.settings import Settings
    from ckpt_action.stores.hub.fetch import attempt_deadline

    settings = Settings.from_env({}, endpoint="http://127.0.0.1:9")
    assert attempt_deadline(settings, 10**12) == settings.max_attempt_seconds  # 1 TB: capped, not 177 days
    small = attempt_deadline(settings, 1000)
    assert small == pytest.approx(settings.request_deadline + 1000 / settings.min_download_rate)
    capped = Settings.from_env({"CKPT_MAX_ATTEMPT_SECONDS": "30"}, endpoint="http://127.0.0.1:9")
    assert attempt_deadline(capped, 10**9) == 30
    assert any(env == "CKPT_MAX_ATTEMPT_SECONDS" for _f, env, _d, _doc in Settings.knobs())


# --- items 6, 7: the cache never shares an inode with a pulled dir, never follows a link -------

def test_the_cache_never_shares_an_inode_with_a_pulled_dir(hub, tmp_path):
    handle = _push(hub, tmp_path, FILES)
    cache = tmp_path / "cache"
    dest = ckpt.pull(handle, tmp_path / "a", cache_dir=cache, endpoint=hub.url)
    entries_ = [p for p in (cache / "sha256").rglob("*") if p.is_file()]
    assert len(entries_) == len(FILES)
    pulled = {(dest / rel).stat().st_ino for rel in FILES}
    assert not pulled & {p.stat().st_ino for p in entries_}, "a cache entry is a hard link to a pulled file"
    # A second pull filled from the cache gets inodes of its own too.
    other = ckpt.pull(handle, tmp_path / "b", cache_dir=cache, endpoint=hub.url)
    assert not pulled & {(other / rel).stat().st_ino for rel in FILES}


@pytest.mark.parametrize("linked", ["sha256", "tmp", "shard"])
def test_the_cache_follows_no_symlinked_subdir(linked, hub, tmp_path, monkeypatch):
    import hashlib

    handle = _push(hub, tmp_path, FILES)
    victim = tmp_path / "victim"
    digest = "ab" + "0" * 62
    (victim / "ab").mkdir(parents=True)
    (victim / "ab" / digest).write_bytes(b"the victim's file")
    (victim / digest).write_bytes(b"the victim's file")
    before = sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*"))
    cache = tmp_path / "cache"
    cache.mkdir()
    if linked == "shard":  # one level down: the shard of a file the pull stores
        shard = hashlib.sha256(FILES["model.safetensors"]).hexdigest()[:2]
        (cache / "sha256").mkdir()
        os.symlink(victim, cache / "sha256" / shard, target_is_directory=True)
    else:
        os.symlink(victim, cache / linked, target_is_directory=True)
    monkeypatch.setenv("CKPT_CACHE_MAX_SIZE", "1")  # eviction would delete everything it sees
    dest = ckpt.pull(handle, tmp_path / "got", cache_dir=cache, endpoint=hub.url)
    assert (dest / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert sorted(p.relative_to(victim).as_posix() for p in victim.rglob("*")) == before
    assert (victim / "ab" / digest).read_bytes() == b"the victim's file"
