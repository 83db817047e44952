"""The hashing thread beside a bucket upload: at the idle CPU policy until hurried, then back
at the policy the caller runs at, never above it (watch's uploader yields to the training);
never at the idle policy where it could not come back (a user's default RLIMIT_NICE)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.skipif(not hasattr(os, "SCHED_IDLE") or not hasattr(os, "mkfifo"),
                                 reason="needs Linux's SCHED_IDLE and a FIFO"),
              pytest.mark.process("the caller's CPU policy is set for the whole process")]

_PROBE = """
import os, threading, time
from ckpt_action.stores.bucket import _IdleHash, can_leave_idle
idle_first = can_leave_idle()  # else (a user whose RLIMIT_NICE forbids coming back) never idle
if {caller_idle}:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # as watch's uploader runs
fifo = {fifo!r}
os.mkfifo(fifo)
hashing = _IdleHash({{"f": (fifo, "f")}})  # blocks reading until the FIFO is written
while hashing._tid is None:
    time.sleep(0.01)
time.sleep(0.1)
before = os.sched_getscheduler(hashing._tid)
hurried = threading.Thread(target=hashing.hurry)
hurried.start()
time.sleep(0.2)
after = os.sched_getscheduler(hashing._tid)
with open(fifo, "wb") as w:
    w.write(b"abc")
hurried.join()
print(before == (os.SCHED_IDLE if {caller_idle} or idle_first else os.SCHED_OTHER),
      after == (os.SCHED_IDLE if {caller_idle} else os.SCHED_OTHER),
      hashing.future.result()["f"].size)
"""


@pytest.mark.parametrize("caller_idle", [False, True], ids=["caller-usual", "caller-idle"])
def test_a_hurried_hash_runs_at_the_callers_policy(tmp_path, caller_idle):
    code = textwrap.dedent(_PROBE.format(caller_idle=caller_idle, fifo=str(tmp_path / "fifo")))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "3"], run.stdout
