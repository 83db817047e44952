"""The local Hub as a separate process, with an access log the bench reads requests from.

A separate process (not the in-process ``LocalHub``) so the server never shares a GIL
with the client being timed, and so every measured client is a process of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
TELEMETRY_PATH = "/api/agent-harnesses"
LFS_PUT_PREFIX = "/localhub-lfs/"


@dataclass
class Requests:
    """Access-log lines of one measured step, with the client's telemetry call kept apart."""

    lines: list[dict[str, Any]]

    @property
    def api(self) -> list[dict[str, Any]]:
        return [r for r in self.lines if not r["path"].startswith(TELEMETRY_PATH)]

    @property
    def count(self) -> int:
        """Requests the operation made, the once-a-day telemetry call excluded."""
        return len(self.api)

    @property
    def telemetry(self) -> int:
        return len(self.lines) - len(self.api)

    @property
    def lfs_bytes_up(self) -> int:
        return sum(int(r["bytes_in"]) for r in self.lines if r["method"] == "PUT"
                   and r["path"].startswith(LFS_PUT_PREFIX))

    @property
    def bytes_in(self) -> int:
        return sum(int(r["bytes_in"]) for r in self.lines)

    @property
    def bytes_out(self) -> int:
        return sum(int(r["bytes_out"]) for r in self.lines)

    @property
    def commits(self) -> int:
        return sum(1 for r in self.lines if r["method"] == "POST" and "/commit/" in r["path"]
                   and r["status"] == 200)

    def summary(self) -> list[str]:
        """``METHOD path`` without the query, for the report."""
        return [f"{r['method']} {r['path'].split('?', 1)[0]}" for r in self.api]


class HubProcess:
    """``python -m ckpt_action.localhub`` on a free port, stopped by ``stop()``.

    LFS downloads take the Hub's redirect to its CDN listener, as in production; the
    access log holds both listeners' lines.
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data_dir = base / "data"
        self.access_log = base / "access.log"
        port_file = base / "port"
        base.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "ckpt_action.localhub", "--data-dir", str(self.data_dir),
               "--port", "0", "--port-file", str(port_file), "--access-log", str(self.access_log)]
        self._stderr = open(base / "server.stderr", "ab")
        path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path)
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"local hub did not start: {(base / 'server.stderr').read_text()}")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
        self._mark = 0

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
        """Start a measured step: later ``since_mark()`` returns only its requests."""
        self._mark = self._settled_size()

    def since_mark(self) -> Requests:
        if self._settled_size() == 0:
            return Requests([])
        with open(self.access_log, "rb") as fh:
            fh.seek(self._mark)
            data = fh.read()
        return Requests([json.loads(line) for line in data.splitlines() if line.strip()])

    def peak_rss(self) -> int:
        """The server's peak resident memory so far, in bytes (Linux; 0 elsewhere)."""
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self, remove: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> HubProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def client_env(url: str, home: Path, *, telemetry: bool = True) -> dict[str, str]:
    """Environment for one measured client process: this Hub, plain LFS, a fresh HF_HOME.

    A fresh HF_HOME means no warm cache helps any tool, and the client's once-a-day
    telemetry call shows up in every process (it is counted apart, see ``Requests``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "CKPT_", "WANDB_"))}
    home.mkdir(parents=True, exist_ok=True)
    env.update(HF_ENDPOINT=url, HF_HUB_DISABLE_XET="1", HF_HOME=str(home), HF_HUB_DISABLE_PROGRESS_BARS="1",
               HF_HUB_DISABLE_UPDATE_CHECK="1", HF_TOKEN="hf_bench_token_unused_by_open_hub",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p))
    if not telemetry:
        env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    return env
