"""HubStorageReader and bytes from the Hub: a checkpoint's ``.metadata`` and its bytes
entries are data, never code; and the reader leaves nothing on disk.

One process, no process group: DCP saves and loads on its own (``no_dist``), through the
real writer and reader, against an in-process local Hub.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the DCP storage classes need torch (the [distributed] extra)")
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint.api import CheckpointException  # noqa: E402

from ckpt_action.errors import CkptError  # noqa: E402
from ckpt_action.integrations.dcp import HubStorageReader, HubStorageWriter  # noqa: E402
from tests.conftest import write_checkpoint  # noqa: E402

REPO = "org/dcp"


def _save(hub: Any, state: dict[str, Any], step: int) -> Any:
    writer = HubStorageWriter(REPO, step=step, endpoint=hub.url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DCP's "no process group: saving on one rank"
        dcp.save(state, storage_writer=writer)
    return writer.handle


def _load(state: dict[str, Any], reader: HubStorageReader) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load(state, storage_reader=reader)


def _gadget(module: str, name: str, arg: str) -> bytes:
    """A pickle calling ``module``'s ``name`` (dotted names resolve through the module's
    globals in a plain unpickler) on ``arg``."""
    def text(s: str) -> bytes:
        raw = s.encode()
        return b"\x8c" + bytes([len(raw)]) + raw  # SHORT_BINUNICODE

    return b"\x80\x04" + text(module) + text(name) + b"\x93" + text(arg) + b"\x85R."  # STACK_GLOBAL, TUPLE1, REDUCE


class _RunsCode:
    """Saved into a bytes entry: unpickled by a plain loader, it runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_real_save_loads_with_its_bytes_entries_and_leaves_nothing_behind(local_hub, tmp_path):
    handle = _save(local_hub, {"w": torch.arange(12.0).reshape(3, 4), "note": "hello", "count": 7}, 3)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    state: dict[str, Any] = {"w": torch.zeros(3, 4), "note": "", "count": 0}
    _load(state, HubStorageReader(handle, cache_dir=downloads, endpoint=local_hub.url))
    assert torch.equal(state["w"], torch.arange(12.0).reshape(3, 4))
    assert (state["note"], state["count"]) == ("hello", 7)
    assert list(downloads.iterdir()) == []


def test_a_failing_load_leaves_nothing_behind(local_hub, tmp_path):
    handle = _save(local_hub, {"w": torch.ones(2)}, 4)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with pytest.raises(CheckpointException) as failed:  # DCP wraps every rank's error in its own
        _load({"w": torch.zeros(5)}, HubStorageReader(handle, cache_dir=downloads, endpoint=local_hub.url))
    assert "Size mismatch" in str(failed.value)
    assert list(downloads.iterdir()) == []


@pytest.mark.parametrize(("module", "name"), [
    ("torch.distributed.checkpoint.filesystem", "os.system"),
    ("torch.distributed.checkpoint.metadata", "os.system"),
    ("torch.distributed.checkpoint.filesystem", "FileSystemReader"),
    ("torch.distributed.checkpoint.state_dict_loader", "load"),
    ("torch.distributed.checkpoint.metadata", "Metadata.__init__.__globals__.get"),
    ("torch", "Size.__class__"),
    ("builtins", "eval"),
    ("posix", "system"),
])
def test_a_metadata_naming_anything_but_dcps_metadata_classes_is_refused(local_hub, tmp_path, module, name):
    import ckpt_action as ckpt

    marker = tmp_path / "ran"
    local = write_checkpoint(tmp_path / "ckpt", {".metadata": _gadget(module, name, f"touch {marker}"),
                                                 "__0_0.distcp": b"\0" * 16})
    handle = ckpt.push(local, REPO, step=5, endpoint=local_hub.url)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with pytest.raises(CkptError, match=r"\.metadata names .*: refusing to load it"):
        HubStorageReader(handle, cache_dir=downloads, endpoint=local_hub.url).read_metadata()
    assert not marker.exists()
    assert list(downloads.iterdir()) == []


def test_a_bytes_entry_that_would_run_code_is_refused_and_tensors_still_load(local_hub, tmp_path):
    marker = tmp_path / "ran"
    handle = _save(local_hub, {"w": torch.ones(4), "evil": _RunsCode(marker)}, 6)
    assert not marker.exists()  # saving only recorded the call
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with pytest.raises(CheckpointException) as refused:
        _load({"w": torch.zeros(4), "evil": None},
              HubStorageReader(handle, cache_dir=downloads, endpoint=local_hub.url))
    assert "CkptError: the entry 'evil' of this checkpoint is stored as bytes and is not loaded" in str(refused.value)
    assert "GLOBAL posix.system" in str(refused.value)
    assert not marker.exists()
    assert list(downloads.iterdir()) == []
    state = {"w": torch.zeros(4)}  # the same checkpoint's tensors alone
    _load(state, HubStorageReader(handle, cache_dir=downloads, endpoint=local_hub.url))
    assert torch.equal(state["w"], torch.ones(4))


def test_a_metadata_pointing_outside_the_checkpoint_is_refused(local_hub, tmp_path):
    # DCP's own metadata classes, naming a shard file outside the checkpoint's dir: the reader
    # would open it on this machine and load whatever is there as the tensor.
    import ckpt_action as ckpt

    staged = tmp_path / "staged"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"w": torch.ones(2)}, storage_writer=dcp.FileSystemWriter(staged))
    import pickle

    with open(staged / ".metadata", "rb") as fh:
        loaded = pickle.load(fh)  # noqa: S301 - this test's own file
    for info in loaded.storage_data.values():
        info.relative_path = "../../outside.distcp"
    (staged / ".metadata").write_bytes(pickle.dumps(loaded))
    handle = ckpt.push(staged, REPO, step=9, endpoint=local_hub.url)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with pytest.raises(CheckpointException) as refused:
        _load({"w": torch.zeros(2)}, HubStorageReader(handle, cache_dir=downloads, endpoint=local_hub.url))
    assert "CkptError: .metadata names the file '../../outside.distcp', which is not a file name of this" \
           " checkpoint" in str(refused.value)
    assert list(downloads.iterdir()) == []
