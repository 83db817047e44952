"""A local Hub child never outlives the process that started it: however that process ends
(Ctrl-C, SIGTERM, SIGKILL, or plain exit without a stop), the Hub goes with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

# Starts a Hub child, says its pid, then waits to be ended (or, for "exit", exits at once
# without stopping it).
STARTER = """
import signal, sys, time
# Ctrl-C's handler, as in a Python started from a terminal: a process started in the
# background of a non-interactive shell (a CI script's `&`) inherits SIGINT ignored, and
# Python then installs no handler of its own, so SIGINT would not end it at all.
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from ckpt_localhub.process import HubProcess
hub = HubProcess(Path(sys.argv[1]))
print(hub.proc.pid, flush=True)
if sys.argv[2] == "exit":
    sys.exit(0)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("end", ["SIGINT", "SIGTERM", "SIGKILL", "exit"])
def test_an_ended_starter_leaves_no_local_hub_running(end, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "hub"), end], stdout=subprocess.PIPE,
                               text=True, env=env, cwd=tmp_path)
    child = 0
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        assert _alive(child)
        if end != "exit":
            starter.send_signal(getattr(signal, end))
        starter.wait(60)
        deadline = time.monotonic() + 60
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), f"the local Hub (pid {child}) outlived its starter ended by {end}"
    finally:
        starter.kill()
        starter.wait()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)
