"""``prune --free-storage`` end to end against the local Hub (issue 23): through the CLI and the
Python API, with the real huggingface_hub client on the server side of every call.

The pipeline: push many -> promote one with a tag -> prune --keep-last 2 --free-storage. After
it the tag, the kept checkpoints at the SHAs push reported (and their W&B pointers) pull
verified, the Hub's usage dropped by exactly the bytes only the pruned checkpoints held, and a
pruned checkpoint's old SHA fails with exit 1 saying its files were deleted to free storage.
"""

from __future__ import annotations

import os

import pytest
from huggingface_hub import HfApi

import ckpt_action as ckpt
from ckpt_action.errors import NotFoundError
from tests.conftest import clean_env, read_tree, write_checkpoint
from tests.helpers.wandb_records import decode_single_run

SIZE = 300_000  # LFS (a .safetensors file), small enough to keep the test fast
SHARED = os.urandom(50_000)  # the same tokenizer in every checkpoint: one object, never freed


def files_for(step: int) -> dict[str, bytes]:
    return {"model.safetensors": os.urandom(SIZE + step), "tokenizer.bin": SHARED, "config.json": b'{"a": 1}'}


@pytest.fixture
def hub(hub_server, hf_client):
    return hub_server()


def wandb_env(tmp_path, hub, name):
    w = tmp_path / f"wandb-{name}"
    return clean_env(tmp_path, HF_ENDPOINT=hub.url, WANDB_MODE="offline", WANDB_DIR=str(w),
                     WANDB_DATA_DIR=str(w / "data"), WANDB_CACHE_DIR=str(w / "cache"),
                     WANDB_CONFIG_DIR=str(w / "config"), WANDB_SILENT="true")


def used(hub) -> int:
    return HfApi(endpoint=hub.url).model_info("o/r", expand=["usedStorage"]).used_storage


def test_the_release_pipeline_frees_what_only_pruned_checkpoints_held(hub, cli, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    pushed: dict[int, tuple[str, dict[str, bytes]]] = {}
    pointers: dict[int, str] = {}
    for step in range(1, 7):
        files = files_for(step)
        src = write_checkpoint(tmp_path / f"src-{step}", files)
        args = ["push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), "--json"]
        run_env = env
        if step >= 5:  # the two that will be kept also get a W&B pointer
            run_env = wandb_env(tmp_path, hub, step)
            args += ["--wandb-project", "ckpts", "--wandb-run-id", f"run-{step}"]
        run = cli(*args, env=run_env)
        assert run.code == 0, run.stderr
        pushed[step] = (run.json["revision"], files)
        if step >= 5:
            (art,) = decode_single_run(tmp_path / f"wandb-{step}").artifacts
            pointers[step] = art.checkpoint_json_path
    promoted = cli("promote", "--repo", "o/r", "--subfolder", "checkpoint-3", "--to", "release", "--tag", "v1",
                   "--json", env=env)
    assert promoted.code == 0, promoted.stderr
    api = HfApi(endpoint=hub.url)
    commits = len(api.list_repo_commits("o/r"))
    lfs_before = {f.file_oid for f in api.list_lfs_files("o/r")}
    before = used(hub)
    # Only checkpoints 1, 2 and 4 go (5, 6: the last two; 3: promoted); each held one weights file of its own.
    expected = sum(len(pushed[s][1]["model.safetensors"]) for s in (1, 2, 4))

    dry = cli("prune", "--repo", "o/r", "--keep-last", "2", "--free-storage", "--dry-run", "--json", env=env)
    assert dry.code == 0, dry.stderr
    assert sorted(dry.json["deleted"]) == ["checkpoint-1", "checkpoint-2", "checkpoint-4"]
    assert dry.json["freed_bytes"] == expected and dry.json["used_storage_before"] == before
    assert "used_storage_after" not in dry.json and dry.json["dry_run"] is True  # no value: not written
    assert len(api.list_repo_commits("o/r")) == commits and used(hub) == before, "a dry run changes nothing"
    assert {f.file_oid for f in api.list_lfs_files("o/r")} == lfs_before

    summary = tmp_path / "summary.md"
    run = cli("prune", "--repo", "o/r", "--keep-last", "2", "--free-storage", "--json",
              env=dict(env, GITHUB_STEP_SUMMARY=str(summary)))
    assert run.code == 0, run.stderr
    assert "of Hub storage" in summary.read_text() and "- freed " in summary.read_text()
    out = run.json
    assert sorted(out["deleted"]) == ["checkpoint-1", "checkpoint-2", "checkpoint-4"]
    assert out["used_storage_before"] == before and out["used_storage_after"] == used(hub) == before - expected
    assert out["freed_bytes"] == expected
    assert len(api.list_repo_commits("o/r")) == commits + 1, "one commit, no history rewritten"

    # Kept checkpoints at the SHAs push reported, their W&B pointers, and the tag: all pull verified.
    for step in (3, 5, 6):
        sha, files = pushed[step]
        dest = tmp_path / f"pull-{step}"
        got = cli("pull", "--repo", "o/r", "--subfolder", f"checkpoint-{step}", "--revision", sha,
                  "--local-dir", str(dest), "--json", env=env)
        assert got.code == 0, got.stderr
        assert got.json["verified_by"] == "manifest"
        tree = read_tree(dest)
        tree.pop("ckpt-manifest.json")
        assert tree == files
    for step, pointer in pointers.items():
        dest = tmp_path / f"pointer-{step}"
        got = cli("pull", "--pointer", pointer, "--local-dir", str(dest), "--json", env=wandb_env(tmp_path, hub, step))
        assert got.code == 0, got.stderr
        assert got.json["revision"] == pushed[step][0]
    tagged = cli("pull", "--repo", "o/r", "--subfolder", "release", "--revision", "v1", "--local-dir",
                 str(tmp_path / "tag"), "--json", env=env)
    assert tagged.code == 0, tagged.stderr
    assert read_tree(tmp_path / "tag")["model.safetensors"] == pushed[3][1]["model.safetensors"]

    # A pruned checkpoint's old SHA: exit 1, saying why, and nothing written.
    dest = tmp_path / "gone"
    gone = cli("pull", "--repo", "o/r", "--subfolder", "checkpoint-1", "--revision", pushed[1][0],
               "--local-dir", str(dest), env=env)
    assert gone.code == 1, gone.stderr
    assert "deleted to free storage" in gone.stderr and "hash" not in gone.stderr.lower()
    assert not dest.exists() or not any(p for p in dest.rglob("*") if p.name != ".ckpt-pull.json")

    # Running it again finds nothing more to free.
    again = cli("prune", "--repo", "o/r", "--keep-last", "2", "--free-storage", "--json", env=env)
    assert again.code == 0 and again.json["deleted"] == [] and again.json["freed_bytes"] == 0


def test_without_free_storage_prune_frees_nothing(hub, cli, tmp_path):
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    for step in (1, 2, 3):
        assert cli("push", "--repo", "o/r", "--local-dir", str(write_checkpoint(tmp_path / f"s{step}",
                   files_for(step))), "--step", str(step), env=env).code == 0
    before = used(hub)
    run = cli("prune", "--repo", "o/r", "--keep-last", "1", "--json", env=env)
    assert run.code == 0 and sorted(run.json["deleted"]) == ["checkpoint-1", "checkpoint-2"]
    assert "freed_bytes" not in run.json and used(hub) == before


@pytest.mark.parametrize("lands", ["before the prune's commit", "after the prune's commit"])
def test_the_api_keeps_an_old_release_and_a_push_that_lands_meanwhile(hub, tmp_path, monkeypatch, lands):
    url = hub.url
    handles = {}
    for step in (1, 2, 3, 4):
        src = write_checkpoint(tmp_path / f"s{step}", files_for(step))
        handles[step] = ckpt.push(src, repo="o/r", step=step, endpoint=url)
    # An older release, promoted from checkpoint-1 and tagged; the tag is dropped later, so
    # checkpoint-1 itself is pruned, but the release at that commit shares its objects.
    old_release = ckpt.promote(handles[1], "release", endpoint=url)
    ckpt.promote(handles[4], "release", endpoint=url)
    api = HfApi(endpoint=url)
    before = used(hub)

    # A push that lands while prune reads the history: the same bytes as checkpoint-2 (which is
    # pruned), pushed again as checkpoint-9. It must survive.
    from ckpt_action.stores.hub.repo import RemoteRepo

    real_history = RemoteRepo.history
    late: dict[str, object] = {}
    refs = api.list_repo_refs("o/r")
    tips = {b.target_commit for b in refs.branches} | {t.target_commit for t in refs.tags}

    def history(self, sha, *, until, limit):
        # Before: while the history is read ahead of the commit. After: when prune reads its own commit.
        if not late and (lands.startswith("before") or sha not in tips):
            late["handle"] = ckpt.push(tmp_path / "s2", repo="o/r", subfolder="checkpoint-9", endpoint=url)
        return real_history(self, sha, until=until, limit=limit)

    monkeypatch.setattr(RemoteRepo, "history", history)
    res = ckpt.prune("o/r", keep_last=1, free_storage=True, endpoint=url)
    monkeypatch.setattr(RemoteRepo, "history", real_history)
    assert sorted(res.deleted) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    # checkpoint-1's weights are named by the old release, checkpoint-2's by checkpoint-9: only 3's go.
    assert res.freed_objects == 1
    # The Hub's figure: checkpoint-3's weights, less the small manifest the late push added.
    assert res.freed_bytes == res.used_storage_before - res.used_storage_after
    assert SIZE + 3 - 5000 < res.freed_bytes <= SIZE + 3
    assert res.used_storage_after == used(hub) and res.used_storage_before is not None
    assert res.used_storage_after < before
    for handle in (old_release, late["handle"], handles[4]):
        assert isinstance(handle, ckpt.CheckpointHandle)
        dest = ckpt.pull(handle, tmp_path / f"pull-{handle.subfolder}-{handle.revision[:7]}", endpoint=url)
        assert (dest / "model.safetensors").exists()
    with pytest.raises(NotFoundError, match="deleted to free storage"):
        ckpt.pull(handles[3], tmp_path / "gone", endpoint=url)
    assert late, "the concurrent push ran"
    assert "checkpoint-9" in {f.split("/")[0] for f in api.list_repo_files("o/r")}


@pytest.mark.parametrize("bound", ["MAX_HISTORY_COMMITS", "MAX_FOLDER_VERSIONS"])
def test_a_history_past_the_bound_is_refused_before_anything_is_written(hub, tmp_path, monkeypatch, bound):
    from ckpt_action.errors import LimitError
    from ckpt_action.ops import freeing

    url = hub.url
    for step in (1, 2, 3):
        ckpt.push(write_checkpoint(tmp_path / f"s{step}", files_for(step)), repo="o/r", step=step, endpoint=url)
    api = HfApi(endpoint=url)
    commits = len(api.list_repo_commits("o/r"))
    monkeypatch.setattr(freeing, bound, 2)
    with pytest.raises(LimitError, match="prune without free_storage="):
        ckpt.prune("o/r", keep_last=1, free_storage=True, endpoint=url)
    assert len(api.list_repo_commits("o/r")) == commits


def test_the_release_pipelines_guide_states_the_history_bound():
    from pathlib import Path

    from ckpt_action.ops.freeing import MAX_HISTORY_COMMITS

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "release-pipelines.md").read_text()
    assert f"at most {MAX_HISTORY_COMMITS:,} commits" in readme
