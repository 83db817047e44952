"""The Trainer callback in a training log: skipped saves said loudly, every save on request,
one line per push, nothing left behind, and the revisions of earlier pushes after a resume."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

from transformers import TrainerState

import ckpt_action as ckpt
from ckpt_action.integrations.transformers import STAGING_DIR, CheckpointCallback, resume_from_hub
from ckpt_localhub import LocalHub
from tests.integration.test_trainer_callback import REPO, hook_args, make_trainer, save


def test_a_replaced_save_is_a_warning_naming_it_and_listed_in_skipped(local_hub, tmp_path, caplog,
                                                                       monkeypatch) -> None:
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    callback = CheckpointCallback(repo=REPO, endpoint=local_hub.url)
    # The first push is held until the two saves behind it are in: save 2 waits, save 3
    # replaces it, whatever the machine's load (no race with the push's own speed).
    started, release = threading.Event(), threading.Event()
    push = callback._push

    def held(job, distributed=False):
        started.set()
        assert release.wait(timeout=300), "the test never released the first push"
        return push(job, distributed)

    monkeypatch.setattr(callback, "_push", held)
    callback.on_train_begin(args, state, control)
    with caplog.at_level(logging.WARNING, logger="ckpt_action"):
        try:
            save(callback, args, control, out, 1, state)
            assert started.wait(timeout=300), "the first push never started"
            save(callback, args, control, out, 2, state)
            save(callback, args, control, out, 3, state)
            # Said when it is skipped, in the save that replaced it, not at the end of training.
            warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert any("checkpoint-2 was not pushed" in m and "push_every_save=True" in m for m in warned), warned
        finally:
            release.set()
        callback.on_train_end(args, state, control)
    assert callback.skipped == ["checkpoint-2"]
    assert [h.subfolder for h in callback.pushed] == ["checkpoint-1", "checkpoint-3"]
    assert not (out / STAGING_DIR).exists(), "the staging dir is removed once the pushes are done"


def test_push_every_save_pushes_each_one_in_order_with_one_line_each(local_hub, tmp_path, capsys, monkeypatch):
    hub = local_hub
    monkeypatch.setenv("CKPT_PROGRESS_INTERVAL", "0.01")  # the CLI would print progress lines this often
    from huggingface_hub.utils import are_progress_bars_disabled

    bars_before = are_progress_bars_disabled()
    out = tmp_path / "out"
    args, control = hook_args(out)
    state = TrainerState()
    callback = CheckpointCallback(repo=REPO, endpoint=hub.url, push_every_save=True, max_waiting=2)
    # Saves come faster than the pushes end: the first is held until the two saves behind
    # it are in (the most that may wait), whatever the machine's load.
    started, release = threading.Event(), threading.Event()
    push = callback._push

    def held(job, distributed=False):
        if not started.is_set():
            started.set()
            assert release.wait(timeout=300), "the test never released the first push"
        return push(job, distributed)

    monkeypatch.setattr(callback, "_push", held)
    callback.on_train_begin(args, state, control)
    assert are_progress_bars_disabled(), "no client bars in a log (stderr is not a terminal here)"
    try:
        save(callback, args, control, out, 1, state)
        assert started.wait(timeout=300), "the first push never started"
        save(callback, args, control, out, 2, state)
        save(callback, args, control, out, 3, state)
    finally:
        release.set()
    save(callback, args, control, out, 4, state)
    callback.on_train_end(args, state, control)
    assert are_progress_bars_disabled() == bars_before, "the client's bars are as they were after training"
    assert [h.step for h in callback.pushed] == [1, 2, 3, 4] and callback.skipped == []
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "checkpoint-" in line]
    assert len(lines) == 4, err
    for n, (line, handle) in enumerate(zip(lines, callback.pushed, strict=True), start=1):
        assert re.fullmatch(rf"ckpt-action: pushed checkpoint-{n} at {handle.revision}: .+ in \d+\.\d s", line)
    assert not (out / STAGING_DIR).exists()


def test_bad_queue_options_fail_before_training() -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ckpt.InputError, match="max_waiting"):
            CheckpointCallback(repo=REPO, endpoint="http://127.0.0.1:9", max_waiting=bad)


def test_after_resume_from_hub_the_history_holds_the_resumed_checkpoints_revision(local_hub: LocalHub,
                                                                                  tmp_path: Path) -> None:
    first = CheckpointCallback(repo=REPO, endpoint=local_hub.url, push_every_save=True)
    make_trainer(tmp_path / "run1", 4, [first]).train()
    revisions = {h.subfolder: h.revision for h in first.pushed}
    assert sorted(revisions) == ["checkpoint-2", "checkpoint-4"]

    out = tmp_path / "run2"  # another machine: only the Hub
    path = resume_from_hub(REPO, out, endpoint=local_hub.url)
    assert path == str(out / "checkpoint-4")
    second = CheckpointCallback(repo=REPO, endpoint=local_hub.url, push_every_save=True)
    trainer = make_trainer(out, 6, [second])
    trainer.train(resume_from_checkpoint=path)
    history = {e["checkpoint"]: e["checkpoint_revision"] for e in trainer.state.log_history if "checkpoint" in e}
    assert history["checkpoint-4"] == revisions["checkpoint-4"], history  # the resumed one, from the pull record
    assert history["checkpoint-6"] == second.pushed[-1].revision
    for name, sha in history.items():  # any earlier one the resumed checkpoint recorded is the right one
        assert sha == {**revisions, "checkpoint-6": second.pushed[-1].revision}[name]
