"""The README's signed release flow with a key runs as written on the local Hub, and the
release keyless workflow names only inputs the action has."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from ckpt_action.ci.action_inputs import INPUTS
from tests.conftest import ENTRYPOINT, clean_env

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
SECTION = README[README.index("## Signed checkpoints"):README.index("## Weights & Biases pointers")]


def block(start: str, end: str, lang: str) -> str:
    inner = README[README.index(start) + len(start):README.index(end)]
    match = re.search(rf"```{lang}\n(.*?)```", inner, re.S)
    assert match, f"no {lang} block between {start} and {end}"
    return match.group(1)


def test_the_signed_release_flow_runs_as_written_and_refuses_the_tampered_release(tmp_path: Path) -> None:
    script = block("<!-- signing-flow:start -->", "<!-- signing-flow:end -->", "bash")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "ckpt-action"  # this checkout's CLI, as `pip install` would put it on PATH
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} {ENTRYPOINT} \"$@\"\n")
    shim.chmod(0o755)
    env = clean_env(tmp_path, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(tmp_path))
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "tampered release refused"
    assert "is not signed" in proc.stderr  # the refusal names what failed


def test_the_keyless_workflow_uses_inputs_the_action_has_and_asks_for_the_id_token() -> None:
    workflow = yaml.safe_load(re.search(r"```yaml\n(.*?)```", SECTION, re.S).group(1))  # type: ignore[union-attr]
    known = {spec.name for spec in INPUTS} | {"mode", "token"}
    steps = [s for job in workflow["jobs"].values() for s in job["steps"] if "ckpt-action@" in s.get("uses", "")]
    for step in steps:
        assert set(step["with"]) <= known, set(step["with"]) - known
    assert workflow["jobs"]["release"]["permissions"]["id-token"] == "write"
    assert {s["with"]["mode"] for s in steps if s["with"].get("sign-keyless")} == {"push", "promote"}
    pull = next(s for s in steps if s["with"]["mode"] == "pull")
    assert pull["with"]["verify-issuer"] == "https://token.actions.githubusercontent.com"
