"""A push from every rank of a process group: the session, the ranks' agreement on what is
pushed, each rank's local dir checked inside the session (a bad one fails every rank at
once), then :func:`~ckpt_action.ops.distpush.push_distributed`."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ckpt_action.disk.source import local_dir_to_push
from ckpt_action.errors import InputError, param

if TYPE_CHECKING:
    from ckpt_action.ops.push import PushResult
    from ckpt_action.stores.base import Store


def push_on_ranks(remote: Store, local_dir: str, subfolder: str, *, step: int | None, private: bool,
                  commit_message: str | None, group: Any,
                  metrics: dict[str, float] | None = None) -> PushResult | None:
    """This rank's part of a push from every rank of ``group`` (None: the job's process
    group); None when this process is in no process group (push alone)."""
    from ckpt_action.ops.distpush import agree, identity, push_distributed
    from ckpt_action.ops.torchgroup import session as group_session

    session = group_session(group, remote.settings.distributed_timeout, f"push {subfolder}")
    if session is None:
        alone_or_refuse()
        return None
    with session:
        agree(session, identity(remote, subfolder, step=step, private=private, commit_message=commit_message))
        # Checked inside the session: a bad dir on one rank fails every rank at once.
        path = session.run("checking the local dir", lambda: local_dir_to_push(local_dir, allow_empty=True))
        return push_distributed(remote, path, subfolder, session, step=step, private=private,
                                commit_message=commit_message, metrics=metrics)


def joined_job(timeout: float) -> AbstractContextManager[None]:
    """For a process torchrun started that has not joined its job's process group: join it
    from the environment for the push, and leave it after."""
    from ckpt_action.ops.torchgroup import joined_from_env

    return joined_from_env(timeout)


def alone_or_refuse() -> None:
    """A process in no process group pushes alone, unless its launcher says it is one of
    several (``WORLD_SIZE`` over 1): each rank pushing alone would publish a checkpoint
    holding that rank's files only, taken as complete. So that is refused, before anything
    is sent, saying how to join."""
    from ckpt_action.ops.torchgroup import EXTRA, world_size_from_env

    world = world_size_from_env()
    if world > 1:
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            raise InputError(f"{param('distributed')} in a job of {world} processes (WORLD_SIZE) needs torch to"
                             f" join its process group: {EXTRA}", param="distributed") from None
        raise InputError(f"{param('distributed')} in a job of {world} processes (WORLD_SIZE) that is in no process"
                         " group: call torch.distributed.init_process_group() before the push (or push with"
                         " `ckpt-action push --distributed`, which joins it); each rank pushing alone would"
                         " publish one rank's files as the checkpoint", param="distributed")
