"""The transformers Trainer callback: a real Trainer on a tiny model pushes to the local Hub.

A GPT-2 of one layer, built from a config (nothing downloaded), trains a few steps on
CPU. Its saves go through :class:`CheckpointCallback` and the real push; a second job
(another output dir and HF_HOME) resumes from the Hub with :func:`resume_from_hub` and
carries on from that step.
Needs the ``transformers`` extra (``.ci/run`` installs it); skipped without it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

import ckpt_action as ckpt
from ckpt_action.integrations.transformers import (
    STAGING_DIR,
    CheckpointCallback,
    PushFailedError,
    resume_from_hub,
)
from ckpt_localhub import LocalHub
from tests.conftest import read_tree, write_checkpoint
from tests.helpers.localhub_fixtures import REPO_ROOT, make_hub_env
from tests.helpers.wandb_records import decode_single_run

REPO = "org/tiny"
MANIFEST = "ckpt-manifest.json"


class StepCounter(TrainerCallback):
    """How many optimizer steps this process ran (a resumed run skips the ones before)."""

    def __init__(self) -> None:
        self.steps = 0

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self.steps += 1


def make_trainer(output_dir: Path, max_steps: int, callbacks: list[TrainerCallback]) -> Trainer:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))} for _ in range(16)]
    args = TrainingArguments(output_dir=str(output_dir), max_steps=max_steps, save_steps=2,
                             per_device_train_batch_size=4, use_cpu=True, report_to="none", disable_tqdm=True,
                             logging_steps=1, dataloader_num_workers=0, seed=0)
    return Trainer(model=model, args=args, train_dataset=data, callbacks=callbacks)


def resume_job(url: str, output_dir: str) -> dict[str, Any]:
    """The second job: resume from the Hub, train to step 8, say what happened."""
    path = resume_from_hub(REPO, output_dir, endpoint=url)
    counter = StepCounter()
    callback = CheckpointCallback(repo=REPO, endpoint=url)
    trainer = make_trainer(Path(output_dir), 8, [callback, counter])
    trainer.train(resume_from_checkpoint=path)
    return {"resumed_from": path, "global_step": trainer.state.global_step, "steps_run": counter.steps,
            "pushed": [h.subfolder for h in callback.pushed]}


def files_of(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in read_tree(root).items() if k != MANIFEST}


def test_trainer_pushes_every_save_and_a_second_job_resumes_from_the_hub(
        local_hub: LocalHub, wandb_offline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import wandb

    out = tmp_path / "out"
    callback = CheckpointCallback(repo=REPO, endpoint=local_hub.url)
    run = wandb.init(project="tiny", settings=wandb.Settings(silent=True, console="off"))
    try:
        trainer = make_trainer(out, 6, [callback])
        trainer.train()
    finally:
        run.finish()

    # Every save is a candidate; a save may be replaced while another uploads, but the
    # pushes that ran are in order and the last save always goes.
    steps = [h.step for h in callback.pushed]
    assert steps == sorted(set(steps)) and set(steps) <= {2, 4, 6} and steps[-1] == 6, steps
    assert all(len(h.revision) == 40 and h.subfolder == f"checkpoint-{h.step}" for h in callback.pushed)
    found = ckpt.latest(REPO, endpoint=local_hub.url)
    assert found == callback.pushed[-1]
    pulled = ckpt.pull(found, tmp_path / "pulled", endpoint=local_hub.url)
    assert files_of(pulled) == files_of(out / "checkpoint-6")
    recorded = [e for e in trainer.state.log_history if "checkpoint_revision" in e]
    assert [(e["checkpoint"], e["checkpoint_revision"], e["step"]) for e in recorded] == [
        (h.subfolder, h.revision, h.step) for h in callback.pushed]
    assert not any((out / STAGING_DIR).iterdir()) if (out / STAGING_DIR).exists() else True

    wandb.teardown()
    pointers = decode_single_run(wandb_offline).artifacts
    assert [a.checkpoint_json for a in pointers] == [h.to_dict() for h in callback.pushed]
    assert {a.name for a in pointers} == {"org--tiny--checkpoint"}
    assert sorted(pointers[-1].aliases) == ["latest", "step-6"]

    # A fresh machine: nothing local (another output dir, another HF_HOME), the Hub has
    # checkpoint-6. The job runs in this process (W&B ended above): a resume in a new
    # process is tests/e2e/test_distributed_trainer.py's, whose child costs a torch import.
    resumed = tmp_path / "resumed"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home-2"))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    result = resume_job(local_hub.url, str(resumed))
    assert result["resumed_from"] == str(resumed / "checkpoint-6")
    assert (result["global_step"], result["steps_run"]) == (8, 2)
    assert result["pushed"][-1] == "checkpoint-8"
    newest = ckpt.latest(REPO, endpoint=local_hub.url)
    assert newest is not None and newest.step == 8


def test_resume_from_hub_is_none_for_a_first_run(local_hub: LocalHub, tmp_path: Path) -> None:
    assert resume_from_hub("org/empty", tmp_path / "out", endpoint=local_hub.url) is None
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- hooks, driven directly


def hook_args(out: Path) -> tuple[TrainingArguments, TrainerControl]:
    return TrainingArguments(output_dir=str(out), use_cpu=True, report_to="none"), TrainerControl()


def save(callback: CheckpointCallback, args: TrainingArguments, control: TrainerControl, out: Path, step: int,
         state: TrainerState, files: dict[str, bytes] | None = None) -> None:
    """What Trainer does on a save: write output_dir/checkpoint-N, then call on_save."""
    write_checkpoint(out / f"checkpoint-{step}", files or {"model.safetensors": bytes([step]) * 1000})
    state.global_step = step
    callback.on_save(args, state, control)


@pytest.fixture
def faulty_hub(tmp_path: Path, hf_client: Path) -> Any:
    faults = tmp_path / "faults.json"
    faults.write_text("[]")
    with LocalHub(tmp_path / "hub", faults=faults) as hub:
        yield hub, faults


def set_faults(path: Path, rules: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps(rules))
    os.utime(path, (1, 1))  # a new mtime even within one clock tick: the Hub re-reads it


def test_a_failed_push_fails_the_end_of_training_and_leaves_the_hub_as_it_was(
        faulty_hub: tuple[LocalHub, Path], tmp_path: Path) -> None:
    hub, faults = faulty_hub
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, retries=0)
    callback.on_train_begin(args, state, control)
    save(callback, args, control, out, 1, state)
    callback.wait(state)
    assert [h.subfolder for h in callback.pushed] == ["checkpoint-1"]

    set_faults(faults, [{"method": "POST", "path": r"/commit/", "status": 500, "times": -1}])
    save(callback, args, control, out, 2, state)
    with pytest.raises(PushFailedError, match="pushing checkpoint-2 failed") as caught:
        callback.on_train_end(args, state, control)
    assert isinstance(caught.value, ckpt.CkptError) and caught.value.failures[0][0] == "checkpoint-2"
    set_faults(faults, [])
    assert ckpt.latest(REPO, endpoint=hub.url) == callback.pushed[0]
    assert [i.subfolder for i in ckpt.list_checkpoints(REPO, endpoint=hub.url)] == ["checkpoint-1"]


def test_on_failure_warn_logs_instead(faulty_hub: tuple[LocalHub, Path], tmp_path: Path,
                                      caplog: pytest.LogCaptureFixture) -> None:
    hub, faults = faulty_hub
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, retries=0, on_failure="warn")
    set_faults(faults, [{"method": "POST", "path": r"/commit/", "status": 500, "times": -1}])
    save(callback, args, control, out, 1, state)
    with caplog.at_level(logging.WARNING, logger="ckpt_action"):
        callback.on_train_end(args, state, control)
    assert "pushing checkpoint-1 failed" in caplog.text and callback.pushed == []


def test_a_checkpoint_deleted_after_the_save_is_still_pushed_whole(
        local_hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Trainer's save_total_limit deletes old checkpoint dirs while their pushes may still run.
    hub = local_hub
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url)
    removed = threading.Event()
    push = callback._push

    def once_removed(job: Any, distributed: bool = False) -> Any:  # the push starts after the deletion
        assert removed.wait(timeout=300), "the test never deleted the checkpoint"
        return push(job, distributed)

    monkeypatch.setattr(callback, "_push", once_removed)
    files = {"model.safetensors": os.urandom(50_000), "optimizer.pt": os.urandom(20_000)}
    try:
        save(callback, args, control, out, 3, state, files)
        shutil.rmtree(out / "checkpoint-3")
    finally:
        removed.set()
    callback.on_train_end(args, state, control)
    assert [h.step for h in callback.pushed] == [3]
    assert files_of(ckpt.pull(callback.pushed[0], tmp_path / "back", endpoint=hub.url)) == files
    assert not (out / STAGING_DIR).exists() or not any((out / STAGING_DIR).iterdir())


def test_only_the_world_main_process_pushes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState(is_world_process_zero=False)
    callback = CheckpointCallback(repo=REPO, endpoint="http://127.0.0.1:9")  # never reached
    callback.on_train_begin(args, state, control)
    save(callback, args, control, out, 1, state)
    callback.on_train_end(args, state, control)
    assert callback.pushed == [] and callback.failures == []
    assert not (out / STAGING_DIR).exists()


def test_bad_options_fail_before_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    for kwargs in ({"repo": "not a repo"}, {"repo": REPO},  # the public Hub needs a token to write
                   {"repo": REPO, "endpoint": "http://127.0.0.1:9", "on_failure": "ignore"},
                   {"repo": REPO, "endpoint": "http://127.0.0.1:9", "timeout": -1}):
        with pytest.raises(ckpt.InputError):
            CheckpointCallback(**kwargs)
    assert "tok" not in repr(CheckpointCallback(repo=REPO, endpoint="http://127.0.0.1:9", token="tok-secret"))


PUSH_TO_HUB = """
import sys, torch
sys.path.insert(0, {root!r})
from tests.integration.test_trainer_callback import make_trainer
from pathlib import Path
trainer = make_trainer(Path({out!r}), 2, [])
trainer.args.push_to_hub = True
trainer.args.hub_model_id = "org/tiny-card"
trainer.args.hub_strategy = "end"
trainer.train()
print(trainer.push_to_hub(commit_message="end of training").oid)
"""


def test_the_trainers_own_push_to_hub_works_against_the_local_hub(hub_server, tmp_path: Path) -> None:
    """transformers' own Hub integration (a model card, README.md at the root) works
    unchanged against the local Hub: the model card goes through validate-yaml."""
    from huggingface_hub import HfApi

    hub = hub_server()
    env = make_hub_env(hub.url, tmp_path / "hf-home", token="hf_local_dummy")
    code = PUSH_TO_HUB.format(root=str(REPO_ROOT), out=str(tmp_path / "out"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sha = proc.stdout.strip().splitlines()[-1]
    files = set(HfApi(endpoint=hub.url).list_repo_files("org/tiny-card", revision=sha))
    assert {"README.md", "config.json", "model.safetensors"} <= files, files
    assert any(e["path"].startswith("/api/validate-yaml") and e["status"] == 200 for e in hub.log_entries())


@pytest.mark.parametrize(("link", "target", "words"), [
    ("tokenizer", "real-tokenizer", "symlinked directory"),
    ("leak.txt", "{outside}", "pointing outside"),
], ids=["linked-dir", "link-out"])
def test_a_link_in_a_checkpoint_fails_its_push_and_is_never_dropped_or_followed(
        link: str, target: str, words: str, faulty_hub: tuple[LocalHub, Path], tmp_path: Path) -> None:
    hub, _faults = faulty_hub
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not for the Hub")
    files = {"model.safetensors": b"m" * 1000, "real-tokenizer/vocab.json": b"{}"}
    write_checkpoint(out / "checkpoint-1", files)
    os.symlink(target.format(outside=secret), out / "checkpoint-1" / link)
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, retries=0)
    callback.on_train_begin(args, state, control)
    state.global_step = 1
    callback.on_save(args, state, control)
    with pytest.raises(PushFailedError, match=words):
        callback.on_train_end(args, state, control)
    assert callback.pushed == [] and ckpt.list_checkpoints(REPO, endpoint=hub.url) == []


def test_a_link_to_a_file_inside_the_checkpoint_is_pushed_as_push_sees_it(
        faulty_hub: tuple[LocalHub, Path], tmp_path: Path) -> None:
    hub, _faults = faulty_hub
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    files = {"model.safetensors": b"m" * 1000}
    write_checkpoint(out / "checkpoint-1", files)
    os.symlink("model.safetensors", out / "checkpoint-1" / "alias.safetensors")
    os.symlink(out / "checkpoint-1" / "model.safetensors", out / "checkpoint-1" / "absolute.safetensors")
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, retries=0)
    callback.on_train_begin(args, state, control)
    state.global_step = 1
    callback.on_save(args, state, control)
    callback.on_train_end(args, state, control)
    got = files_of(ckpt.pull(callback.pushed[0], tmp_path / "back", endpoint=hub.url))
    assert got == files | {"alias.safetensors": files["model.safetensors"],
                           "absolute.safetensors": files["model.safetensors"]}


def test_the_trainer_pushes_into_a_bucket_and_a_resume_takes_the_last_complete_one(hub_server, xet_client,
                                                                                   tmp_path: Path) -> None:
    from tests.helpers.localhub_fixtures import TOKEN

    hub = hub_server(token=TOKEN)
    uri = "hf://buckets/local-user/ckpts/tiny"
    out = tmp_path / "out"
    callback = CheckpointCallback(repo=uri, endpoint=hub.url, token=TOKEN, log_to_wandb=False)
    make_trainer(out, 4, [callback]).train()
    assert callback.pushed and callback.pushed[-1].subfolder == "checkpoint-4"
    assert all(h.revision.startswith("sha256:") and h.repo == uri for h in callback.pushed)
    path = resume_from_hub(uri, tmp_path / "resumed", endpoint=hub.url, token=TOKEN)
    assert path == str(tmp_path / "resumed" / "checkpoint-4")
    assert files_of(Path(path)) == files_of(out / "checkpoint-4")
