"""torch.distributed.checkpoint under `ckpt-action watch -- python THIS OUT`
(tests/e2e/test_watch_frameworks_e2e.py).

A linear model trains 3 steps on the CPU, ``dcp.save`` (one process, no process group) into
``OUT/step_{1,2,3}`` after each; the process is killed (``os._exit(3)``) in the middle of the
last save: its ``.distcp`` data and ``.metadata.tmp`` written, not renamed to ``.metadata``. torch
is imported in ``main`` so that collecting this file for doctests does not need it.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path


def main(out: str) -> None:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import filesystem

    real = filesystem.FileSystem.rename

    def killed_in_the_last_save(self, path, new_path):  # type: ignore[no-untyped-def]
        if Path(path).parent.name == "step_3":
            os._exit(3)
        return real(self, path, new_path)

    filesystem.FileSystem.rename = killed_in_the_last_save  # type: ignore[method-assign]
    warnings.simplefilter("ignore")  # no process group: torch says it saves on one rank
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(1, 4):
        model(torch.randn(4, 16)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        dcp.save({"model": model.state_dict(), "optim": optimizer.state_dict()},
                 checkpoint_id=Path(out) / f"step_{step}")


if __name__ == "__main__":
    main(sys.argv[1])
