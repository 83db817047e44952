"""The local Hub as a child process (``python -m ckpt_localhub``), for the tests and
the benchmarks that need it out of this process: a server that never shares a GIL with the
client being timed, that a test can restart on the same data and port, and whose faults
file it can rewrite while it runs. The in-process server is :class:`~.server.LocalHub`.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

# The dir holding this package (packages/ckpt-localhub in a checkout, or site-packages): the
# child imports the same code.
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_RUNNING: weakref.WeakSet[HubProcess] = weakref.WeakSet()


def _dies_with_parent() -> Any:
    """What the child runs before the server (Linux): the kernel sends it SIGTERM when the
    process that started it ends, however that ends (SIGKILL included), so no Hub outlives
    an interrupted test run. The kernel ties this to the starting thread, and the tests and
    the bench start Hubs from their main thread. libc is looked up here, in the parent:
    between fork and exec the child only calls."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent, sigterm = os.getpid(), int(signal.SIGTERM)

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, sigterm, 0, 0, 0)
        if os.getppid() != parent:  # the parent ended before the request took effect
            os._exit(1)

    return in_child


def _stop_all() -> None:
    """At exit (a run that ends without its teardown, e.g. Ctrl-C): stop every Hub still running."""
    for hub in list(_RUNNING):
        hub.stop()


atexit.register(_stop_all)


class HubProcess:
    """A local Hub child on a free port (or ``restart()``'s same one), with an access log.

    ``token`` makes it refuse other tokens; ``faults`` (rules as in :mod:`.faults`) can be
    replaced while it runs with :meth:`set_faults`. :meth:`mark` and :meth:`since_mark`
    cut the access log into measured steps.
    """

    def __init__(self, base: Path, token: str | None = None, faults: list[dict[str, Any]] | None = None,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.base = base
        self.extra_args = extra_args
        self.data_dir = base / "data"
        self.access_log = base / "access.log"
        self.faults_path = base / "faults.json"
        self.stderr_path = base / "server.stderr"
        self.port_file = base / "port"
        self.token = token
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self._mark = 0
        base.mkdir(parents=True, exist_ok=True)
        self.set_faults(faults or [])
        self._start(0)

    def _start(self, port: int) -> None:
        self.port_file.unlink(missing_ok=True)
        cmd = [
            sys.executable, "-m", "ckpt_localhub",
            "--data-dir", str(self.data_dir), "--port", str(port), "--port-file", str(self.port_file),
            "--access-log", str(self.access_log), "--faults", str(self.faults_path),
        ]
        if self.token is not None:
            cmd += ["--token", self.token]
        cmd += self.extra_args
        env = dict(os.environ)
        env.pop("LOCAL_HUB_TOKEN", None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p)
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(cmd, cwd=PACKAGE_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                                         preexec_fn=_dies_with_parent())
        _RUNNING.add(self)
        deadline = time.monotonic() + 30
        while not self.port_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"local hub exited ({self.proc.returncode}): {self.stderr_path.read_text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("local hub did not start within 30 s")
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"

    def set_faults(self, rules: list[dict[str, Any]]) -> None:
        """Replace the fault rules (the server rereads the file when it changes)."""
        tmp = self.faults_path.with_name(f".{self.faults_path.name}.tmp")
        tmp.write_text(json.dumps(rules))
        os.replace(tmp, self.faults_path)

    def log_entries(self) -> list[dict[str, Any]]:
        """Every access-log line so far."""
        if not self.access_log.exists():
            return []
        return [json.loads(line) for line in self.access_log.read_text().splitlines() if line.strip()]

    def _settled_size(self) -> int:
        """The log's size once it stopped growing.

        The server writes a request's line before the response's last byte, so a finished
        client's lines are all there; waiting for quiet also keeps the lines of requests a
        client abandoned mid-answer with the step that made them.
        """
        last, stable = -1, 0
        while stable < 3:
            size = self.access_log.stat().st_size if self.access_log.exists() else 0
            stable = stable + 1 if size == last else 0
            last = size
            time.sleep(0.02)
        return last

    def mark(self) -> None:
        """Start a measured step: later :meth:`since_mark` returns only its requests."""
        self._mark = self._settled_size()

    def since_mark(self) -> list[dict[str, Any]]:
        """The access-log lines since :meth:`mark`."""
        if self._settled_size() == 0:
            return []
        with open(self.access_log, "rb") as fh:
            fh.seek(self._mark)
            data = fh.read()
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def peak_rss(self) -> int:
        """The server's peak resident memory so far, in bytes (Linux; 0 elsewhere)."""
        if self.proc is None:
            return 0
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self, remove: bool = False) -> None:
        """Stop the server (``remove``: and delete its data and logs)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _RUNNING.discard(self)
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start again on the same data dir, keeping the port (and so the URL) if it is free."""
        self.stop()
        try:
            self._start(self.port)
        except RuntimeError:
            self._start(0)

    def __enter__(self) -> HubProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
