"""PyTorch Lightning's ``ModelCheckpoint`` under `ckpt-action watch -- python THIS OUT`
(tests/e2e/test_watch_frameworks_e2e.py).

A tiny LightningModule trains 6 steps on the CPU with ``ModelCheckpoint(dirpath=OUT,
every_n_train_steps=2, save_top_k=-1)``: ``OUT/epoch=0-step={2,4,6}.ckpt``. The last save is
killed (``os._exit(3)``) half-way through moving its temporary file into place, as a move from
another filesystem (a copy) would be. The libraries are imported in ``main`` so that collecting
this file for doctests needs none of them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(out: str) -> None:
    import lightning as L
    import torch
    from fsspec.implementations.local import LocalFileOpener
    from lightning.pytorch.callbacks import ModelCheckpoint
    from torch.utils.data import DataLoader, TensorDataset

    real = LocalFileOpener.commit

    def killed_in_the_last_save(self):  # type: ignore[no-untyped-def]
        if Path(self.path).name != "epoch=0-step=6.ckpt":
            return real(self)
        data = Path(self.temp).read_bytes()
        with open(self.path, "wb") as fh:
            fh.write(data[: len(data) // 2])
        os._exit(3)

    LocalFileOpener.commit = killed_in_the_last_save  # type: ignore[method-assign]

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 8)

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=4)
    trainer = L.Trainer(max_steps=6, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=Path(out).parent,
                        callbacks=[ModelCheckpoint(dirpath=out, every_n_train_steps=2, save_top_k=-1)])
    trainer.fit(Tiny(), data)


if __name__ == "__main__":
    main(sys.argv[1])
