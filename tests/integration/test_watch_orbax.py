"""`Watcher` around the real Orbax ``CheckpointManager`` (JAX on the CPU, async saves, the default
atomic rename and the commit-file mode): every step pushed once committed, byte for byte, and an
interrupted save never pushed however long it stays quiet.

What orbax-checkpoint 0.12 does (``orbax/checkpoint/_src/path/atomicity.py``):
``AtomicRenameTemporaryPath`` (the default on a POSIX filesystem) saves into
``<step>.orbax-checkpoint-tmp``, then ``finalize`` adds ``commit_timestamp_nsecs`` to
``_CHECKPOINT_METADATA``, writes ``commit_success.txt`` ("Checkpoint commit was successful to
<final path>") in the tmp dir and renames it to ``<step>``. ``CommitFileTemporaryPath`` saves under
``<step>`` directly and writes ``commit_success.txt`` last. The replays of the same are
tests/unit/test_watch_markers.py's ``orbax-rename`` and ``orbax-commit-file`` cases.
"""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("orbax.checkpoint", reason="needs the frameworks lock (requirements-frameworks.lock)")
pytest.importorskip("jax", reason="needs the frameworks lock (requirements-frameworks.lock)")

import jax.numpy as jnp
import orbax.checkpoint as ocp
from orbax.checkpoint._src.path import async_path, atomicity

from ckpt_action.watch.watcher import Watcher
from tests.helpers.dead_saves import STALLED
from tests.helpers.dead_saves import WATCH as DEAD_SAVE
from tests.integration.test_watch_frameworks import hub_files, local_files

REPO = "me/watched-orbax"
MODES = {"atomic-rename": {}, "commit-file": {"temporary_path_class": atomicity.CommitFileTemporaryPath}}


def save_steps(root, steps, **options) -> None:
    with ocp.CheckpointManager(root, options=ocp.CheckpointManagerOptions(max_to_keep=None, **options)) as manager:
        for step in steps:
            manager.save(step, args=ocp.args.StandardSave({"w": jnp.arange(64.0).reshape(8, 8) * step,
                                                           "b": jnp.ones(8) * step}))
        manager.wait_until_finished()


@pytest.mark.parametrize("mode", list(MODES))
def test_every_orbax_step_pushed_once_committed(local_hub, tmp_path, mode):
    root = tmp_path / "ckpts"
    with Watcher(root, REPO, format="orbax", endpoint=local_hub.url, poll=0.05, uploader="thread",
                 grace=120) as watcher:
        save_steps(root, (1, 2, 3), **MODES[mode])
    report = watcher.report
    assert report.framework == "orbax", report
    assert sorted(n for n, _, _ in report.pushed) == ["1", "2", "3"], report
    for step in (1, 3):
        got = hub_files(local_hub.url, f"checkpoint-{step}", tmp_path / "back" / str(step), repo=REPO)
        assert got == local_files(root / str(step))
        assert "commit_success.txt" in got and "default/_METADATA" in got
    restored = ocp.StandardCheckpointer().restore(tmp_path / "back" / "3" / "default")
    assert float(restored["w"][1, 0]) == 8.0 * 3


def test_an_orbax_save_interrupted_before_its_rename_is_never_pushed(local_hub, tmp_path, monkeypatch):
    root = tmp_path / "ckpts"
    real = async_path.rename

    async def dies_renaming_step_2(src, dst):
        if os.path.basename(str(dst)) == "2":  # commit_success.txt written in the tmp dir, not renamed yet
            raise RuntimeError("killed mid-save")
        return await real(src, dst)

    monkeypatch.setattr(async_path, "rename", dies_renaming_step_2)
    watcher = Watcher(root, REPO, format="orbax", endpoint=local_hub.url, poll=0.05, uploader="thread",
                      **DEAD_SAVE).start()
    try:
        with pytest.raises(RuntimeError, match="killed mid-save"):
            save_steps(root, (1, 2, 3))
        left = sorted(p.name for p in root.iterdir())
        assert left == ["1", "2.orbax-checkpoint-tmp"], left
        assert (root / "2.orbax-checkpoint-tmp" / "commit_success.txt").is_file()
        time.sleep(STALLED)  # no checkpoint to the scanner, so stop() waits for none: quiet past settle first
    finally:
        report = watcher.stop(grace=60)
    assert report.framework == "orbax", report
    assert [n for n, _, _ in report.pushed] == ["1"], report


def test_an_orbax_commit_file_save_interrupted_before_its_commit_file_is_never_pushed(local_hub, tmp_path,
                                                                                       monkeypatch):
    root = tmp_path / "ckpts"
    real = atomicity.CommitFileTemporaryPath.finalize

    async def dies_finalizing_step_2(self):
        if self.get_final().name == "2":  # the data and _CHECKPOINT_METADATA written, no commit yet
            raise RuntimeError("killed mid-save")
        return await real(self)

    monkeypatch.setattr(atomicity.CommitFileTemporaryPath, "finalize", dies_finalizing_step_2)
    watcher = Watcher(root, REPO, format="orbax", endpoint=local_hub.url, poll=0.05, uploader="thread",
                      **DEAD_SAVE).start()
    try:
        with pytest.raises(RuntimeError, match="killed mid-save"):
            save_steps(root, (1, 2, 3), **MODES["commit-file"])
        assert (root / "2" / "_CHECKPOINT_METADATA").is_file()
        assert not (root / "2" / "commit_success.txt").exists()
    finally:
        report = watcher.stop(grace=60)
    assert [n for n, _, _ in report.pushed] == ["1"], report
    assert report.incomplete == ["2"], report
