"""A re-pull keeps unchanged files without reading them, and reuses a file that only moved
to another path: counted in bytes this process read (``/proc/self/io`` rchar), not only
in requests and inodes, so a pull that hashed every kept file again goes red. The Hub runs
in its own process, so its reads are not counted."""

from __future__ import annotations

import os

import pytest

import ckpt_action as ckpt
from tests.helpers.chaos_helpers import seed
from tests.helpers.procio import read_so_far
from tests.helpers.pull_helpers import file_gets

BIG = 4 * 1024 * 1024  # far above what the listing, manifest and record of a re-pull take


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts reads with Linux's /proc/self/io")
def test_a_repull_reads_no_kept_file_and_a_moved_file_is_reused(hub_server, hf_client, tmp_path):
    hub = hub_server()
    weights = os.urandom(BIG)
    seed(hub.url, "o/r", "checkpoint-1", {"model.safetensors": weights, "config.json": b'{"step": 1}'},
         tmp_path / "seeds", step=1)
    seed(hub.url, "o/r", "checkpoint-2", {"weights/model.safetensors": weights, "config.json": b'{"step": 2}'},
         tmp_path / "seeds", step=2)
    dest = tmp_path / "dest"
    ckpt.pull("o/r", dest, subfolder="checkpoint-1", endpoint=hub.url, retries=0)
    ckpt.pull("o/r", dest, subfolder="checkpoint-1", endpoint=hub.url, retries=0)  # warm every import

    start, before = len(hub.log_entries()), read_so_far()
    ckpt.pull("o/r", dest, subfolder="checkpoint-1", endpoint=hub.url, retries=0)
    assert read_so_far() - before < BIG // 4, "an unchanged re-pull read the kept files again"

    start, before = len(hub.log_entries()), read_so_far()
    ckpt.pull("o/r", dest, subfolder="checkpoint-2", endpoint=hub.url, retries=0)
    read = read_so_far() - before
    assert set(file_gets(hub, start)) == {"checkpoint-2/config.json"}, "the moved file was downloaded again"
    assert read < BIG // 4, f"the moved file was read ({read} bytes) instead of linked from what was verified"
    assert (dest / "weights" / "model.safetensors").read_bytes() == weights
    assert not (dest / "model.safetensors").exists()
