"""Orbax's ``CheckpointManager`` (JAX on the CPU) under `ckpt-action watch -- python THIS OUT`
(tests/e2e/test_watch_frameworks_e2e.py).

Steps 1, 2 and 3 are saved (async, the default atomic rename) into ``OUT/<step>``; the process is
killed (``os._exit(3)``) as step 3 is finalized: its ``3.orbax-checkpoint-tmp`` holds the data and
``commit_success.txt`` but is not renamed to ``3``. The libraries are imported in ``main`` so
that collecting this file for doctests needs none of them.
"""

from __future__ import annotations

import os
import sys


def main(out: str) -> None:
    import jax.numpy as jnp
    import orbax.checkpoint as ocp
    from orbax.checkpoint._src.path import async_path

    real = async_path.rename

    async def killed_in_the_last_save(src, dst):  # type: ignore[no-untyped-def]
        if os.path.basename(str(dst)) == "3":
            os._exit(3)
        return await real(src, dst)

    async_path.rename = killed_in_the_last_save
    with ocp.CheckpointManager(out, options=ocp.CheckpointManagerOptions(max_to_keep=None)) as manager:
        for step in (1, 2, 3):
            manager.save(step, args=ocp.args.StandardSave({"w": jnp.arange(64.0).reshape(8, 8) * step}))
        manager.wait_until_finished()


if __name__ == "__main__":
    main(sys.argv[1])
