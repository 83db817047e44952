"""accelerate's ``save_state`` under `ckpt-action watch -- python THIS PROJECT`
(tests/e2e/test_watch_frameworks_e2e.py).

A linear model trains 3 steps on the CPU with accelerate's own checkpoint naming
(``PROJECT/checkpoints/checkpoint_{0,1,2}``), a ``save_state`` after each; the process is killed
(``os._exit(3)``) in the middle of the last one, after the weights and the optimizer and before
the scheduler and ``random_states_0.pkl``. The libraries are imported in ``main`` so that
collecting this file for doctests needs none of them.
"""

from __future__ import annotations

import os
import sys


def main(project: str) -> None:
    import torch
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration

    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    accelerator = Accelerator(cpu=True, project_config=ProjectConfiguration(project_dir=project,
                                                                            automatic_checkpoint_naming=True))
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    for step in range(3):
        accelerator.backward(model(torch.randn(4, 16)).sum())
        optimizer.step()
        scheduler.step()
        if step == 2:
            scheduler.state_dict = lambda: os._exit(3)
        accelerator.save_state()


if __name__ == "__main__":
    main(sys.argv[1])
