"""Shared test plumbing: the local Hub fixtures and a runner for the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest_plugins = ["tests.helpers.localhub_fixtures", "tests.helpers.xet_fixtures"]

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "entrypoint.py"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict:
        return json.loads(self.stdout.strip().splitlines()[-1])


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A child environment with no ambient Hub, W&B or GitHub settings, plus fast retries."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_", "WANDB_", "GITHUB_", "CKPT_", "RUNNER_"))}
    env.update({
        "HF_HOME": str(tmp_path / "hf-home"),
        "CKPT_RETRY_DELAY": "0.05",
        "CKPT_RETRY_MAX_DELAY": "0.5",
        "CKPT_TIMEOUT": "20",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


def _child_cli(tmp_path: Path) -> Callable[..., Run]:
    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300, **extra: str) -> Run:
        full_env = clean_env(tmp_path, **extra) if env is None else env
        proc = subprocess.run([sys.executable, str(ENTRYPOINT), *args], capture_output=True, text=True,
                              env=full_env, timeout=timeout, cwd=tmp_path, stdin=subprocess.DEVNULL)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def cli(tmp_path):
    """Run ``python entrypoint.py ARGS`` as a user would; returns a Run."""
    return _child_cli(tmp_path)


@pytest.fixture
def cli_process(tmp_path):
    """The same as ``cli``, under a name a module that runs ``cli`` in-process keeps for the
    tests that need a process of their own."""
    return _child_cli(tmp_path)


@pytest.fixture
def cli_in_process(tmp_path, monkeypatch):
    """Run the CLI in this process, as ``cli`` runs it in a child: the same arguments, a
    clean environment, stdout and stderr apart (Click's ``CliRunner`` isolation); returns a
    Run. Logging and the client's bars, which ``main`` sets process-wide, are left as they are."""
    from click.testing import CliRunner

    from ckpt_action.cli.app import run as run_cli

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300, **extra: str) -> Run:
        del timeout  # the child's bound; in-process, pytest's own timeout bounds the test
        full_env = clean_env(tmp_path, **extra) if env is None else env
        with monkeypatch.context() as patch, CliRunner().isolation() as (out, err, _):
            for key in [k for k in os.environ if k not in full_env]:
                patch.delenv(key)
            for key, value in full_env.items():
                patch.setenv(key, value)
            patch.chdir(tmp_path)
            try:
                run_cli(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        return Run(code, out.getvalue().decode(), err.getvalue().decode())

    return run


@pytest.fixture
def seeded(hub_server, hf_client, tmp_path):
    """A local Hub holding o/r with one complete checkpoint-1 (for proxies and faults in front of it)."""
    from tests.helpers.chaos_helpers import ckpt, seed

    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path / "seed", step=1)
    return hub


@pytest.fixture
def wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """W&B in offline mode for an in-process run, under tmp; yields the W&B dir to decode."""
    from tests.integration.test_wandb_pointer import offline_env

    for name in list(os.environ):
        if name.startswith("WANDB_"):
            monkeypatch.delenv(name)
    for key, value in offline_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    (tmp_path / "wandb-dir").mkdir()
    yield tmp_path / "wandb-dir"
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()


def write_checkpoint(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under root by relative path; the record a pull leaves (.ckpt-pull.json) aside."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).as_posix() != ".ckpt-pull.json"}
