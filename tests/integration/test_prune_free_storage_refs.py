"""``prune --free-storage`` reads every ref, not only ``main`` (issue 27, items 27 and 28): a pruned
folder that another branch's head holds is not freed, and the history of a tag that sits on no
branch's history keeps what it names."""

from __future__ import annotations

import os

from huggingface_hub import HfApi, hf_hub_download

import ckpt_action as ckpt
from tests.conftest import write_checkpoint

REPO = "o/r"


def _push_three(hub, tmp_path) -> dict[int, bytes]:
    weights = {}
    for step in (1, 2, 3):
        weights[step] = os.urandom(200_000 + step)
        src = write_checkpoint(tmp_path / f"s{step}", {"model.safetensors": weights[step]})
        ckpt.push(src, repo=REPO, step=step, endpoint=hub.url)
    return weights


def test_a_pruned_folder_another_branch_holds_is_not_freed(local_hub, hf_client, tmp_path):
    weights = _push_three(local_hub, tmp_path)
    api = HfApi(endpoint=local_hub.url)
    api.create_branch(REPO, branch="other")  # its head holds checkpoint-1 to 3, the same objects
    res = ckpt.prune(REPO, keep_last=1, free_storage=True, endpoint=local_hub.url)
    assert sorted(res.deleted) == ["checkpoint-1", "checkpoint-2"]
    assert res.freed_objects == 0 and res.freed_bytes == 0
    for step in (1, 2):
        path = hf_hub_download(REPO, f"checkpoint-{step}/model.safetensors", revision="other",
                               endpoint=local_hub.url, cache_dir=hf_client)
        assert open(path, "rb").read() == weights[step]


def test_a_tag_on_no_branch_keeps_what_its_history_names(local_hub, hf_client, tmp_path):
    weights = _push_three(local_hub, tmp_path)
    api = HfApi(endpoint=local_hub.url)
    # A tag off every branch: made on a branch that then goes, naming checkpoint-1's weights elsewhere.
    api.create_branch(REPO, branch="exp")
    api.upload_file(path_or_fileobj=weights[1], path_in_repo="keep/model.safetensors", repo_id=REPO, revision="exp")
    api.create_tag(REPO, tag="v-exp", revision="exp")
    api.delete_branch(REPO, branch="exp")
    refs = api.list_repo_refs(REPO)
    assert [b.name for b in refs.branches] == ["main"] and [t.name for t in refs.tags] == ["v-exp"]
    res = ckpt.prune(REPO, keep_last=1, free_storage=True, endpoint=local_hub.url)
    assert sorted(res.deleted) == ["checkpoint-1", "checkpoint-2"]
    assert res.freed_objects == 1 and res.freed_bytes == len(weights[2]), "only checkpoint-2's weights go"
    path = hf_hub_download(REPO, "keep/model.safetensors", revision="v-exp", endpoint=local_hub.url,
                           cache_dir=hf_client)
    assert open(path, "rb").read() == weights[1]
