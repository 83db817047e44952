"""The Trainer callback's pushes off the training's back, and its flush on SIGTERM.

A real Trainer (a GPT-2 of one layer from a config, CPU) in a process of its own, sent
SIGTERM right after a save while an earlier push is still running (the local Hub holds every
commit until the signal is sent): the handler lets the running and the waiting push land, then
the process ends by the signal as before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

import ckpt_action as ckpt
from ckpt_action.integrations import transformers as integration
from ckpt_action.integrations.transformers import CheckpointCallback
from ckpt_localhub import LocalHub, faultlayer
from tests.helpers.localhub_fixtures import REPO_ROOT, make_hub_env
from tests.integration.test_trainer_callback import REPO, make_trainer


class TermAfterSave(TrainerCallback):
    """Sends this process SIGTERM once step ``at`` is saved (the preemption notice)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.global_step == self.at:
            print("SENDING-SIGTERM", flush=True)
            os.kill(os.getpid(), signal.SIGTERM)


def sigterm_main(url: str, output_dir: str) -> None:
    """The training process: saves at 2 and 4 (the first push held at its commit), SIGTERM after 4."""
    callback = CheckpointCallback(repo=REPO, endpoint=url, push_every_save=True)
    trainer = make_trainer(Path(output_dir), 20, [callback, TermAfterSave(4)])
    trainer.train()
    print("TRAINING-ENDED", flush=True)  # never: the signal ends the process


@pytest.mark.process("the training process itself receives SIGTERM and must end by it")
def test_sigterm_during_training_lets_the_waiting_save_land_then_ends_by_the_signal(
        tmp_path: Path, hf_client: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = threading.Event()
    real = faultlayer.around

    def commits_held_until_the_signal(faults: Any, req: Any, route: Any) -> Any:
        if req.method == "POST" and "/commit/" in req.path:
            sent.wait(TIMEOUT)  # checkpoint-2's push is still running when checkpoint-4 is saved
        return real(faults, req, route)

    monkeypatch.setattr(faultlayer, "around", commits_held_until_the_signal)
    stderr_path = tmp_path / "stderr.txt"
    with LocalHub(tmp_path / "hub") as hub, open(stderr_path, "w") as stderr:
        env = make_hub_env(hub.url, tmp_path / "hf-home") | {"WANDB_MODE": "disabled"}
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.test_trainer_sigterm", hub.url,
                                 str(tmp_path / "out")], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=stderr, text=True)
        try:
            assert proc.stdout is not None
            stdout = ""
            for line in proc.stdout:
                stdout += line
                if "SENDING-SIGTERM" in line:
                    break
        finally:
            sent.set()
        try:
            stdout += proc.communicate(timeout=TIMEOUT)[0]
        finally:
            if proc.poll() is None:
                proc.kill()
        log = stdout + stderr_path.read_text()
        assert "SENDING-SIGTERM" in stdout, log[-3000:]
        assert proc.returncode == -signal.SIGTERM, log[-3000:]  # the default action, chained to
        assert "TRAINING-ENDED" not in stdout
        found = ckpt.latest(REPO, endpoint=hub.url)
        assert found is not None and found.subfolder == "checkpoint-4", log[-3000:]
        assert "every saved checkpoint is pushed" in stderr_path.read_text()


TIMEOUT = 300


def test_a_previous_sigterm_handler_is_chained_and_restored_after_training(local_hub: LocalHub,
                                                                           tmp_path: Path) -> None:
    calls: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    try:
        callback = CheckpointCallback(repo=REPO, endpoint=local_hub.url)

        class Term(TrainerCallback):
            def on_step_end(self, args: Any, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
                if state.global_step == 1:
                    os.kill(os.getpid(), signal.SIGTERM)

        make_trainer(tmp_path / "out", 2, [callback, Term()]).train()
        assert calls == [signal.SIGTERM]  # the earlier handler ran, training went on
        assert [h.subfolder for h in callback.pushed] == ["checkpoint-2"]
        assert callback.upload_mode == "process"
        assert signal.getsignal(signal.SIGTERM) != callback._sigterm.handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_upload_process_is_started_when_training_begins_not_at_the_first_save(local_hub: LocalHub,
                                                                                 tmp_path: Path) -> None:
    """Its interpreter start then overlaps Trainer's setup, not the training steps after the
    first save, and that save's push does not wait for it (as ``watch`` starts its child
    before the training command runs)."""
    callback = CheckpointCallback(repo=REPO, endpoint=local_hub.url)
    seen: list[Any] = []

    class AtFirstSave(TrainerCallback):  # runs before the callback's own on_save
        def on_save(self, args: Any, state: TrainerState, control: TrainerControl, **kw: Any) -> None:
            if not seen:
                starter = getattr(callback, "_starter", None)
                if starter is not None:
                    starter.join(60)
                uploader = callback._uploader
                seen.append(uploader is not None and uploader.proc.poll() is None and uploader.priority)

    make_trainer(tmp_path / "out", 2, [AtFirstSave(), callback]).train()
    assert len(seen) == 1 and seen[0] and "nice +10" in seen[0], f"no upload process at the first save: {seen}"
    assert [h.subfolder for h in callback.pushed] == ["checkpoint-2"] and callback.upload_mode == "process"
    assert callback._uploader is None  # closed at the end of training


def test_where_no_process_can_start_the_pushes_run_on_a_thread(local_hub: LocalHub, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot_start(*args: Any, **kwargs: Any) -> None:
        raise OSError("fork not allowed here")

    monkeypatch.setattr(integration, "ProcessUploader", cannot_start)
    callback = CheckpointCallback(repo=REPO, endpoint=local_hub.url)
    make_trainer(tmp_path / "out", 2, [callback]).train()
    assert [h.subfolder for h in callback.pushed] == ["checkpoint-2"]
    assert callback.upload_mode == "thread"
    assert ckpt.latest(REPO, endpoint=local_hub.url) == callback.pushed[-1]


if __name__ == "__main__":
    sigterm_main(sys.argv[1], sys.argv[2])
