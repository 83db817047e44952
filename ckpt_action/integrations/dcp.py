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
``.metadata`` and the manifest), which publishes the manifest through the one finalize of
every writer (:func:`ckpt_action.stores.finalize.finalize`: every rank reported this very
checkpoint, and every file the manifest lists is in the commit with its digest). The
other ranks leave ``write_data`` while their part of the push runs (the coordinator only
reaches ``finish`` once they have written), and ``writer.handle`` waits for it.

The reader downloads ``.metadata``, then on each rank only the files holding what that
rank loads, each verified against the manifest at the pinned SHA, into a dir removed once
they are read (and on error); DCP reshards, so the world size may differ from the save's.
Nothing from the repo runs as code: ``.metadata`` is a pickle, read by an unpickler that
builds only an exact list of DCP's metadata classes and the torch values they hold; bytes
entries (DCP's planners ``torch.load`` them with ``weights_only=False``) are loaded with
``weights_only=True`` first.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from .. import api

# The one allowed unpickler of .metadata lives with the checkpoint facts, where promote's
# consolidation reads it too (pyproject.toml allows this one import).
from ..checkpoint.dcpmeta import METADATA, read_metadata
from ..checkpoint.dcpmeta import relative_path as _relative_path
from ..errors import CkptError, InputError, one_line
from ..handle import SHA_RE, CheckpointHandle

try:
    import torch
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
    from torch.distributed.checkpoint.planner import LoadPlanner
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"ckpt_action.integrations.dcp needs torch: pip install 'ckpt-action[distributed]' ({exc})") from exc

__all__ = ["HubStorageReader", "HubStorageWriter"]

_OPTIONS = ("endpoint", "token", "timeout", "retries")


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


class _SafeBytes:
    """The load planner, as the reader hands it to DCP's file reader: a bytes entry is
    unpickled with ``torch.load(weights_only=True)`` (DCP's own planners load them with
    ``weights_only=False``, which runs whatever the saved object says); what that builds is
    saved again and given to the planner, so the planner's own load sees only bytes made
    from objects the safe loader accepted."""

    def __init__(self, planner: Any) -> None:
        self._planner = planner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._planner, name)

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        try:
            obj = torch.load(value, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - torch's UnpicklingError, or anything the bytes provoke
            # torch's message is a page long; the line naming what the bytes asked for is the point.
            why = next((line for line in str(exc).splitlines() if "unsupported" in line.lower()), str(exc))
            raise CkptError(f"the entry {fqn!r} of this checkpoint is stored as bytes and is not loaded:"
                            f" torch.load(weights_only=True) refuses it ({one_line(why, 200)}); load only"
                            " its tensors, or allow its types with torch.serialization.add_safe_globals"
                            " if you trust this repo") from None
        clean = io.BytesIO()
        torch.save(obj, clean)
        clean.seek(0)
        self._planner.load_bytes(read_item, clean)


class HubStorageReader(FileSystemReader):
    """DCP's file reader over a checkpoint on the Hub: ``HubStorageReader(handle)`` or
    ``HubStorageReader(repo=..., subfolder=..., revision=SHA)``; each rank downloads (and
    verifies) only the files holding what it loads, into a temp dir of its own under
    ``cache_dir`` (default: the system's temp dir), removed once they are read (and on error)."""

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
        self._cache_dir = cache_dir
        # Nothing is created until a read: the path is set to each read's own download dir.
        super().__init__(os.fspath(cache_dir) if cache_dir is not None else tempfile.gettempdir())
        self.downloaded: list[str] = []
        """The files this rank downloaded, besides ``.metadata``."""

    def __repr__(self) -> str:
        return f"HubStorageReader({self._source!r})"

    def reset(self, checkpoint_id: str | os.PathLike[str] | None = None) -> None:
        if checkpoint_id:
            raise InputError("HubStorageReader takes no checkpoint_id=: give the handle to the reader")
        super().reset(None)

    @contextlib.contextmanager
    def _pulled(self, include: list[str]) -> Iterator[Path]:
        """The files ``include`` names, downloaded and verified into a dir removed on leaving."""
        scratch = Path(tempfile.mkdtemp(prefix="ckpt-dcp-read-", dir=self._cache_dir))
        try:
            yield api.pull(self._source, scratch / "files", include=include, subfolder=self._subfolder,
                           revision=self._revision, **self._options)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        with self._pulled([METADATA]) as where, open(where / METADATA, "rb") as fh:
            metadata = read_metadata(fh)
        meta = metadata.storage_meta or StorageMeta()  # as DCP's own reader does
        meta.load_id = self.load_id
        metadata.storage_meta = meta
        return metadata

    def read_data(self, plan: Any, planner: Any) -> Any:
        files = sorted({_relative_path(getattr(self.storage_data[item.storage_index], "relative_path", None))
                        for item in plan.items})
        self.downloaded = files
        safe = cast(LoadPlanner, _SafeBytes(planner))
        if not files:
            return super().read_data(plan, safe)
        with self._pulled(files) as where:
            self.path = where
            return super().read_data(plan, safe)
