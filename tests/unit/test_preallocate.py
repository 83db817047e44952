"""A downloaded file's blocks are reserved up front, its size left saying what was written."""

from __future__ import annotations

import ctypes
import os
import sys

import pytest

from ckpt_action.stores.hub.fetch import PREALLOCATE_MIN, preallocate


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fallocate(2) is Linux's")
def test_blocks_are_reserved_and_the_size_still_says_what_was_written(tmp_path):
    # A second opinion, not the code under test: can this file system reserve blocks at all?
    probe = os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        supported = libc.fallocate64(probe, 1, ctypes.c_int64(0), ctypes.c_int64(PREALLOCATE_MIN)) == 0
    finally:
        os.close(probe)
    if not supported:
        pytest.skip("this file system reserves no blocks ahead (fallocate unsupported): nothing to check")
    size = 8 * PREALLOCATE_MIN
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        preallocate(fd, size)
        st = os.fstat(fd)
        # A resume by Range starts from the size on disk: it must still be what was written.
        assert st.st_size == 0
        assert st.st_blocks * 512 >= size
        os.write(fd, b"x" * 1000)
        assert os.fstat(fd).st_size == 1000
    finally:
        os.close(fd)


def test_a_small_file_is_left_to_allocate_as_it_goes(tmp_path):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        preallocate(fd, PREALLOCATE_MIN - 1)
        assert os.fstat(fd).st_blocks == 0
    finally:
        os.close(fd)
