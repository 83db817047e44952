"""Verification never silently weakens: every pulled file is checked by sha256 or git blob id."""

from __future__ import annotations

import json

import pytest

from tests.helpers.chaos_helpers import one_line_error
from tests.helpers.pull_helpers import Puller, pulled

CONFIG = b'{"model_type": "tiny"}'


@pytest.fixture
def puller(hub_server, hf_client, cli, tmp_path):
    return Puller(hub_server(), cli, tmp_path)


def _seed_with_entry(puller, entry: dict[str, object]) -> None:
    """checkpoint-1 holding config.json, with a hand-written manifest entry for it."""
    from huggingface_hub import CommitOperationAdd, HfApi

    manifest = {"format": "ckpt-action/manifest/v1", "complete": True, "step": 1, "created_at": "",
                "tool": "ckpt-action test", "files": {"config.json": {"size": len(CONFIG), **entry}}}
    api = HfApi(endpoint=puller.hub.url)
    api.create_repo("o/r", exist_ok=True)
    api.create_commit("o/r", operations=[
        CommitOperationAdd("checkpoint-1/config.json", CONFIG),
        CommitOperationAdd("checkpoint-1/ckpt-manifest.json", json.dumps(manifest).encode()),
    ], commit_message="seed")


def _git_oid(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


def test_a_manifest_entry_without_any_hash_is_refused(puller, tmp_path):
    _seed_with_entry(puller, {"sha256": None})
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/config\.json$", "corrupt": True,
                            "times": -1}])
    run = puller("checkpoint-1", tmp_path / "d")
    assert run.code == 1, run.stdout + run.stderr
    one_line_error(run.stderr)
    assert run.gets == {} and not (tmp_path / "d").exists()


def test_a_file_the_manifest_names_by_git_id_only_is_checked_by_it(puller, tmp_path):
    _seed_with_entry(puller, {"sha256": None, "git_oid": _git_oid(CONFIG)})
    puller.hub.set_faults([{"method": "GET", "path": r"/checkpoint-1/config\.json$", "corrupt": True,
                            "times": -1}])
    bad = puller("checkpoint-1", tmp_path / "bad")
    assert bad.code == 1 and "git blob id" in one_line_error(bad.stderr)
    puller.hub.set_faults([])
    good = puller("checkpoint-1", tmp_path / "good")
    assert good.code == 0, good.stderr
    assert good.json["verified_by"] == "manifest" and pulled(tmp_path / "good") == {"config.json": CONFIG}
