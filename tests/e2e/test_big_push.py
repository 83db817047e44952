"""A checkpoint of thousands of files goes up in commits within the Hub's per-commit limit,
manifest last, and the reported SHA holds it complete."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import read_tree, write_checkpoint
from tests.helpers.chaos_helpers import env_for, head_of

N_FILES = 3000
LIMIT = 100  # CKPT_MAX_FILES_PER_COMMIT's default, the Hub's recommendation


@pytest.mark.slow
def test_thousands_of_files_in_batches_manifest_last(hub_server, hf_client, cli, tmp_path):
    from huggingface_hub import HfApi, hf_hub_download

    hub = hub_server()
    env = env_for(hub, tmp_path)
    files = {f"shards/{i // 500:02d}/part-{i:05d}.txt": b"%d\n" % i * (1 + i % 7) for i in range(N_FILES)}
    src = write_checkpoint(tmp_path / "big", files)
    t0 = time.monotonic()
    run = cli("push", "--repo", "o/big", "--local-dir", str(src), "--step", "42", "--json", env=env)
    took = time.monotonic() - t0
    assert run.code == 0, run.stderr
    assert took < 90, f"push of {N_FILES} files took {took:.0f}s"
    out = run.json
    batches = -(-N_FILES // (LIMIT - 1))
    assert out["commits"] == batches and out["uploaded_files"] == N_FILES
    assert out["revision"] == head_of(hub.url, "o/big")

    api = HfApi(endpoint=hub.url)
    commits = list(reversed(api.list_repo_commits("o/big")))  # oldest first: repo creation, then the parts
    push_commits = [c for c in commits if c.title.startswith("Push ")]
    assert len(push_commits) == batches
    before = commits[commits.index(push_commits[0]) - 1].commit_id  # the repo as create_repo left it
    seen = set(api.list_repo_files("o/big", revision=before))
    for i, commit in enumerate(push_commits):
        now = set(api.list_repo_files("o/big", revision=commit.commit_id))
        added = now - seen
        assert len(added) <= LIMIT, f"commit {i} adds {len(added)} files"
        path = hf_hub_download("o/big", "checkpoint-42/ckpt-manifest.json", revision=commit.commit_id,
                               endpoint=hub.url, cache_dir=str(hf_client))
        with open(path, "rb") as fh:
            manifest = json.load(fh)
        last = i == len(push_commits) - 1
        assert manifest["complete"] is last, f"commit {i}: manifest complete={manifest['complete']}"
        seen = now
    assert {p for p in seen if p.startswith("checkpoint-42/")} == {f"checkpoint-42/{p}" for p in files} | {
        "checkpoint-42/ckpt-manifest.json"}

    latest = cli("latest", "--repo", "o/big", "--json", env=env)
    assert latest.code == 0 and latest.json["revision"] == out["revision"], latest.stderr
    assert latest.json["subfolder"] == "checkpoint-42"
    dest = tmp_path / "pulled"
    pulled = cli("pull", "--repo", "o/big", "--latest", "--local-dir", str(dest), "--json", env=env)
    assert pulled.code == 0, pulled.stderr
    assert pulled.json["revision"] == out["revision"] and pulled.json["files"] == N_FILES
    got = read_tree(dest)
    got.pop("ckpt-manifest.json")
    assert got == files

