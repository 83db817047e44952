"""``python -m tests.helpers.ranks_bucket_push URI ENDPOINT TOKEN DIR...``: one push of one
checkpoint into a bucket from ``len(DIR)`` ranks, each a thread of this process with its own
dir (the process group faked as in tests/integration/test_distributed_ranks.py: everything
from ``ckpt.push`` down is the real path). Prints each rank's pin or error, one a line."""

from __future__ import annotations

import sys
import threading
from typing import Any

import torch

import ckpt_action as ckpt
from ckpt_action.ops import torchgroup
from ckpt_action.ops.coordination import Session


def main(uri: str, endpoint: str, token: str, dirs: list[str]) -> int:
    world = len(dirs)
    store = torch.distributed.HashStore()
    me = threading.local()

    def session(group: Any, timeout: float, what: str) -> Session:
        return Session(store, me.rank, world, name="ckpt-action/world", timeout=timeout, what=what)

    torchgroup.session = session  # type: ignore[assignment]
    out: list[str] = [""] * world

    def one(rank: int) -> None:
        me.rank = rank
        try:
            out[rank] = ckpt.push(dirs[rank], uri, step=7, distributed=True, endpoint=endpoint, token=token).revision
        except Exception as exc:  # reported: the test reads it
            out[rank] = f"error: {exc}"

    threads = [threading.Thread(target=one, args=(r,), name=f"rank {r}") for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("\n".join(out), flush=True)
    return 0 if all(not o.startswith("error") for o in out) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
