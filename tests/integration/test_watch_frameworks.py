"""`Watcher` around the real transformers Trainer and accelerate's `save_state` (CPU, a tiny model
from a config): every save pushed, and a save that dies half-way (an exception in the middle of
the framework's own save code) never pushed however long it stays quiet. torch DCP, Lightning and
Orbax run for real beside this file (test_watch_dcp.py, test_watch_lightning.py, test_watch_orbax.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="needs the transformers extra (requirements-transformers.lock)")
pytest.importorskip("accelerate", reason="needs the transformers extra (requirements-transformers.lock)")

import torch
from transformers import Trainer

import ckpt_action as ckpt
from ckpt_action.watch.watcher import Watcher
from tests.helpers.dead_saves import WATCH as DEAD_SAVE
from tests.integration.test_trainer_callback import make_trainer
from tests.integration.test_watch import wait_for

REPO = "me/watched-framework"


def hub_files(url: str, subfolder: str, dest: Path, *, repo: str = REPO) -> dict[str, bytes]:
    handle = ckpt.latest(repo, endpoint=url)
    assert handle is not None
    found = [c for c in ckpt.list_checkpoints(repo, endpoint=url) if c.subfolder == subfolder]
    assert found and found[0].status == "complete"
    path = Path(ckpt.pull(repo, dest, subfolder=subfolder, endpoint=url))
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*")
            if p.is_file() and p.name not in ("ckpt-manifest.json", ".ckpt-pull.json")}


def local_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_trainer_every_save_pushed_as_it_was_written(local_hub, tmp_path):
    out = tmp_path / "out"
    with Watcher(out, REPO, endpoint=local_hub.url, poll=0.05, uploader="thread", grace=120) as watcher:
        make_trainer(out, 4, []).train()
    report = watcher.report
    assert report.framework == "trainer"
    # Sorted: a save still waiting when training ends is pushed at the stop, where the newest
    # goes first (the preemption rule), so the order depends on how fast the pushes ran.
    assert sorted(n for n, _, _ in report.pushed) == ["checkpoint-2", "checkpoint-4"], report
    for name in ("checkpoint-2", "checkpoint-4"):
        got = hub_files(local_hub.url, name, tmp_path / "back" / name)
        assert got == local_files(out / name)


def test_a_trainer_save_that_dies_half_way_is_never_pushed(local_hub, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real = Trainer._save_rng_state

    def dies_on_the_second_save(self, output_dir):
        if self.state.global_step == 4:  # after the model and optimizer, before trainer_state.json
            raise RuntimeError("killed mid-save")
        return real(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_rng_state", dies_on_the_second_save)
    watcher = Watcher(out, REPO, endpoint=local_hub.url, poll=0.05, uploader="thread", **DEAD_SAVE).start()
    try:
        with pytest.raises(RuntimeError, match="killed mid-save"):
            make_trainer(out, 4, []).train()
        assert (out / "checkpoint-4" / "optimizer.pt").is_file()
        assert not (out / "checkpoint-4" / "trainer_state.json").exists()
    finally:
        report = watcher.stop(grace=60)
    assert [n for n, _, _ in report.pushed] == ["checkpoint-2"]
    assert report.incomplete == ["checkpoint-4"]
    assert [c.subfolder for c in ckpt.list_checkpoints(REPO, endpoint=local_hub.url)] == ["checkpoint-2"]


def accelerate_run(project: Path, saves: int, *, die_on: int | None = None) -> None:
    """accelerate's own checkpoint naming (project/checkpoints/checkpoint_N, N from 1)."""
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    accelerator = Accelerator(cpu=True, project_config=ProjectConfiguration(
        project_dir=str(project), automatic_checkpoint_naming=True, iteration=1))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    for i in range(1, saves + 1):
        loss = model(torch.randn(4, 16)).sum()
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        if i == die_on:  # the scheduler's state is saved after the weights and optimizer, before the RNG
            def dies() -> dict:
                raise RuntimeError("killed mid-save")

            scheduler.state_dict = dies
        accelerator.save_state()


def test_accelerate_save_state_pushed_and_a_save_that_dies_half_way_never(local_hub, tmp_path):
    project = tmp_path / "project"
    checkpoints = project / "checkpoints"
    watcher = Watcher(checkpoints, REPO, endpoint=local_hub.url, poll=0.05, uploader="thread", **DEAD_SAVE).start()
    try:
        with pytest.raises(RuntimeError, match="killed mid-save"):
            accelerate_run(project, 3, die_on=3)
        assert (checkpoints / "checkpoint_3" / "optimizer.bin").is_file()
        assert not (checkpoints / "checkpoint_3" / "random_states_0.pkl").exists()
        wait_for(lambda: len(watcher.report.pushed) == 2)  # in step order, before the stop's newest-first
    finally:
        report = watcher.stop(grace=60)
    assert report.framework == "accelerate", report
    assert [n for n, s, _ in report.pushed] == ["checkpoint_1", "checkpoint_2"]
    assert [s for n, s, _ in report.pushed] == ["checkpoint-1", "checkpoint-2"]
    assert report.incomplete == ["checkpoint_3"]
    got = hub_files(local_hub.url, "checkpoint-2", tmp_path / "back")
    assert got == local_files(checkpoints / "checkpoint_2")
