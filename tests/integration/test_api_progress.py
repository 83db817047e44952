"""The Python API prints no third-party progress bar: a push and a pull of a file big enough
for hf_xet's bars print only ckpt-action's own lines on stderr (``push checkpoint-1:
uploading: done, ...``), no ``/proc/self/fd/N`` bar, no carriage return or cursor escape;
and the client's bar switch is as the caller left it afterwards, each group's setting too.
A child process: the bars are what the process prints, and huggingface_hub reads its switch
(``HF_HUB_DISABLE_PROGRESS_BARS``, which the tests' environment sets) once, at import."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

_CHILD = r"""
import json, os, sys
from pathlib import Path
import ckpt_action as ckpt
from ckpt_localhub import LocalHub
from huggingface_hub.utils import disable_progress_bars
import importlib
bars = importlib.import_module("huggingface_hub.utils.tqdm")

work = Path(sys.argv[1])
src = work / "c"
src.mkdir()
(src / "model.safetensors").write_bytes(os.urandom(3 << 20))  # past the plain-git size: the Xet path
disable_progress_bars("huggingface_hub.http_get")  # the caller's own setting of one group
before = dict(bars.progress_bar_states)
with LocalHub(work / "hub") as hub:
    h = ckpt.push(src, repo="o/r", step=1, endpoint=hub.url)
    ckpt.pull(h, work / "d", endpoint=hub.url)
json.dump({"before": before, "after": dict(bars.progress_bar_states)}, sys.stdout)
"""

OWN_LINE = re.compile(r"^(push|pull) checkpoint-1: [^\r\x1b]*$")


@pytest.mark.process("the bars are what a process prints; the client reads its switch at import")
def test_the_api_prints_its_own_lines_and_no_client_bars(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "CKPT_"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), CKPT_PROGRESS_INTERVAL="10")
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = json.loads(proc.stdout)
    assert states["after"] == states["before"] == {"huggingface_hub.http_get": False}, states
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr and "/proc/self/fd" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and all(OWN_LINE.match(line) for line in lines), proc.stderr
    assert any(line.startswith("push checkpoint-1: uploading: done") for line in lines), lines
    assert any(line.startswith("pull checkpoint-1: done") for line in lines), lines
