"""Getting started's offline section (docs/getting-started.md, ``runs: offline``) runs as
written: the local Hub started by hand in the background, ``HF_ENDPOINT`` set to it, then push,
latest and pull, and the local Hub stopped by the block's own last line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import ENTRYPOINT, clean_env
from tests.helpers.docblocks import block


def test_the_offline_section_runs_as_written(tmp_path: Path) -> None:
    script = block("docs/getting-started.md", "offline")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "ckpt-action"  # this checkout's CLI, as `pip install` would put it on PATH
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} {ENTRYPOINT} \"$@\"\n")
    shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(tmp_path, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.pop("HF_ENDPOINT", None)
    # errexit, so a failing command fails the test; a session of its own, so nothing outlives it;
    # files, not pipes, for its output: a local Hub left running by a failed line would hold a pipe open
    with open(tmp_path / "out", "w") as out_f, open(tmp_path / "err", "w") as err_f:
        proc = subprocess.Popen(["bash", "-e", "-c", script], cwd=work, env=env, stdout=out_f, stderr=err_f,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=300)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert proc.returncode == 0, out + err
    assert "subfolder: checkpoint-100" in out and "found: true" in out, out
    assert out.strip().splitlines()[-1] == "weights", out
    assert (work / "resume" / "model.safetensors").read_text() == "weights\n"
    assert (work / "hub.log").read_text().startswith("http://127.0.0.1:")
