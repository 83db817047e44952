"""A DCP checkpoint's ``.metadata``, read as data: the one unpickler allowed to build it.

``.metadata`` is a pickle by DCP's design. It comes from the Hub, so it is read by an
unpickler that builds only an exact list of DCP's metadata classes and the torch values
they hold (``tests/unit/test_no_unsafe_loads.py`` allows this one use). torch is imported
only when a ``.metadata`` is read: importing this module needs no torch. Both the DCP
storage reader (:mod:`ckpt_action.integrations.dcp`) and promote's consolidation
(:mod:`ckpt_action.checkpoint.consolidate`) read it here.
"""

from __future__ import annotations

import collections
import pathlib
import pickle
from typing import IO, Any, ClassVar

from ckpt_action.errors import CkptError, one_line

METADATA = ".metadata"
"""DCP's own name for the checkpoint's index (torch.distributed.checkpoint.filesystem)."""


def metadata_classes() -> dict[tuple[str, str], Any]:
    """Every global a DCP ``.metadata`` may name, each (module, name) to the object itself:
    DCP's metadata classes and the torch values they hold, nothing that runs code on being
    called with data. Names are looked up here, never imported or resolved through a
    module's globals (``filesystem`` + ``os.system`` would run a command)."""
    import torch
    from torch.distributed.checkpoint import filesystem, metadata

    allowed: dict[tuple[str, str], Any] = {
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): filesystem._StorageInfo,
        ("torch.serialization", "_get_layout"): torch.serialization._get_layout,  # a layout by its name
        ("torch", "Size"): torch.Size,
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("builtins", "set"): set,
        ("builtins", "frozenset"): frozenset,
        ("pathlib", "PosixPath"): pathlib.PosixPath,  # storage_meta.checkpoint_id, as DCP's own writer records it
        ("pathlib", "PurePosixPath"): pathlib.PurePosixPath,
    }
    for name in ("Metadata", "StorageMeta", "MetadataIndex", "TensorStorageMetadata", "TensorProperties",
                 "ChunkStorageMetadata", "BytesStorageMetadata", "_MEM_FORMAT_ENCODING"):
        allowed["torch.distributed.checkpoint.metadata", name] = getattr(metadata, name)
    for name in dir(torch):  # dtypes, layouts and memory formats: values, not callables
        value = getattr(torch, name, None)
        if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
            allowed["torch", name] = value
    return allowed


class MetadataUnpickler(pickle.Unpickler):
    """Builds DCP's metadata and the torch values in it, nothing else: ``.metadata`` comes
    from the Hub, and a plain unpickler would run whatever it names."""

    _ALLOWED: ClassVar[dict[tuple[str, str], Any]] = {}

    def find_class(self, module: str, name: str) -> Any:
        if not self._ALLOWED:
            type(self)._ALLOWED = metadata_classes()
        found = self._ALLOWED.get((module, name))
        if found is None:
            raise CkptError(f"{METADATA} names {one_line(module, 80)}.{one_line(name, 80)}, which DCP metadata"
                            " does not hold: refusing to load it")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise CkptError(f"{METADATA} holds a persistent reference, which DCP metadata does not: refusing to load it")


def read_metadata(fh: IO[bytes]) -> Any:
    """The ``Metadata`` of a DCP checkpoint from its ``.metadata`` file (:class:`CkptError`
    when it names anything else, or is not DCP metadata)."""
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        metadata = MetadataUnpickler(fh).load()
    except CkptError:
        raise
    except Exception as exc:  # noqa: BLE001 - a truncated or malformed pickle
        raise CkptError(f"{METADATA} of this checkpoint cannot be read: {one_line(exc, 200)}") from None
    if not isinstance(metadata, Metadata):
        raise CkptError(f"{METADATA} of this checkpoint is not DCP metadata")
    return metadata


def relative_path(value: object) -> str:
    """A file name from ``.metadata`` (it comes from the Hub): a plain relative path inside
    the checkpoint, matched literally by the pull's include patterns."""
    if (not isinstance(value, str) or not value or len(value) > 255 or value.startswith("/")
            or any(part in ("", ".", "..") for part in value.split("/")) or any(c in value for c in "*?[]\\")
            or not value.isprintable()):
        raise CkptError(f"{METADATA} names the file {one_line(repr(value), 80)}, which is not a file name of"
                        " this checkpoint: refusing to load it")
    return value
