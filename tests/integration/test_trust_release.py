"""One bad folder never blocks the repo, and prune protects what it promised (issue 11,
items 5 and 7), through the real CLI against the local Hub."""

from __future__ import annotations

import json

import pytest

from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import ckpt, seed


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


def _api(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.url)


def _folders(hub) -> set[str]:
    return {p.split("/", 1)[0] for p in _api(hub).list_repo_files("o/r") if "/" in p}


def test_unreadable_manifests_are_skipped_listed_and_kept(hub, cli, tmp_path):
    for step in (1, 5, 10, 900):
        seed(hub.url, "o/r", f"checkpoint-{step}", ckpt(step), tmp_path / f"s{step}", step=step)
    bad = {5: b"{not json", 900: json.dumps({"format": "ckpt-action/manifest/v999", "files": {}}).encode()}
    for step, data in bad.items():
        _api(hub).upload_file(path_or_fileobj=data, path_in_repo=f"checkpoint-{step}/ckpt-manifest.json",
                              repo_id="o/r")
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)

    found = cli("latest", "--repo", "o/r", "--json", env=env)
    assert found.code == 0 and found.json["subfolder"] == "checkpoint-10", found.stdout + found.stderr
    assert "skipped checkpoint-900:" in found.stderr and "unknown format" in found.stderr

    pulled = cli("pull", "--repo", "o/r", "--latest", "--local-dir", str(tmp_path / "d"), "--json", env=env)
    assert pulled.code == 0 and pulled.json["subfolder"] == "checkpoint-10", pulled.stderr

    listed = cli("list", "--repo", "o/r", "--json", env=env)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert {n: r["status"] for n, r in rows.items()} == {
        "checkpoint-900": "unreadable", "checkpoint-10": "complete", "checkpoint-5": "unreadable",
        "checkpoint-1": "complete"}
    assert "not JSON" in rows["checkpoint-5"]["problem"] and rows["checkpoint-5"]["files"] == 3
    assert listed.json["subfolder"] == "checkpoint-10"

    pruned = cli("prune", "--repo", "o/r", "--keep-last", "1", env=env)
    assert pruned.code == 0, pruned.stdout + pruned.stderr
    assert "deleted: checkpoint-1\n" in pruned.stderr
    assert "kept: checkpoint-5 (the checkpoint manifest is unreadable" in pruned.stderr
    assert _folders(hub) == {"checkpoint-5", "checkpoint-10", "checkpoint-900"}


def test_prune_keeps_the_source_of_a_nested_promotion(hub, cli, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    for step in (1, 2, 3):
        src = write_checkpoint(tmp_path / f"c{step}", {"model.safetensors": bytes([step]) * 3000, "config.json": b"{}"})
        assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), env=env).code == 0
    promoted = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-1", "--to", "release/v1", env=env)
    assert promoted.code == 0, promoted.stderr
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", env=env)
    assert run.code == 0, run.stdout + run.stderr
    assert "kept: checkpoint-1 (source of a promoted folder)" in run.stderr
    assert "deleted: checkpoint-2" in run.stderr
    assert _folders(hub) == {"checkpoint-1", "checkpoint-3", "release"}
