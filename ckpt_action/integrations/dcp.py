"""torch.distributed.checkpoint to and from the Hub: one commit from every rank's shards.

::

    from ckpt_action.integrations.dcp import HubStorageReader, HubStorageWriter

    writer = HubStorageWriter(repo="org/run", step=300)
    dcp.save(state_dict, storage_writer=writer)          # on every rank
    writer.handle                                        # the same pinned handle on every rank
    dcp.load(state_dict, storage_reader=HubStorageReader(writer.handle))

Each rank's shards are written by DCP's own ``FileSystemWriter`` to a staging dir of that
rank, then pushed with ``ckpt.push(distributed=True)``: every rank uploads its own shards,
the coordinator's ``finish`` writes ``.metadata`` and makes the one commit (shards,
``.metadata`` and the manifest). The other ranks leave ``write_data`` while their part of
the push runs (the coordinator only reaches ``finish`` once they have written), and
``writer.handle`` waits for it.

The reader downloads ``.metadata``, then on each rank only the files holding what that
rank loads, each verified against the manifest at the pinned SHA; DCP reshards, so the
world size may differ from the save's. ``.metadata`` is a pickle: it is read by an
unpickler that builds only DCP's metadata classes and the torch types they hold.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

from .. import api
from ..errors import CkptError, InputError
from ..handle import SHA_RE, CheckpointHandle

try:
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"ckpt_action.integrations.dcp needs torch: pip install 'ckpt-action[distributed]' ({exc})") from exc

__all__ = ["HubStorageReader", "HubStorageWriter"]

METADATA = ".metadata"
"""DCP's own name for the checkpoint's index (torch.distributed.checkpoint.filesystem)."""
_OPTIONS = ("endpoint", "token", "timeout", "retries")


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class HubStorageWriter(FileSystemWriter):
    """DCP's file writer to a staging dir of this rank, pushed to ``repo`` as one commit.

    ``step`` names the folder ``checkpoint-<step>`` (or ``subfolder``); ``staging_dir``
    (default: the system's temp dir) holds a dir of this rank's own, removed once pushed.
    Options are :func:`ckpt_action.push`'s (``endpoint``, ``token``, ``private``,
    ``timeout``, ``retries``).
    """

    def __init__(self, repo: str, *, step: int | None = None, subfolder: str | None = None,
                 staging_dir: str | os.PathLike[str] | None = None, private: bool = True,
                 **options: Any) -> None:
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise InputError(f"HubStorageWriter takes no {', '.join(unknown)}=: drop it")
        self.staged = Path(tempfile.mkdtemp(prefix="ckpt-dcp-", dir=staging_dir))
        super().__init__(self.staged)
        self._push_args: dict[str, Any] = {"step": step, "subfolder": subfolder, "private": private, **options}
        self._repo = repo
        self._coordinator = False
        self._thread: threading.Thread | None = None
        self._outcome: CheckpointHandle | Exception | None = None

    def __repr__(self) -> str:  # the token stays out of logs
        return f"HubStorageWriter(repo={self._repo!r})"

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id:
            raise InputError("HubStorageWriter takes no checkpoint_id=: give repo= and step= to the writer")
        super().reset(None)

    def storage_meta(self) -> StorageMeta | None:
        # FileSystemWriter records its path as the checkpoint's id: that would put this
        # machine's staging path in the .metadata on the Hub.
        return StorageMeta(checkpoint_id=None, save_id=self.save_id)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_writer(is_coordinator, *args, **kwargs)
        self._coordinator = is_coordinator

    def write_data(self, plan: Any, planner: Any) -> Any:
        written = super().write_data(plan, planner)
        if not self._coordinator:
            # This rank's shards are on disk once the future is done (FileSystemWriter
            # writes before returning it); its part of the push runs meanwhile.
            self._thread = threading.Thread(target=self._push, name="ckpt-action dcp push", daemon=True)
            self._thread.start()
        return written

    def finish(self, metadata: Metadata, results: list[list[Any]]) -> None:
        super().finish(metadata, results)  # writes .metadata into the coordinator's staging dir
        self._push()
        if isinstance(self._outcome, Exception):
            raise self._outcome

    def _push(self) -> None:
        try:
            self._outcome = api.push(self.staged, self._repo, distributed=True, **self._push_args)
        except Exception as exc:  # noqa: BLE001 - handed to whoever asks for the handle
            self._outcome = exc
            return
        shutil.rmtree(self.staged, ignore_errors=True)

    @property
    def handle(self) -> CheckpointHandle:
        """The pinned handle of the commit, the same on every rank (waits for this rank's part)."""
        if self._thread is not None:
            self._thread.join()
        if isinstance(self._outcome, Exception):
            raise self._outcome
        if self._outcome is None:
            raise CkptError("no checkpoint was pushed by this writer: call dcp.save(..., storage_writer=writer) first")
        return self._outcome


class _MetadataUnpickler(pickle.Unpickler):
    """Builds DCP's metadata and the torch types in it, nothing else: ``.metadata`` comes
    from the Hub, and a plain unpickler would run whatever it names."""

    _TORCH: ClassVar[set[str]] = {"Size", "device", "dtype", "memory_format", "layout"}

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("torch.distributed.checkpoint.") or (module == "collections" and name == "OrderedDict"):
            return super().find_class(module, name)
        if module == "torch" and (name in self._TORCH or isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        if module == "torch.serialization" and name == "_get_layout":  # a layout by its name: torch pickles them so
            return super().find_class(module, name)
        if module == "pathlib" and name in {"PosixPath", "PurePosixPath"}:  # storage_meta.checkpoint_id
            return super().find_class(module, name)
        if module == "builtins" and name in {"set", "frozenset", "slice", "complex"}:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{METADATA} names {module}.{name}, which DCP metadata does not hold:"
                                     " refusing to load it")


class HubStorageReader(FileSystemReader):
    """DCP's file reader over a checkpoint on the Hub: ``HubStorageReader(handle)`` or
    ``HubStorageReader(repo=..., subfolder=..., revision=SHA)``; each rank downloads (and
    verifies) only the files holding the tensors it loads, into ``cache_dir`` (default:
    a temp dir of its own)."""

    def __init__(self, source: CheckpointHandle | str | None = None, *, repo: str | None = None,
                 subfolder: str | None = None, revision: str | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, **options: Any) -> None:
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise InputError(f"HubStorageReader takes no {', '.join(unknown)}=: drop it")
        if source is None and repo is None:
            raise InputError("HubStorageReader needs a handle, or repo= with subfolder= and revision=")
        if source is not None and repo is not None:
            raise InputError("give HubStorageReader a handle or repo=, not both")
        if repo is not None and (subfolder is None or revision is None or not SHA_RE.match(revision)):
            # Each rank downloads at that SHA: a branch could move between two ranks' reads.
            raise InputError("HubStorageReader(repo=...) needs subfolder= and revision= a 40-hex commit SHA")
        self._source: CheckpointHandle | str = source if source is not None else str(repo)
        self._subfolder, self._revision = subfolder, revision
        self._options = options
        self.local = Path(tempfile.mkdtemp(prefix="ckpt-dcp-read-", dir=cache_dir))
        super().__init__(self.local / "data")
        self.downloaded: list[str] = []
        """The files this rank downloaded, besides ``.metadata``."""

    def __repr__(self) -> str:
        return f"HubStorageReader({self._source!r})"

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id:
            raise InputError("HubStorageReader takes no checkpoint_id=: give the handle to the reader")
        super().reset(None)

    def _pull(self, dest: Path, include: list[str]) -> Path:
        return api.pull(self._source, dest, include=include, subfolder=self._subfolder, revision=self._revision,
                        **self._options)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        where = self._pull(self.local / "meta", [METADATA])
        with open(where / METADATA, "rb") as fh:
            metadata = _MetadataUnpickler(fh).load()
        if not isinstance(metadata, Metadata):
            raise CkptError(f"{METADATA} of this checkpoint is not DCP metadata")
        return metadata

    def prepare_local_plan(self, plan: Any) -> Any:
        files = sorted({self.storage_data[item.storage_index].relative_path for item in plan.items})
        if files:
            self._pull(self.local / "data", files)
        self.downloaded = files
        return super().prepare_local_plan(plan)
