"""Every command on a Storage Bucket (``hf://buckets/ORG/NAME``), through the CLI in process
against the local Hub: push, latest, pull by pin and by --latest, list, prune, promote."""

from __future__ import annotations

import hashlib
import os

import pytest
from huggingface_hub import HfApi

from tests.conftest import clean_env, read_tree, write_checkpoint
from tests.helpers.localhub_fixtures import TOKEN

BUCKET = "local-user/ckpts"
URI = f"hf://buckets/{BUCKET}"
MANIFEST = "ckpt-manifest.json"


@pytest.fixture
def hub(hub_server, xet_client):
    return hub_server(token=TOKEN)


@pytest.fixture
def env(hub, tmp_path):
    return clean_env(tmp_path, HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN)


@pytest.fixture
def api(hub):
    return HfApi(endpoint=hub.url, token=TOKEN)


def _push(cli, env, tmp_path, step, files=None, repo=URI):
    files = files or {"model.safetensors": os.urandom(200_000) + bytes([step]), "config.json": b'{"s": %d}' % step}
    src = write_checkpoint(tmp_path / f"src-{step}-{len(files)}", files)
    run = cli("push", "--repo", repo, "--local-dir", str(src), "--step", str(step), "--json", env=env)
    assert run.code == 0, run.stderr
    return run.json, files


def _paths(api, prefix=None):
    return sorted(f.path for f in api.list_bucket_tree(BUCKET, prefix, recursive=True))


def test_push_creates_a_private_bucket_writes_the_manifest_last_and_alone_and_pins_it(cli, env, api, hub, tmp_path):
    out, files = _push(cli, env, tmp_path, 3)
    assert api.bucket_info(BUCKET).private is True
    assert out["repo"] == URI and out["subfolder"] == "checkpoint-3"
    dest = tmp_path / "m.json"
    api.download_bucket_files(BUCKET, [(f"checkpoint-3/{MANIFEST}", dest)])
    assert out["revision"] == "sha256:" + hashlib.sha256(dest.read_bytes()).hexdigest()
    assert out["hub_url"] == f"{hub.url}/buckets/{BUCKET}/tree/checkpoint-3"
    assert _paths(api) == sorted(["checkpoint-3/config.json", f"checkpoint-3/{MANIFEST}",
                                  "checkpoint-3/model.safetensors"])
    batches = [e for e in hub.log_entries() if e["method"] == "POST" and e["path"].endswith(f"/buckets/{BUCKET}/batch")]
    assert len(batches) == 2  # the files, then the manifest alone
    # latest takes it, pinned to the manifest it read; pull by that pin and by --latest
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["revision"] == out["revision"], found.stderr
    got = cli("pull", "--repo", URI, "--subfolder", "checkpoint-3", "--revision", out["revision"],
              "--local-dir", str(tmp_path / "p1"), "--json", env=env)
    assert got.code == 0, got.stderr
    tree = read_tree(tmp_path / "p1")
    tree.pop(MANIFEST)
    assert tree == files
    got = cli("pull", "--repo", URI, "--latest", "--local-dir", str(tmp_path / "p2"), "--json", env=env)
    assert got.code == 0 and got.json["revision"] == out["revision"], got.stderr
