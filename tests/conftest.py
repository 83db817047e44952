"""Shared test plumbing: the local Hub fixtures and a runner for the real CLI."""

from __future__ import annotations

import contextlib
import gc
import importlib
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

# The tests' backoff: CKPT_RETRY_DELAY and CKPT_RETRY_MAX_DELAY of every run clean_env makes,
# and the one setting the client libraries' own retries follow in tests too (hf_xet's
# HF_XET_CLIENT_RETRY_BASE_DELAY, derived per run; huggingface_hub's http_backoff in this
# process: _client_backoff_scaled). Same attempts, the same doubling, scaled-down waits.
RETRY_DELAY = 0.05
RETRY_MAX_DELAY = 0.5
# The tests' one bound on how long a loaded machine may keep a thread or a process from
# running: the fault matrix's CKPT_TIMEOUT (0.5 s held on 2 cores with a CPU-bound process on
# each beside the run); a test whose timeout is about silence, not work, derives from it. On a
# slower machine, raise FAULT_MATRIX_TIMEOUT.
FAULT_MATRIX_TIMEOUT = float(os.environ.get("FAULT_MATRIX_TIMEOUT", "0.5"))


def xet_retry_delay(ckpt_retry_delay: str | float) -> str:
    """hf_xet's first backoff delay for a run whose CKPT_RETRY_DELAY is ``ckpt_retry_delay``
    (its default, 3 s, made a reset or a 503 on a CAS route cost seconds a cell)."""
    return f"{max(1, round(float(ckpt_retry_delay) * 1000))}ms"


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
        "CKPT_RETRY_DELAY": str(RETRY_DELAY),
        "CKPT_RETRY_MAX_DELAY": str(RETRY_MAX_DELAY),
        "CKPT_TIMEOUT": "20",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    env.setdefault("HF_XET_CLIENT_RETRY_BASE_DELAY", xet_retry_delay(env["CKPT_RETRY_DELAY"]))
    return env


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module is imported now (torch, transformers, the client libraries): their
    objects live as long as the run, so the collector need not walk them again. Each
    ``gc.collect()`` (accelerate calls two a Trainer run, pytest five at the end) otherwise
    walks that whole heap: about 0.4 s apiece once torch is in."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True, scope="session")
def _client_backoff_scaled() -> Iterator[None]:
    """huggingface_hub retries a few calls itself (preupload, the LFS batch and PUTs) with
    http_backoff: 1 s doubling to 8 s, 23 s of sleeps before a persistent fault fails. In
    this process it backs off from the tests' RETRY_DELAY, capped at RETRY_MAX_DELAY: the same
    six attempts, waits scaled down. (A child process keeps the library's own waits.)"""
    from huggingface_hub.utils import _http

    backoffs = [getattr(f, "__wrapped__", f) for f in (_http.http_backoff, _http.http_stream_backoff)]
    saved = [dict(f.__kwdefaults__ or {}) for f in backoffs]
    for f in backoffs:
        assert f.__kwdefaults__ and {"base_wait_time", "max_wait_time"} <= set(f.__kwdefaults__), \
            "huggingface_hub's http_backoff changed: scale its waits some other way"
        f.__kwdefaults__.update(base_wait_time=RETRY_DELAY, max_wait_time=RETRY_MAX_DELAY)
    yield
    for f, before in zip(backoffs, saved, strict=True):
        f.__kwdefaults__.update(before)


def _child_cli(tmp_path: Path) -> Callable[..., Run]:
    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300, **extra: str) -> Run:
        full_env = clean_env(tmp_path, **extra) if env is None else env
        proc = subprocess.run([sys.executable, str(ENTRYPOINT), *args], capture_output=True, text=True,
                              env=full_env, timeout=timeout, cwd=tmp_path, stdin=subprocess.DEVNULL)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def cli_process(tmp_path):
    """Run ``python entrypoint.py ARGS`` in a child process, as a user would; returns a Run.
    For the tests where the process itself is the point (they live in ``tests/e2e/``, whose
    ``cli`` is this one; elsewhere a test marks why it needs one: ``tests/integration/conftest.py``)."""
    return _child_cli(tmp_path)


# What a child's Python does with warnings (no -W, no PYTHONWARNINGS): the in-process run
# prints them on its stderr the same way, not into pytest's record.
_CHILD_WARNING_FILTERS = [
    ("default", None, DeprecationWarning, "__main__", 0),
    ("ignore", None, DeprecationWarning, None, 0),
    ("ignore", None, PendingDeprecationWarning, None, 0),
    ("ignore", None, ImportWarning, None, 0),
    ("ignore", None, ResourceWarning, None, 0),
]


@contextlib.contextmanager
def _as_a_child(env: dict[str, str], cwd: Path) -> Iterator[None]:
    """This process set up for one CLI run as a child would have it: exactly ``env`` as its
    environment (huggingface_hub's constants, which it reads once at import, read anew from
    it), ``cwd``, the console script's logging, warnings printed on stderr, an HTTP client
    and a W&B SDK of its own (made under ``env``: its proxy variables, its W&B settings); all
    restored after."""
    import logging
    import warnings

    from huggingface_hub import constants
    from huggingface_hub.utils import _http, are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    from ckpt_action.cli.render import route_client_logs, setup_logging

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_constants = dict(vars(constants))
    root, client = logging.getLogger(), logging.getLogger("huggingface_hub")
    saved_logging = (root.handlers[:], root.level, client.handlers[:])
    bars_were_off = are_progress_bars_disabled()
    saved_client = _http._GLOBAL_CLIENT
    _teardown_wandb()
    try:
        _http._GLOBAL_CLIENT = None
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        importlib.reload(constants)
        with warnings.catch_warnings():
            warnings.filters[:] = list(_CHILD_WARNING_FILTERS)
            warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
            setup_logging()
            route_client_logs()
            yield
    finally:
        _teardown_wandb()
        if _http._GLOBAL_CLIENT is not None:
            _http._GLOBAL_CLIENT.close()
        _http._GLOBAL_CLIENT = saved_client
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for name in set(vars(constants)) - set(saved_constants):
            delattr(constants, name)
        for name, value in saved_constants.items():
            setattr(constants, name, value)
        root.handlers[:], client.handlers[:] = saved_logging[0], saved_logging[2]
        root.setLevel(saved_logging[1])
        (disable_progress_bars if bars_were_off else enable_progress_bars)()


def _teardown_wandb() -> None:
    """W&B's SDK keeps one process-wide setup, made from the environment of its first use."""
    if "wandb" in sys.modules:
        sys.modules["wandb"].teardown()


@contextlib.contextmanager
def _commands_kept() -> Iterator[None]:
    """Click keeps on each command what a run made of it (its help option, spelled as the
    group's context had it): a child's run leaves nothing behind, so neither does this one."""
    from ckpt_action.cli.app import cli

    commands = [cli, *cli.commands.values()]
    saved = [dict(vars(command)) for command in commands]
    try:
        yield
    finally:
        for command, before in zip(commands, saved, strict=True):
            for name in set(vars(command)) - set(before):
                delattr(command, name)
            vars(command).update(before)


def _in_process_cli(tmp_path: Path) -> Callable[..., Run]:
    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300, **extra: str) -> Run:
        from click.testing import CliRunner

        from ckpt_action.cli.app import main

        del timeout  # the child's bound; in-process, pytest's own timeout bounds the test
        full_env = clean_env(tmp_path, **extra) if env is None else env
        with CliRunner().isolation() as (out, err, _), _as_a_child(full_env, tmp_path), _commands_kept():
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        return Run(code, out.getvalue().decode(), err.getvalue().decode())

    return run


@pytest.fixture
def cli(tmp_path):
    """Run the CLI with ARGS as ``python entrypoint.py ARGS`` would, in this process: the
    same arguments, an environment of its own (``clean_env`` unless ``env=``), the working
    dir ``tmp_path``, no stdin, stdout and stderr apart, the exit code; returns a Run.
    ``tests/e2e/`` runs a child instead (``cli_process``)."""
    return _in_process_cli(tmp_path)


@pytest.fixture
def cli_in_process(cli):
    """``cli``, under the name the tests that asked for an in-process run used."""
    return cli


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
