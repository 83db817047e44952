"""A job restarted on the same disk resumes (issue 28, finding 3): ``resume_from_hub`` puts the
verified copy of the Hub's newest checkpoint where the Trainer's own ``checkpoint-N`` is,
moving the Trainer's dir aside (never deleting it), whole or torn; the resumed job pushes on,
the pulled dir included. Also: the first-run hint names a parameter ``resume_from_hub`` has,
no staging dir outlives its push."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

from transformers import TrainerState

import ckpt_action as ckpt
from ckpt_action.api import pulled_checkpoint
from ckpt_action.integrations.transformers import STAGING_DIR, CheckpointCallback, resume_from_hub
from ckpt_localhub import LocalHub
from tests.conftest import read_tree
from tests.integration.test_trainer_callback import REPO, hook_args, make_trainer, save


def moved_aside(out: Path, name: str) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.name.startswith(f"replaced-{name}-"))


@pytest.mark.parametrize("torn", [False, True], ids=["whole-save", "torn-save"])
def test_a_job_restarted_on_the_same_disk_resumes_over_the_trainers_own_save(local_hub: LocalHub, tmp_path: Path,
                                                                            caplog: pytest.LogCaptureFixture,
                                                                            torn: bool) -> None:
    out = tmp_path / "out"
    first = CheckpointCallback(repo=REPO, endpoint=local_hub.url, push_every_save=True)
    make_trainer(out, 4, [first]).train()
    assert [h.subfolder for h in first.pushed] == ["checkpoint-2", "checkpoint-4"]
    own = out / "checkpoint-4"
    if torn:  # the job died while Trainer wrote it: files missing
        for name in ("model.safetensors", "optimizer.pt"):
            (own / name).unlink()
    before = read_tree(own)

    # The restart: same output_dir, the Trainer's checkpoint-4 still there.
    with caplog.at_level(logging.INFO, logger="ckpt_action"):
        path = resume_from_hub(REPO, out, endpoint=local_hub.url)
    assert path == str(own)
    assert pulled_checkpoint(own) == (REPO, "checkpoint-4", first.pushed[-1].revision)
    assert read_tree(own) == read_tree(ckpt.pull(first.pushed[-1], tmp_path / "reference", endpoint=local_hub.url))
    (aside,) = moved_aside(out, "checkpoint-4")
    assert read_tree(aside) == before, "nothing of the Trainer's own save is deleted"
    assert any(aside.name in r.getMessage() for r in caplog.records), "the log says where it went"
    assert not [p for p in out.iterdir() if ".ckpt-" in p.name], "no staging dir or lock left"

    # The job goes on from there and pushes; a push of the pulled dir itself works too.
    second = CheckpointCallback(repo=REPO, endpoint=local_hub.url, push_every_save=True)
    trainer = make_trainer(out, 6, [second])
    trainer.train(resume_from_checkpoint=path)
    assert [h.subfolder for h in second.pushed] == ["checkpoint-6"]
    args, control = hook_args(out)
    state = TrainerState(global_step=4)
    second.on_save(args, state, control)
    second.on_train_end(args, state, control)
    assert [h.subfolder for h in second.pushed][-1] == "checkpoint-4" and second.failures == []
    assert second.pushed[-1].revision == ckpt.latest(REPO, endpoint=local_hub.url).revision

    # Restarted once more: the pulled copy is updated in place, nothing more moved aside.
    assert resume_from_hub(REPO, out, endpoint=local_hub.url) == str(out / "checkpoint-6")
    assert len(moved_aside(out, "checkpoint-6")) == 1 and len(moved_aside(out, "checkpoint-4")) == 1
    assert resume_from_hub(REPO, out, endpoint=local_hub.url) == str(out / "checkpoint-6")
    assert len(moved_aside(out, "checkpoint-6")) == 1


def test_the_first_run_hint_names_a_parameter_resume_from_hub_has(local_hub: LocalHub, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ckpt_action"):
        assert resume_from_hub("org/none", tmp_path / "out", endpoint=local_hub.url) is None
    (hint,) = [r.getMessage() for r in caplog.records if "does not exist" in r.getMessage()]
    assert "pass require=True" in hint and "require" in inspect.signature(resume_from_hub).parameters
    with pytest.raises(ckpt.NoCheckpointError, match="org/none"):
        resume_from_hub("org/none", tmp_path / "out", endpoint=local_hub.url, require=True)
    assert not (tmp_path / "out").exists()


def test_no_staging_dir_is_left_once_a_push_is_over(local_hub: LocalHub, tmp_path: Path) -> None:
    # The process may die right after a push, before on_train_end: nothing of ours is left.
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    callback = CheckpointCallback(repo=REPO, endpoint=local_hub.url)
    callback.on_train_begin(args, state, control)
    save(callback, args, control, out, 1, state)
    assert callback._queue is not None and callback._queue.wait(timeout=120)
    assert not (out / STAGING_DIR).exists()
    callback.on_train_end(args, state, control)
    assert [h.subfolder for h in callback.pushed] == ["checkpoint-1"]
