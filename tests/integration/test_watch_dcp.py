"""`Watcher` around the real ``torch.distributed.checkpoint.save`` (single process, no process
group: torch saves with ``no_dist``), into ``step_N`` and ``checkpoint-N`` folders: every save
pushed, byte for byte, and a save that dies half-way never pushed however long it stays quiet.

What torch 2.x's ``FileSystemWriter`` does (``torch/distributed/checkpoint/filesystem.py``):
each rank writes its ``__<rank>_<n>.distcp`` files; then ``finish`` (on the coordinator, after
every rank's writes are gathered) pickles the metadata into ``.metadata.tmp``, fsyncs it, removes
an older ``.metadata`` and renames the tmp file to ``.metadata``. With ``use_collectives=False``
there is no coordinator: each rank writes ``__<rank>.metadata.tmp`` and renames it to
``__<rank>.metadata`` (the loader falls back to rank 0's). The replay of the same order is
tests/unit/test_watch_markers.py's ``dcp`` case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the transformers extra (requirements-transformers.lock)")

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import filesystem
from torch.distributed.checkpoint.api import CheckpointException

from ckpt_action.watch.watcher import Watcher
from tests.helpers.dead_saves import WATCH as DEAD_SAVE
from tests.integration.test_watch_frameworks import hub_files, local_files

REPO = "me/watched-framework"


def train_and_save(out: Path, name: str, steps: int, **save_kw: object) -> None:
    """A few SGD steps of a tiny model, a DCP save of model and optimizer after each one."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(1, steps + 1):
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        dcp.save({"model": model.state_dict(), "optim": optimizer.state_dict()},
                 checkpoint_id=out / name.format(step), **save_kw)


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns that no process group is initialized
@pytest.mark.parametrize(("name", "pattern", "save_kw"), [
    ("step_{}", r"step_(\d+)", {}),
    ("checkpoint-{}", None, {}),
    ("checkpoint-{}", None, {"use_collectives": False}),  # rank-local metadata: __0.metadata
], ids=["step_N", "checkpoint-N", "rank-local"])
def test_every_dcp_save_pushed_as_it_was_written(local_hub, tmp_path, name, pattern, save_kw):
    out = tmp_path / "out"
    with Watcher(out, REPO, pattern=pattern, endpoint=local_hub.url, poll=0.05, uploader="thread",
                 grace=120) as watcher:
        train_and_save(out, name, 3, **save_kw)
    report = watcher.report
    assert report.framework == "dcp", report
    assert sorted(n for n, _, _ in report.pushed) == [name.format(s) for s in (1, 2, 3)], report
    assert sorted(s for _, s, _ in report.pushed) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    for step in (1, 3):
        got = hub_files(local_hub.url, f"checkpoint-{step}", tmp_path / "back" / str(step))
        assert got == local_files(out / name.format(step))
        assert ".metadata.tmp" not in got and "__0.metadata.tmp" not in got
    loaded = {"model": torch.nn.Linear(8, 8).state_dict()}
    dcp.load(loaded, checkpoint_id=tmp_path / "back" / "3")  # what the Hub holds loads back
    fresh = {"model": torch.nn.Linear(8, 8).state_dict()}
    dcp.load(fresh, checkpoint_id=out / name.format(3))
    assert all(torch.equal(loaded["model"][k], fresh["model"][k]) for k in fresh["model"])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("save_kw", [{}, {"use_collectives": False}], ids=["coordinated", "rank-local"])
def test_a_dcp_save_that_dies_before_its_metadata_rename_is_never_pushed(local_hub, tmp_path, monkeypatch,
                                                                        save_kw):
    out = tmp_path / "out"
    real = filesystem.FileSystem.rename

    def dies_on_the_second_save(self, path, new_path):
        if Path(path).parent.name == "step_2":  # .metadata.tmp written and fsynced, not renamed yet
            raise RuntimeError("killed mid-save")
        return real(self, path, new_path)

    monkeypatch.setattr(filesystem.FileSystem, "rename", dies_on_the_second_save)
    watcher = Watcher(out, REPO, pattern=r"step_(\d+)", endpoint=local_hub.url, poll=0.05, uploader="thread",
                      **DEAD_SAVE).start()
    try:
        # Coordinated, torch wraps the error in its CheckpointException (a BaseException).
        with pytest.raises((RuntimeError, CheckpointException), match="killed mid-save"):
            train_and_save(out, "step_{}", 3, **save_kw)
        left = sorted(p.name for p in (out / "step_2").iterdir())
        assert any(n.endswith(".distcp") for n in left) and any(n.endswith(".metadata.tmp") for n in left), left
        assert not any(n.endswith(".metadata") for n in left), left
    finally:
        report = watcher.stop(grace=60)
    assert report.framework == "dcp", report
    assert [n for n, _, _ in report.pushed] == ["step_1"], report
    assert report.incomplete == ["step_2"], report
