"""Timed subprocess runs and medians: every wall time in the report comes from here."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .hubproc import REPO_ROOT

PY_CLI = [sys.executable, str(REPO_ROOT / "entrypoint.py")]
# The hf CLI installed beside this interpreter (its venv's bin), whatever PATH says.
HF_CLI = str(Path(sys.executable).with_name("hf"))


@dataclass
class Run:
    seconds: float
    stdout: str
    stderr: str
    code: int = 0


class BenchCommandError(RuntimeError):
    pass


def run(cmd: Sequence[str], env: dict[str, str], *, cwd: Path | None = None, check: bool = True,
        timeout: float = 1800) -> Run:
    """Run one process and time it end to end (interpreter start and exit included)."""
    argv = [HF_CLI if i == 0 and arg == "hf" else arg for i, arg in enumerate(cmd)]
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd or REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)
    seconds = time.perf_counter() - started
    if check and proc.returncode != 0:
        raise BenchCommandError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return Run(seconds, proc.stdout, proc.stderr, proc.returncode)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 2) if denominator else None
