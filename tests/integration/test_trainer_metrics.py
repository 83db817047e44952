"""The Trainer callback records each save's evaluation metrics, and the release pipeline
chooses and keeps by them: train, prune (keep-last 2 + keep-best eval_loss:min), promote
--best eval_loss:min with a tag, pull the release. A tiny GPT-2 on CPU against a local Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import ckpt_action as ckpt
from ckpt_action.integrations.transformers import CheckpointCallback
from tests.conftest import clean_env, read_tree

REPO = "org/tiny"


def train(out: Path, callback: CheckpointCallback, max_steps: int = 8) -> Trainer:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))} for _ in range(16)]
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=2, eval_strategy="steps",
                             eval_steps=2, per_device_train_batch_size=4, use_cpu=True, report_to="none",
                             disable_tqdm=True, logging_steps=1, dataloader_num_workers=0, seed=0, learning_rate=0.05)
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:4], callbacks=[callback])
    trainer.train()
    return trainer


def test_release_pipeline_by_eval_loss(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, push_every_save=True)
    trainer = train(tmp_path / "out", callback)
    evals = {e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}
    assert sorted(evals) == [2, 4, 6, 8]

    # the callback recorded each save's eval metrics in its manifest
    infos = {i.subfolder: i for i in ckpt.list_checkpoints(REPO, endpoint=hub.url)}
    for step, loss in evals.items():
        got = infos[f"checkpoint-{step}"].metrics
        assert got is not None and got["eval_loss"] == pytest.approx(loss), (step, got)

    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    best_step = min(evals, key=lambda s: (evals[s], -s))
    pruned = cli("prune", "--repo", REPO, "--keep-last", "2", "--keep-best", "eval_loss:min", "--card", "--json",
                 env=env)
    assert pruned.code == 0, pruned.stderr
    assert sorted(pruned.json["kept"]) == sorted({"checkpoint-6", "checkpoint-8", f"checkpoint-{best_step}"})

    promoted = cli("promote", "--repo", REPO, "--best", "eval_loss:min", "--to", "release", "--tag", "v1", "--card",
                   "--json", env=env)
    assert promoted.code == 0, promoted.stderr
    assert promoted.json["source_subfolder"] == f"checkpoint-{best_step}"
    assert promoted.json["best_metric"] == "eval_loss"
    assert promoted.json["best_value"] == pytest.approx(evals[best_step])

    dest = tmp_path / "release"
    pulled = cli("pull", "--repo", REPO, "--revision", "v1", "--subfolder", "release", "--local-dir", str(dest),
                 env=env)
    assert pulled.code == 0, pulled.stderr
    got = read_tree(dest)
    manifest = json.loads(got.pop("ckpt-manifest.json"))
    got.pop(".ckpt-pull.json", None)
    assert got == read_tree(tmp_path / "out" / f"checkpoint-{best_step}")
    assert manifest["metrics"]["eval_loss"] == pytest.approx(evals[best_step])
    # the card at the release: every checkpoint kept, the release, their metrics, the tag
    card = _card(hub.url, "v1")
    kept = {"checkpoint-6", "checkpoint-8", f"checkpoint-{best_step}"}
    assert set(card) == kept | {"release"}
    assert card["release"][1] == "this commit" and card["release"][5] == "v1"
    assert card[f"checkpoint-{best_step}"][5] == "v1"
    for name in kept:
        step = int(name.split("-")[1])
        assert card[name][0] == str(step) and card[name][1].startswith("[`") and card[name][3] == "yes"
        assert card[name][2] == f"eval&#95;loss={evals[step]:.6g}" or card[name][2].startswith(
            f"eval&#95;loss={evals[step]:.6g}<br>"), card[name][2]
    # a later prune never takes the promoted, tagged checkpoint
    again = cli("prune", "--repo", REPO, "--keep-last", "1", "--json", env=env)
    assert again.code == 0 and f"checkpoint-{best_step}" in again.json["kept"]


def _card(url: str, revision: str) -> dict[str, list[str]]:
    """The rows of the checkpoints table in README.md at ``revision``: name -> the other cells."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/{REPO}/resolve/{revision}/README.md") as r:
        card = r.read().decode()
    start = card.index("<!-- ckpt-action:checkpoints:start -->")
    end = card.index("<!-- ckpt-action:checkpoints:end -->")
    lines = card[start:end].splitlines()[3:]
    return {cells[0]: cells[1:] for line in lines if (cells := [c.strip() for c in line.strip("|").split("|")])}


def test_the_callback_prunes_by_the_same_rules_and_keeps_the_card(hub_server, hf_client, tmp_path):
    hub = hub_server()
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, push_every_save=True, keep_last=1,
                                  keep_best="eval_loss:min", card=True)
    trainer = train(tmp_path / "out", callback)
    evals = {e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}
    best_step = min(evals, key=lambda s: (evals[s], -s))
    left = {i.subfolder for i in ckpt.list_checkpoints(REPO, endpoint=hub.url)}
    assert left == {"checkpoint-8", f"checkpoint-{best_step}"}
    assert set(_card(hub.url, "main")) == left


@pytest.mark.parametrize("kwargs", [{"keep_last": 0}, {"keep_every": -2}, {"keep_best": "eval_loss"},
                                    {"keep_best": "eval loss:min"}])
def test_bad_retention_options_fail_before_training(kwargs):
    with pytest.raises(ckpt.InputError) as err:
        CheckpointCallback(repo=REPO, endpoint="http://127.0.0.1:9", token="t", **kwargs)
    assert f"{next(iter(kwargs))}=" in str(err.value)
