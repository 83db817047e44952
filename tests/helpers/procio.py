"""Bytes this process has read, from Linux's ``/proc/self/io``: what the read-counting tests
(push, re-pull, pull state, pointer bound) measure, in one place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

needs_proc_io = pytest.mark.skipif(not os.path.exists("/proc/self/io"),
                                   reason="counts reads with Linux's /proc/self/io")


def read_so_far() -> int:
    """``rchar``: every byte this process has read so far, through any file or socket."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")
