"""A real Trainer on two simulated nodes (gloo, save_on_each_node, no shared filesystem)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.dist_helpers import ROOT, two_nodes
from tests.helpers.localhub_fixtures import TOKEN, make_hub_env

pytest.importorskip("transformers", reason="the Trainer test needs the [transformers] extra")
REPO = "org/trainer"
SCRIPT = ROOT / "tests" / "helpers" / "dist_trainer_script.py"


@pytest.mark.timeout(600)
def test_every_checkpoint_holds_both_nodes_files_and_a_new_job_resumes(hub_server, hf_client, tmp_path):
    from huggingface_hub import HfApi

    import ckpt_action as ckpt

    server = hub_server(token=TOKEN)

    def job(mode: str) -> list[dict]:
        base = tmp_path / mode
        base.mkdir()
        env = make_hub_env(server.url, tmp_path / "hf_home", server.token)
        env.update(REPO=REPO, MODE=mode, OUT_BASE=str(base), CKPT_DISTRIBUTED_TIMEOUT="60",
                   WANDB_MODE="disabled", CKPT_RETRY_DELAY="0.05")
        launches = two_nodes([str(SCRIPT)], [env, env], tmp_path, nproc=1)
        assert [code for code, _ in launches] == [0, 0], launches[0][1][-3000:] + launches[1][1][-3000:]
        return [json.loads((base / f"rank-{r}.json").read_text()) for r in range(2)]

    trained = job("train")
    assert trained[0]["pushed"] == trained[1]["pushed"] and [s for s, _ in trained[0]["pushed"]] == [
        "checkpoint-2", "checkpoint-4"]
    api = HfApi(endpoint=server.url, token=TOKEN)
    for subfolder, sha in trained[0]["pushed"]:
        names = {Path(f).name for f in api.list_repo_files(REPO, revision=sha) if f.startswith(subfolder + "/")}
        # Each node wrote its own process's RNG state: both are in the one commit.
        assert {"rng_state_0.pth", "rng_state_1.pth", "model.safetensors", "ckpt-manifest.json"} <= names, names
    assert len([c for c in api.list_repo_commits(REPO) if c.title.startswith("Push")]) == 2
    found = ckpt.latest(REPO, endpoint=server.url, token=TOKEN)
    assert found is not None and found.subfolder == "checkpoint-4"

    resumed = job("resume")
    for node, record in enumerate(resumed):
        assert record["resumed_from"] == str(tmp_path / "resume" / f"node{node}" / "checkpoint-4")
        assert record["global_step"] == 6
    assert [s for s, _ in resumed[0]["pushed"]] == ["checkpoint-6"]
