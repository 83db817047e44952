"""A pointer file is read no further than CKPT_MAX_POINTER_BYTES, whatever its size: counted
in bytes this process read (``/proc/self/io`` rchar), on a 50 MiB file, so reading it whole
and refusing it afterwards goes red although it gives the same refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ckpt_action as ckpt
from tests.helpers.procio import read_so_far

LIMIT = 4096
BIG = 50 * 1024 * 1024
SLACK = 256 * 1024  # the API's own small reads besides the pointer; far below BIG


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts reads with Linux's /proc/self/io")
def test_a_big_pointer_file_is_read_no_further_than_the_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_MAX_POINTER_BYTES", str(LIMIT))
    big = tmp_path / "checkpoint.json"
    with big.open("wb") as fh:  # sparse: 50 MiB of zeros that take no disk
        fh.truncate(BIG)
    small = tmp_path / "small.json"
    small.write_bytes(b" " * (LIMIT + 1))

    def pull(pointer: Path) -> ckpt.InputError:
        with pytest.raises(ckpt.InputError, match="CKPT_MAX_POINTER_BYTES") as caught:
            ckpt.pull(local_dir=tmp_path / "dest", pointer=pointer, endpoint="http://127.0.0.1:9")
        return caught.value

    pull(small)  # every import and setting warmed on a file just past the bound
    before = read_so_far()
    error = pull(big)
    read = read_so_far() - before
    assert read <= LIMIT + SLACK, f"read {read} bytes of a {BIG}-byte pointer file bounded at {LIMIT}"
    assert error.param == "pointer" and not (tmp_path / "dest").exists()
