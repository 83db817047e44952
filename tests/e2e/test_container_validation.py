"""action/container.sh validates the inputs (in Python, ``from-action --print-mounts``) before it
creates or mounts anything: a step that will exit 2 leaves no dir behind. docker is a stub
on PATH that runs the real CLI for ``run ... IMAGE ARGS`` and records every call."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, clean_env

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$DOCKER_LOG"
case "$1" in
  inspect) exit 1 ;;  # not inside a container of this engine: the step mounts paths itself
  version|pull|rm) exit 0 ;;
  image) exit 0 ;;
  run)
    shift
    while [ "$#" -gt 0 ]; do
      case "$1" in
        --name|--user|--workdir|--env|--volume|--network|--volumes-from) shift 2 ;;
        --tty|--rm) shift ;;
        *) break ;;
      esac
    done
    shift  # the image
    exec "$PYTHON" "$ENTRYPOINT" "$@"
    ;;
esac
exit 0
"""


def _run(tmp_path: Path, **inputs: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(STUB)
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "docker.log"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = clean_env(tmp_path, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", DOCKER_LOG=str(log),
                    PYTHON=sys.executable, ENTRYPOINT=str(ROOT / "entrypoint.py"), INPUT_RUNTIME="container",
                    INPUT_IMAGE="ckpt-action:test", HF_ENDPOINT="http://127.0.0.1:9",
                    **{f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    proc = subprocess.run(["bash", str(ROOT / "action" / "run.sh")], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120)
    return proc, log.read_text().splitlines() if log.exists() else []


def _ran_the_command(calls: list[str]) -> bool:
    """Whether the step got past validating (a ``from-action`` run that only lists mounts or
    checks inputs is validation)."""
    return any(c.endswith(" from-action") for c in calls)


@pytest.mark.parametrize("inputs", [
    {"mode": "pull", "repo": "not a repo", "subfolder": "checkpoint-1"},
    {"mode": "pull", "repo": "o/r", "subfolder": "../up"},
    {"mode": "pull", "repo": "o/r", "revision": "a..b"},
    {"mode": "pull", "repo": "o/r", "subfolder": "checkpoint-1", "retries": "many"},
], ids=["repo", "subfolder", "revision", "retries"])
def test_a_step_that_will_exit_2_creates_nothing(inputs, tmp_path):
    target = tmp_path / "outside" / "deep" / "ckpt"
    cache = tmp_path / "cache" / "ckpt"
    proc, calls = _run(tmp_path, local_dir=str(target), cache_dir=str(cache), **inputs)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not (tmp_path / "outside").exists() and not (tmp_path / "cache").exists(), "created before validating"
    assert not _ran_the_command(calls), "ran the command itself"


def test_a_push_of_a_missing_dir_creates_no_parent(tmp_path):
    missing = tmp_path / "outside" / "deep" / "ckpt"
    proc, _calls = _run(tmp_path, mode="push", repo="o/r", step="1", local_dir=str(missing))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "does not exist" in proc.stdout + proc.stderr
    assert not (tmp_path / "outside").exists(), "a push created the parent of its local dir"


def test_good_inputs_mount_the_local_dir_parent_and_the_cache(tmp_path):
    target = tmp_path / "outside" / "deep" / "ckpt"
    cache = tmp_path / "cache" / "ckpt"
    proc, calls = _run(tmp_path, mode="pull", repo="o/r", subfolder="checkpoint-1", local_dir=str(target),
                       cache_dir=str(cache), retries="0", timeout="2")
    # The stub Hub address refuses connections: the command runs and fails on the network.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    final = [c for c in calls if c.startswith("run ") and c.endswith(" from-action")]
    assert len(final) == 1, calls
    assert f"--volume {target.parent}:{target.parent}" in final[0]
    assert f"--volume {cache}:{cache}" in final[0]
    # The checks ran first, seeing the dirs still to create through their nearest parent.
    (check,) = [c for c in calls if c.endswith(" from-action --check")]
    assert check.count(f"--volume {tmp_path}:{tmp_path} ") == 1, check


# Inputs the command refuses (exit 2) that only the command's own checks know: a bound that
# bounds nothing, a token the Hub would never take, two sources for one pull, a step past
# the bound, a commit message on two lines.
@pytest.mark.parametrize("inputs", [
    {"mode": "pull", "repo": "o/r", "subfolder": "checkpoint-1", "timeout": "nan"},
    {"mode": "pull", "repo": "o/r", "subfolder": "checkpoint-1", "token": "hf_abc def"},
    {"mode": "pull", "repo": "o/r", "subfolder": "checkpoint-1", "from-wandb": "e/p/a:latest"},
    {"mode": "pull", "repo": "o/r", "subfolder": "checkpoint-1", "verify-identity": "https://github.com/o/r"},
], ids=["timeout-nan", "token-space", "two-sources", "identity-alone"])
def test_a_pull_the_command_would_refuse_creates_nothing(inputs, tmp_path):
    target = tmp_path / "outside" / "deep" / "ckpt"
    cache = tmp_path / "cache" / "ckpt"
    proc, calls = _run(tmp_path, local_dir=str(target), cache_dir=str(cache),
                       **{k.replace("-", "_"): v for k, v in inputs.items()})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (proc.stdout + proc.stderr).strip().splitlines()[-1].startswith("error: "), proc.stdout + proc.stderr
    assert not (tmp_path / "outside").exists() and not (tmp_path / "cache").exists(), "created before validating"
    assert not _ran_the_command(calls), calls


@pytest.mark.parametrize("inputs", [
    {"mode": "push", "repo": "o/r", "step": "10000000000000000000"},
    {"mode": "push", "repo": "o/r", "step": "1", "commit-message": "two\nlines"},
], ids=["step-too-big", "message-two-lines"])
def test_a_push_the_command_would_refuse_runs_nothing(inputs, tmp_path):
    src = tmp_path / "outside" / "ckpt"
    src.mkdir(parents=True)
    (src / "w.bin").write_bytes(b"w")
    proc, calls = _run(tmp_path, local_dir=str(src), **{k.replace("-", "_"): v for k, v in inputs.items()})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not _ran_the_command(calls), calls


@pytest.mark.parametrize(("name", "value"), [("local_dir", "/"), ("local_dir", "{tmp}/out:x/ckpt"),
                                            ("cache_dir", "{tmp}/out:x")], ids=["root", "colon-parent", "colon-dir"])
def test_a_mount_a_volume_cannot_express_is_refused_before_anything(name, value, tmp_path):
    inputs = {"local_dir": str(tmp_path / "work" / "ckpt"), name: value.format(tmp=tmp_path)}
    proc, calls = _run(tmp_path, mode="pull", repo="o/r", subfolder="checkpoint-1", **inputs)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert out.strip().splitlines()[-1].startswith(f"error: input '{name.replace('_', '-')}'"), out
    assert not (tmp_path / "out:x").exists(), "created before validating"
    assert not any("--volume /:/" in c or "out:x" in c for c in calls), calls
    assert not _ran_the_command(calls), calls
