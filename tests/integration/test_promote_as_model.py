"""promote --as-model: a Trainer run's best checkpoint becomes a folder ``from_pretrained``
loads, tagged, with nothing a resumed training alone reads (optimizer, scheduler, RNG, trainer
state, training arguments, pickles), its kept files copied on the server. A tiny GPT-2 on CPU
against a local Hub; the release is loaded in a fresh process through the Hub's own API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

import torch
from transformers import AutoModelForCausalLM

import ckpt_action as ckpt
from ckpt_action.integrations.transformers import CheckpointCallback
from tests.conftest import clean_env, read_tree
from tests.integration.test_trainer_metrics import train

REPO = "org/tiny"
INPUT = [[1, 5, 9, 13, 2, 7]]
LOAD = """
import json, sys, torch
from transformers import AutoModelForCausalLM
repo, subfolder, revision, out = sys.argv[1:]
model = AutoModelForCausalLM.from_pretrained(repo, subfolder=subfolder, revision=revision)
model.eval()
with torch.no_grad():
    logits = model(torch.tensor(INPUT)).logits
json.dump(logits.tolist(), open(out, "w"))
""".replace("INPUT", repr(INPUT))
TRAINING_ONLY = {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin"}


def logits_of(path: Path) -> torch.Tensor:
    model = AutoModelForCausalLM.from_pretrained(path)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor(INPUT)).logits


def load_from_hub(env: dict[str, str], tmp_path: Path, subfolder: str, revision: str) -> torch.Tensor:
    """``from_pretrained`` in a fresh process, reading the release through the Hub's API."""
    out = tmp_path / f"logits-{subfolder.replace('/', '_')}-{revision}.json"
    run = subprocess.run([sys.executable, "-c", LOAD, REPO, subfolder, revision, str(out)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return torch.tensor(json.loads(out.read_text()))


def release_files(endpoint: str, revision: str, folder: str = "release") -> set[str]:
    from huggingface_hub import HfApi

    files = HfApi(endpoint=endpoint).list_repo_files(REPO, revision=revision)
    return {f.removeprefix(folder + "/") for f in files if f.startswith(folder + "/")}


def lfs_bytes_uploaded(entries):
    return sum(e["bytes_in"] for e in entries if e["method"] == "PUT")


@pytest.mark.process("from_pretrained loads the release in a fresh process, as a user of the release would")
def test_the_best_trainer_checkpoint_promoted_as_a_model_loads_with_the_same_logits(hub_server, hf_client, cli,
                                                                                   tmp_path):
    hub = hub_server()
    trainer = train(tmp_path / "out", CheckpointCallback(repo=REPO, endpoint=hub.url, push_every_save=True))
    evals = {e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}
    best = min(evals, key=lambda s: (evals[s], -s))
    saved = tmp_path / "out" / f"checkpoint-{best}"
    before = set(read_tree(saved))
    assert TRAINING_ONLY <= before, before  # what the Trainer saves, the release leaves out

    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    start = len(hub.log_entries())
    run = cli("promote", "--repo", REPO, "--best", "eval_loss:min", "--as-model", "--to", "release", "--tag", "v1",
              "--card", "--json", env=env)
    assert run.code == 0, run.stderr
    assert run.json["source_subfolder"] == f"checkpoint-{best}" and run.json["commits"] == 1
    entries = hub.log_entries()[start:]
    assert lfs_bytes_uploaded(entries) == 0, "the kept files are copied on the server: no checkpoint byte goes up"
    assert len([e for e in entries if e["method"] == "POST" and "/commit/" in e["path"]]) == 1
    for name in TRAINING_ONLY:
        assert name in run.stderr  # the one line naming what was left out

    files = ckpt.list_checkpoints(REPO, endpoint=hub.url, revision="v1")
    release = next(i for i in files if i.subfolder == "release")
    assert release.status == "complete" and release.step == best
    assert release.source == {"repo": REPO, "subfolder": f"checkpoint-{best}", "revision": run.json["source_revision"]}
    assert release.metrics is not None and release.metrics["eval_loss"] == pytest.approx(evals[best])
    listed = cli("list", "--repo", REPO, "--revision", "v1", env=env)
    assert f"from checkpoint-{best}@{run.json['source_revision'][:12]}" in listed.stdout, listed.stdout

    dest = tmp_path / "release"
    pulled = cli("pull", "--repo", REPO, "--revision", "v1", "--subfolder", "release", "--local-dir", str(dest),
                 "--include", "*.json", env=env)
    assert pulled.code == 0, pulled.stderr
    got = read_tree(dest)
    got.pop(".ckpt-pull.json", None)
    assert set(got) == {"config.json", "generation_config.json", "ckpt-manifest.json"}
    assert got["config.json"] == read_tree(saved)["config.json"]
    assert release_files(hub.url, "v1") == {"config.json", "generation_config.json", "model.safetensors",
                                            "ckpt-manifest.json"}

    hub_logits = load_from_hub(env, tmp_path, "release", "v1")
    assert torch.equal(hub_logits, logits_of(saved))
    # The release is the model of the best checkpoint, not of the last one.
    if best != max(evals):
        assert not torch.equal(hub_logits, logits_of(tmp_path / "out" / f"checkpoint-{max(evals)}"))

    again = cli("promote", "--repo", REPO, "--best", "eval_loss:min", "--as-model", "--to", "release", "--tag", "v1",
                "--json", env=env)
    assert again.code == 0 and again.json["revision"] == run.json["revision"], again.stderr
