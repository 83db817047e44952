"""The big checkpoint pushed once to the shared local Hub, for the re-push and promote sections."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .context import Context
from .fixtures import BIG_CHECKPOINT_MIB, QUICK_CHECKPOINT_MIB, write_checkpoint
from .timing import PY_CLI, run

REPO = "bench/release-flow"
SUBFOLDER = "checkpoint-500"


@dataclass
class Pushed:
    local_dir: Path
    bytes: int
    lfs_bytes: int
    repo: str = REPO
    subfolder: str = SUBFOLDER


def pushed_checkpoint(ctx: Context) -> Pushed:
    if "pushed" not in ctx.cache:
        sizes = QUICK_CHECKPOINT_MIB if ctx.quick else BIG_CHECKPOINT_MIB
        local = ctx.work / "release-checkpoint"
        total = write_checkpoint(local, sizes, salt=7)
        run([*PY_CLI, "push", "--repo", REPO, "--local-dir", str(local), "--subfolder", SUBFOLDER, "--step", "500",
             "--json"], ctx.env())
        ctx.cache["pushed"] = Pushed(local, total, sum(sizes.values()) * 2**20)
    pushed: Pushed = ctx.cache["pushed"]
    return pushed
