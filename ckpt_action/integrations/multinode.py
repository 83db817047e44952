"""The Trainer integration in a job of many processes (DDP, FSDP, DeepSpeed; one node or many).

torch is imported only when a process group is running: a one-process job never needs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import CkptError

T = TypeVar("T")


def active() -> bool:
    """Whether this process is one of several in an initialized torch.distributed job."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)


def wait_for_saves() -> None:
    """Every process has written its files of the checkpoint: Trainer calls ``on_save`` on
    each process as soon as that process is done, with no barrier between them."""
    import torch.distributed as dist

    dist.barrier()


def _outcome(fn: Callable[[], T]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except CkptError as exc:
        return "error", exc


def once_per_node(find: Callable[[], T | None], fetch: Callable[[T], Any]) -> T | None:
    """``find()`` on world rank 0, its answer given to every process; then ``fetch(answer)``
    on each node's local rank 0 while the other processes wait. Any failure raises on every
    process, the same error."""
    import torch.distributed as dist

    box: list[Any] = [_outcome(find) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    kind, found = box[0]
    if kind == "error":
        raise found
    if found is None:
        return None
    local = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    mine = _outcome(lambda: fetch(found)) if local == 0 else ("ok", None)
    if mine[0] == "error":
        mine = ("error", f"rank {dist.get_rank()}: {mine[1]}")
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    failed = [message for kind, message in everyone if kind == "error"]
    if failed:
        raise CkptError(f"resuming from the Hub failed: {failed[0]}")
    return found


def empty_dir(root: Path) -> Path:
    """A dir holding nothing: what a process without files of the checkpoint pushes."""
    import tempfile

    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="empty-", dir=root))
