"""`Watcher` around the real PyTorch Lightning Trainer with ``ModelCheckpoint(every_n_train_steps,
save_top_k=-1)`` (CPU, a tiny model, a few steps): every checkpoint file pushed, byte for byte,
and a save that dies half-way never pushed however long it stays quiet.

What Lightning 2.x does (``ModelCheckpoint._save_checkpoint`` -> ``Trainer.save_checkpoint`` ->
``TorchCheckpointIO.save_checkpoint`` -> ``lightning.fabric.utilities.cloud_io._atomic_save``):
``torch.save`` into a memory buffer, then, in an fsspec transaction, the buffer is written to a
temporary file (``tempfile.mkstemp``: the system's temp dir) and moved to ``epoch=E-step=S.ckpt``
on commit (``LocalFileOpener.commit`` -> ``shutil.move``): a rename on the same filesystem, a copy
where the temp dir is another one, so the final name can be seen half-written. The dying save
here is that copy cut half-way. The replay of the same is tests/unit/test_watch_markers.py's
``lightning`` case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lightning", reason="needs the frameworks lock (requirements-frameworks.lock)")

import lightning as L
import torch
from fsspec.implementations.local import LocalFileOpener
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

from ckpt_action.watch import markers
from ckpt_action.watch.watcher import Watcher
from tests.helpers.dead_saves import WATCH as DEAD_SAVE
from tests.integration.test_watch_frameworks import hub_files

REPO = "me/watched-lightning"


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 8)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(ckpt_dir: Path, root: Path, steps: int) -> None:
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=4)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=root,
                        callbacks=[ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=2, save_top_k=-1)])
    trainer.fit(Tiny(), data)


def test_every_modelcheckpoint_file_pushed_as_it_was_written(local_hub, tmp_path):
    ckpts = tmp_path / "ckpts"
    with Watcher(ckpts, REPO, format="lightning", endpoint=local_hub.url, poll=0.05, uploader="thread",
                 grace=120) as watcher:
        fit(ckpts, tmp_path, 6)
    report = watcher.report
    names = [f"epoch=0-step={s}.ckpt" for s in (2, 4, 6)]
    assert sorted(p.name for p in ckpts.iterdir()) == names
    assert report.framework == "lightning", report
    assert sorted(n for n, _, _ in report.pushed) == names, report
    assert sorted(s for _, s, _ in report.pushed) == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    for step, name in zip((2, 4, 6), names, strict=True):
        got = hub_files(local_hub.url, f"checkpoint-{step}", tmp_path / "back" / str(step), repo=REPO)
        assert got == {name: (ckpts / name).read_bytes()}
    state = torch.load(tmp_path / "back" / "6" / names[-1], weights_only=False)
    assert state["global_step"] == 6 and "layer.weight" in state["state_dict"]


def test_a_modelcheckpoint_save_cut_half_way_is_never_pushed(local_hub, tmp_path, monkeypatch):
    ckpts = tmp_path / "ckpts"
    real = LocalFileOpener.commit

    def dies_moving_the_second_save(self):
        if Path(self.path).name != "epoch=0-step=4.ckpt":
            return real(self)
        # The move of a temp file from another filesystem is a copy: cut half-way, as a kill would.
        data = Path(self.temp).read_bytes()
        Path(self.path).write_bytes(data[: len(data) // 2])
        raise RuntimeError("killed mid-save")

    monkeypatch.setattr(LocalFileOpener, "commit", dies_moving_the_second_save)
    watcher = Watcher(ckpts, REPO, format="lightning", endpoint=local_hub.url, poll=0.05, uploader="thread",
                      **DEAD_SAVE).start()
    try:
        with pytest.raises(RuntimeError, match="killed mid-save"):
            fit(ckpts, tmp_path, 6)
        torn = ckpts / "epoch=0-step=4.ckpt"
        assert torn.stat().st_size > 0 and not markers.whole_zip(torn)
    finally:
        report = watcher.stop(grace=60)
    assert report.framework == "lightning", report
    assert [n for n, _, _ in report.pushed] == ["epoch=0-step=2.ckpt"], report
    assert report.incomplete == ["epoch=0-step=4.ckpt"], report
