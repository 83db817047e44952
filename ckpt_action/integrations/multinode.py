"""The Trainer integration in a job of many processes (DDP, FSDP, DeepSpeed; one node or many).

torch is imported only when a process group is running: a one-process job never needs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import (
    AuthError,
    CkptError,
    ConflictError,
    InputError,
    IntegrityError,
    LimitError,
    LocalIOError,
    NoCheckpointError,
    NotFoundError,
    RemoteError,
    UnreadableManifest,
    one_line,
    unrendered,
)
from ..handle import CheckpointHandle


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


MAX_VALUE_BYTES = 64 * 1024
"""Bytes of one answer read from the job's store: a handle or an error message is far less."""
_NAME = "ckpt-action/resume"
_ERRORS: dict[str, type[CkptError]] = {c.__name__: c for c in (
    CkptError, InputError, RemoteError, AuthError, NotFoundError, IntegrityError, UnreadableManifest, LocalIOError,
    LimitError, NoCheckpointError, ConflictError)}
"""The errors an answer may carry, by name (each made from its message alone); any other is a CkptError."""


def once_per_node(find: Callable[[], CheckpointHandle | None],
                  fetch: Callable[[CheckpointHandle], Any]) -> CheckpointHandle | None:
    """``find()`` on world rank 0, its answer given to every process; then ``fetch(answer)``
    on each node's local rank 0 while the other processes wait. Any failure raises on every
    process, the same error. The answers travel as JSON through the job's store (see
    :func:`exchange`), never through torch's object collectives, which unpickle what they
    receive."""
    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    rank = dist.get_rank()
    local = int(os.environ.get("LOCAL_RANK", rank))
    return exchange(store, rank, dist.get_world_size(), local == 0, find, fetch)


def exchange(store: Any, rank: int, world: int, fetches: bool, find: Callable[[], CheckpointHandle | None],
             fetch: Callable[[CheckpointHandle], Any], *, timeout: float | None = None) -> CheckpointHandle | None:
    """:func:`once_per_node` over ``store`` (a ``torch.distributed.Store``): rank 0 posts what
    ``find()`` answered (a handle, none, or its error); every rank reads it, those with
    ``fetches`` run ``fetch``, and every rank posts and reads every rank's outcome. Each
    value is JSON, bounded in bytes and checked in shape: the store listens on the network
    in a multi-node job. ``timeout``: seconds to wait for a value (None: the store's own)."""
    seq = store.add(f"{_NAME}/seq/{rank}", 1)
    prefix = f"{_NAME}/{seq}"
    if rank == 0:
        try:
            found = find()
            answer: dict[str, Any] = {"ok": None if found is None else {**found.to_dict(), "endpoint": found.endpoint}}
        except CkptError as exc:
            answer = {"error": {"kind": type(exc).__name__, "message": unrendered(exc), "param": exc.param}}
        store.set(f"{prefix}/found", _encode(answer))
    handle = _found(_read(store, f"{prefix}/found", "rank 0's answer", timeout))
    if handle is None:
        return None
    mine: str | None = None
    if fetches:
        try:
            fetch(handle)
        except CkptError as exc:
            mine = f"rank {rank}: {exc}"
    store.set(f"{prefix}/fetched/{rank}", _encode({"error": mine}))
    failed = []
    for r in range(world):
        outcome = _read(store, f"{prefix}/fetched/{r}", f"rank {r}'s outcome", timeout)
        error = outcome.get("error", "") if isinstance(outcome, dict) and set(outcome) == {"error"} else ""
        if error is None:
            continue
        failed.append(error if isinstance(error, str) else f"rank {r}'s outcome in the job's store is not"
                      " ckpt-action's")
    if failed:
        raise CkptError(f"resuming from the Hub failed: {one_line(failed[0], 2000)}")
    return handle


def _encode(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def _read(store: Any, key: str, what: str, timeout: float | None) -> Any:
    if timeout is None:
        store.wait([key])
    else:
        store.wait([key], timedelta(seconds=timeout))
    raw = store.get(key)
    if len(raw) > MAX_VALUE_BYTES:
        raise CkptError(f"{what} in the job's store is not ckpt-action's ({len(raw)} bytes, above"
                        f" {MAX_VALUE_BYTES})")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; nesting, a RecursionError
        raise CkptError(f"{what} in the job's store is not ckpt-action's (not JSON: {one_line(exc, 80)})") from None


def _found(answer: object) -> CheckpointHandle | None:
    """Rank 0's answer, checked: the handle (None: no checkpoint); its error is raised."""
    what = "rank 0's answer in the job's store is not ckpt-action's"
    if isinstance(answer, dict) and set(answer) == {"error"} and isinstance(answer["error"], dict):
        error = answer["error"]
        kind, message, param = error.get("kind"), error.get("message"), error.get("param")
        if not isinstance(message, str) or not (param is None or isinstance(param, str)):
            raise CkptError(what)
        raise _ERRORS.get(kind if isinstance(kind, str) else "", CkptError)(one_line(message, 2000), param=param)
    if not isinstance(answer, dict) or set(answer) != {"ok"}:
        raise CkptError(what)
    ok = answer["ok"]
    if ok is None:
        return None
    fields = ("repo", "subfolder", "revision", "step", "endpoint")
    if (not isinstance(ok, dict) or not {"repo", "subfolder", "revision", "endpoint"} <= set(ok) <= {*fields, "hub_url"}
            or not all(isinstance(ok.get(k), str) for k in ("repo", "subfolder", "revision", "endpoint"))):
        raise CkptError(what)
    try:
        return CheckpointHandle(ok["repo"], ok["subfolder"], ok["revision"], ok.get("step"), ok["endpoint"])
    except CkptError as exc:
        raise CkptError(f"{what}: {exc}") from None


def empty_dir(root: Path) -> Path:
    """A dir holding nothing: what a process without files of the checkpoint pushes."""
    import tempfile

    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="empty-", dir=root))
