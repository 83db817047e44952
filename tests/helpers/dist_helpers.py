"""Launching torchrun jobs on this machine for the distributed tests.

One node: ``torchrun --standalone --nproc-per-node N``. Two "nodes": two torchrun
launches on loopback (``--nnodes 2 --node-rank 0|1``), each with its own dirs, so no
rank sees another node's files. Every launch runs under ``nice`` (the machine is shared)
with gloo, and a hard timeout so a hung job fails the test instead of holding it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the distributed tests need torch (the [distributed] extra)")

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = [os.path.join(os.path.dirname(sys.executable), "torchrun")]  # the venv's, next to its python
PUSH_SCRIPT = ROOT / "tests" / "helpers" / "dist_push_script.py"
JOB_TIMEOUT = float(os.environ.get("DIST_TEST_JOB_TIMEOUT", "240"))
STOP_GRACE = 3.0
"""Seconds a launch stopped with SIGTERM has to end before it is killed (its results recorded)."""
FAULT_TIMEOUT = float(os.environ.get("DIST_TEST_FAULT_TIMEOUT", "2"))
"""``CKPT_DISTRIBUTED_TIMEOUT`` of the pushes that wait out a dead or absent rank (the
tests' one setting for it; raise it on a slower machine): short, yet five heartbeats of
a live rank (one every fifth of it), so a live rank is not taken for dead on a loaded
machine. The other pushes keep a bound they never reach."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    env.update(extra)
    env.setdefault("OMP_NUM_THREADS", "1")
    localhub = ROOT / "packages" / "ckpt-localhub"  # the local Hub's own distribution, as the tests import it
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(localhub), env.get("PYTHONPATH")) if p)
    return env


def _check(procs: list[subprocess.Popen[str]], done: Callable[[], bool] | None = None) -> list[tuple[int, str]]:
    """Wait for the launches; (exit code, output) of each.

    When one launch fails, the agent of the other waits at torchrun's exit barrier (five
    minutes) for the dead one: once ``done()`` says the surviving ranks have recorded
    what they got, the launches still running are stopped.
    """
    deadline = time.monotonic() + JOB_TIMEOUT
    while any(proc.poll() is None for proc in procs):
        failed = any(proc.poll() not in (None, 0) for proc in procs)
        if time.monotonic() > deadline or (failed and done is not None and done()):
            break
        time.sleep(0.2)
    timed_out = time.monotonic() > deadline
    for proc in procs:
        if proc.poll() is None:
            # An agent at the exit barrier waits in a call into torch's store, which Python's
            # SIGTERM handler cannot cut short: a moment for a launch that can stop, then the kill.
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    out = [(proc.returncode, proc.communicate()[0]) for proc in procs]
    if timed_out:
        raise AssertionError(f"the job did not end within {JOB_TIMEOUT} s:\n" + "\n---\n".join(o for _, o in out))
    return out


def _launch(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    # A session of its own, so the launch and its workers are stopped together.
    return subprocess.Popen(cmd, env=_env(env, {}), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def standalone(nproc: int, args: list[str], env: dict[str, str], cwd: Path) -> list[tuple[int, str]]:
    """One node of ``nproc`` ranks; (exit code, output) of the launch."""
    cmd = ["nice", "-n", "10", *TORCHRUN, "--standalone", "--nproc-per-node", str(nproc), *args]
    return _check([_launch(cmd, env, cwd)])


def two_nodes(args: list[str], envs: list[dict[str, str]], cwd: Path, nproc: int = 2,
              done: Callable[[], bool] | None = None) -> list[tuple[int, str]]:
    """Two torchrun launches of ``nproc`` ranks each, node 0 hosting the rendezvous
    (``done``: see :func:`_check`)."""
    port = str(free_port())
    procs = []
    for node, env in enumerate(envs):
        cmd = ["nice", "-n", "10", *TORCHRUN, "--nnodes", "2", "--node-rank", str(node), "--master-addr",
               "127.0.0.1", "--master-port", port, "--nproc-per-node", str(nproc), *args]
        procs.append(_launch(cmd, env, cwd))
    return _check(procs, done)


def results(out_dirs: list[Path], world: int) -> dict[int, dict[str, Any]]:
    """What each rank recorded (a rank that died records nothing)."""
    found: dict[int, dict[str, Any]] = {}
    for out in out_dirs:
        for rank in range(world):
            path = out / f"rank-{rank}.json"
            if path.exists():
                found[rank] = json.loads(path.read_text())
    return found
