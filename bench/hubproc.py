"""The local Hub as a separate process (:class:`ckpt_localhub.process.HubProcess`,
which the tests use too), with an access log the bench reads requests from.

A separate process (not the in-process ``LocalHub``) so the server never shares a GIL
with the client being timed, and so every measured client is a process of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckpt_localhub.process import HubProcess

__all__ = ["REPO_ROOT", "HubProcess", "Requests", "client_env"]
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
