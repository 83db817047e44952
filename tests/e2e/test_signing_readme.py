"""The signing guide's release flow with a key (docs/guides/signing.md) runs as written on the
local Hub, and the keyless release workflow it shows names only inputs the action has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from ckpt_action.ci.action_inputs import INPUTS
from tests.conftest import ENTRYPOINT, clean_env
from tests.helpers.docblocks import block, blocks

PAGE = "docs/guides/signing.md"


def test_the_signed_release_flow_runs_as_written_and_refuses_the_tampered_release(tmp_path: Path) -> None:
    script = block(PAGE, "signing-flow")
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
    shown = [b for b in blocks(PAGE) if b.detail == "example:example-signed-release.yml"]
    assert len(shown) == 1, "the signing guide shows the keyless release workflow"
    workflow = yaml.safe_load(shown[0].code)
    known = {spec.name for spec in INPUTS} | {"mode", "token"}
    steps = [s for job in workflow["jobs"].values() for s in job["steps"] if "ckpt-action@" in s.get("uses", "")]
    for step in steps:
        assert set(step["with"]) <= known, set(step["with"]) - known
    assert workflow["jobs"]["release"]["permissions"]["id-token"] == "write"
    assert {s["with"]["mode"] for s in steps if s["with"].get("sign-keyless")} == {"push", "promote"}
    pull = next(s for s in steps if s["with"]["mode"] == "pull")
    assert pull["with"]["verify-issuer"] == "https://token.actions.githubusercontent.com"
