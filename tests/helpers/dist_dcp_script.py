"""One rank of a DCP save or load through the Hub storage classes (tests/e2e/test_distributed_dcp.py).

``MODE=save``: a DTensor sharded over every rank (rows), a replicated tensor and a step,
saved with HubStorageWriter; the rank records writer.handle. ``MODE=load``: the same
state loaded on this job's world size through HubStorageReader at ``REVISION``; the rank
records whether the tensors equal what was saved and which files it downloaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from ckpt_action.integrations.dcp import HubStorageReader, HubStorageWriter
from tests.helpers.dist_exit import exit_now

ROWS = 64


def full() -> torch.Tensor:
    return torch.arange(ROWS * 4, dtype=torch.float32).reshape(ROWS, 4)


def main() -> int:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    out = Path(os.environ["OUT_DIR"]) / f"rank-{rank}.json"
    record: dict[str, object] = {}
    try:
        if os.environ["MODE"] == "save":
            state = {"w": distribute_tensor(full(), mesh, [Shard(0)]), "b": torch.ones(3), "step": torch.tensor(7)}
            writer = HubStorageWriter(os.environ["REPO"], step=7)
            dcp.save(state, storage_writer=writer)
            handle = writer.handle
            record["handle"] = [handle.repo, handle.subfolder, handle.revision, handle.step]
        else:
            state = {"w": distribute_tensor(torch.zeros(ROWS, 4), mesh, [Shard(0)]), "b": torch.zeros(3),
                     "step": torch.tensor(0)}
            reader = HubStorageReader(repo=os.environ["REPO"], subfolder="checkpoint-7",
                                      revision=os.environ["REVISION"])
            dcp.load(state, storage_reader=reader)
            record["equal"] = bool(torch.equal(state["w"].full_tensor(), full()) and
                                   torch.equal(state["b"], torch.ones(3)) and int(state["step"]) == 7)
            record["downloaded"] = reader.downloaded
    except Exception as exc:  # the test reads what each rank raised
        record = {"error": type(exc).__name__, "message": str(exc)}
    out.write_text(json.dumps(record))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_now(main())
