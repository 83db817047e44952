"""The action's shell steps, run as the runner runs them (bash, GITHUB_ACTIONS=true).

The mask step masks every line of the token input, stripped, whatever YAML made of it (a
block scalar ``token: |`` ends it with a newline); and any step that fails prints one
``::error::`` line saying what to change, never a bare non-zero exit.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.gha import unescape_data, workflow_commands

ROOT = Path(__file__).resolve().parents[2]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
TOKEN = "hf_FAKE_mask_me_Q7zSeCrEtXv93"


def _step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s["name"].startswith(name))


def _run_step(step: dict, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run a composite step's script as the runner does: bash, its env, the action path."""
    script = step["run"]
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTIONS": "true",
            "CKPT_ACTION_PATH": str(ROOT), **env}
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize(("given", "masked"), [
    (TOKEN, [TOKEN]),
    (TOKEN + "\n", [TOKEN]),  # token: |  (a block scalar keeps its newline)
    ("  " + TOKEN + " \r\n", [TOKEN]),
    (TOKEN + "\n\n", [TOKEN]),  # token: |+
    ("first-line-AAAA\n\nsecond-line-BBBB\n", ["first-line-AAAA", "second-line-BBBB"]),
    ("50%0Atoken", ["50%0Atoken"]),  # a % is escaped, so the runner masks the value given
], ids=["plain", "block-scalar", "padded-crlf", "keep-chomping", "two-lines", "percent"])
def test_the_mask_step_masks_each_stripped_line_and_succeeds(given, masked, tmp_path):
    run = _run_step(_step("Mask token"), {"INPUT_TOKEN": given}, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    commands = workflow_commands(run.stdout)
    assert [c for c, _ in commands] == ["add-mask"] * len(commands), run.stdout
    got = {unescape_data(data) for _, data in commands}
    assert set(masked) <= got and "" not in got, run.stdout
    for line in run.stdout.splitlines():  # nothing of the token is printed but in a mask command
        assert line.startswith("::add-mask::"), line


def test_the_mask_step_with_no_token_prints_nothing(tmp_path):
    run = _run_step(_step("Mask token"), {"INPUT_TOKEN": ""}, tmp_path)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


def _fake_python(tmp_path: Path, fail_on: str) -> Path:
    """A python that passes the runtime's version check but fails ``fail_on`` (an argument)."""
    fake = tmp_path / "fake-python"
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "{fail_on}" ] && exit 7; done\n'
                    f'exec "{sys.executable}" "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake


def test_an_unexpected_failure_of_the_run_step_prints_one_error_line(tmp_path):
    env = {"INPUT_MODE": "latest", "INPUT_REPO": "o/r", "INPUT_RUNTIME": "native",
           "INPUT_PYTHON": str(_fake_python(tmp_path, "venv")), "CKPT_ACTION_CACHE": str(tmp_path / "cache"),
           "INPUT_TOKEN": TOKEN + "\n"}
    run = _run_step(_step("ckpt-action"), env, tmp_path)
    assert run.returncode != 0
    errors = [data for command, data in workflow_commands(run.stdout + run.stderr) if command.startswith("error")]
    assert len(errors) == 1, run.stdout + run.stderr
    assert "venv" in errors[0] and TOKEN not in run.stdout + run.stderr


def test_the_clis_own_failure_in_the_container_is_its_one_error_line_and_exit_code(tmp_path):
    """The tool's exit code (3: latest --require found nothing) comes through as it is,
    with the tool's own error line and no second one from the shell."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text('#!/bin/sh\ncase "$1" in\n  run) echo "::error::no complete checkpoint-N in o/r"; exit 3 ;;\n'
                      '  *) exit 0 ;;\nesac\n')
    docker.chmod(0o755)
    env = {"INPUT_MODE": "latest", "INPUT_REPO": "o/r", "INPUT_REQUIRE": "true", "INPUT_RUNTIME": "container",
           "INPUT_IMAGE": "example/ckpt-action:test", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = _run_step(_step("ckpt-action"), env, tmp_path)
    assert run.returncode == 3, run.stdout + run.stderr
    errors = [data for command, data in workflow_commands(run.stdout + run.stderr) if command.startswith("error")]
    assert errors == ["no complete checkpoint-N in o/r"], run.stdout + run.stderr


def _cached_venv(cache: Path) -> None:
    """The native runtime's venv as a cached earlier run left it (this interpreter stands in for
    one built from requirements.lock), so the step needs no network."""
    import hashlib
    import platform

    lock = hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()[:16]
    key = f"py{sys.version_info[0]}{sys.version_info[1]}-{sys.platform}-{platform.machine().lower()}-{lock}"
    venv = cache / f"venv-{key}"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (venv / ".complete").touch()


def test_the_setup_mode_puts_ckpt_action_on_path_for_later_steps(tmp_path):
    cache, github_path = tmp_path / "cache", tmp_path / "github_path"
    _cached_venv(cache)
    github_path.touch()
    env = {"INPUT_MODE": "setup", "INPUT_PYTHON": sys.executable, "CKPT_ACTION_CACHE": str(cache),
           "GITHUB_PATH": str(github_path), "INPUT_TOKEN": TOKEN}
    run = _run_step(_step("ckpt-action"), env, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    added = github_path.read_text().splitlines()
    assert len(added) == 1, added
    # A later `run:` step: the runner prepends GITHUB_PATH's dirs to PATH.
    later = subprocess.run(["bash", "-c", "ckpt-action --version && ckpt-action watch --help"], capture_output=True,
                           text=True, env={"PATH": f"{added[0]}:/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=120)
    assert later.returncode == 0, later.stderr
    assert "ckpt-action, version" in later.stdout and "--grace" in later.stdout
    assert TOKEN not in run.stdout + run.stderr + (Path(added[0]) / "ckpt-action").read_text()
