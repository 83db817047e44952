"""The job's ``torch.distributed`` process group, as a distributed push uses it.

torch is imported only here, only when asked for: the CLI, the action and the image do
without it (the ``[distributed]`` extra brings it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, cast

from ckpt_action.errors import DistributedError, InputError, param, quoted
from ckpt_action.ops.coordination import Session, Store

EXTRA = "pip install 'ckpt-action[distributed]'"
ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun (and a launcher doing as it does) sets for each process of the job."""


def session(group: Any, timeout: float, what: str) -> Session | None:
    """A session among the ranks of ``group`` (None: the whole job), or None when this
    process is not part of an initialized process group: a job that is not distributed."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available() or not dist.is_initialized():
        return None
    rank = dist.get_rank(group)
    if rank < 0:
        raise InputError(f"this process is not a member of {param('group')}: call push on the ranks of that"
                         " group only", param="group")
    # Every group of the job shares the default store; the group's name keeps their keys apart.
    store = cast(Store, dist.distributed_c10d._get_default_store())  # its stubs type values as str; bytes go too
    name = "ckpt-action/" + (str(group.group_name) if group is not None else "world")
    return Session(store, rank, dist.get_world_size(group), name=name, timeout=timeout, what=what)


def world_size_from_env() -> int:
    """How many processes the launcher says the job has (``WORLD_SIZE``; 1 without it)."""
    value = os.environ.get("WORLD_SIZE", "").strip()
    if not value:
        return 1
    if not value.isdigit() or len(value) > 6 or int(value) < 1:
        raise InputError(f"WORLD_SIZE {quoted(value, 40)} is not a number of processes: unset it, or launch with"
                         " torchrun", param="distributed")
    return int(value)


@contextmanager
def joined_from_env(timeout: float) -> Iterator[None]:
    """Join the job's process group from the torchrun environment (gloo over TCP) for the
    duration, and leave it after; a process with no ``WORLD_SIZE`` is a job of one."""
    flag = param("distributed")
    try:
        import torch.distributed as dist
    except ImportError:
        raise InputError(f"{flag} needs torch: {EXTRA}", param="distributed") from None
    if dist.is_initialized() or not os.environ.get("WORLD_SIZE"):
        yield
        return
    missing = [name for name in ENV if not os.environ.get(name)]
    if missing:
        raise InputError(f"{flag} joins the job from {', '.join(ENV)} (as torchrun sets them), and"
                         f" {', '.join(missing)} is not set: run it under torchrun, or drop {flag}",
                         param="distributed")
    try:
        dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=timeout))
    except Exception as exc:  # torch's own (DistStoreError, RuntimeError...), kept as the reason
        where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
        raise DistributedError(f"{flag}: rank {os.environ['RANK']} could not join the job's process group at"
                               f" {where} within {timeout:g} s (CKPT_DISTRIBUTED_TIMEOUT): {exc}") from exc
    try:
        yield
    finally:
        dist.destroy_process_group()
