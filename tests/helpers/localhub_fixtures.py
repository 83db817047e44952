"""Pytest fixtures that run the local Hub for tests that drive the real huggingface_hub client.

Use them with ``pytest_plugins = ["tests.helpers.localhub_fixtures"]`` (conftest) or
``from tests.helpers.localhub_fixtures import *``.

- ``hub_server``: factory; ``hub_server(token=None, faults=None, extra_args=())`` starts a
  local Hub in this process on a free port (``extra_args``: flags of ``python -m
  ckpt_localhub``) and returns an :class:`InProcessHub`, which answers as a
  :class:`HubProcess` does (``.url``, ``.port``, ``.data_dir``, ``.access_log``, ``.faults_path``,
  ``.token``, ``.set_faults(list)``, ``.log_entries()``, ``.stop()``, ``.restart()``) but has no
  ``.proc``. Every server started is stopped at teardown.
- ``hub_process``: the same factory starting ``python -m ckpt_localhub`` as a child
  (:class:`ckpt_localhub.process.HubProcess`, which the benchmarks use too), for the
  tests about the server's process itself (its memory, a kill -9, its stderr).
- ``hub_env``: ``hub_env(server, token=...)`` -> env dict for a client subprocess (``hf ...``).
- ``local_hub``: an in-process :class:`~ckpt_localhub.LocalHub` (fast; no faults file).
- ``hf_client``: configures the in-process huggingface_hub for a local Hub (no Xet, no
  telemetry, cache and token files under tmp) and returns the cache dir to pass as ``cache_dir``.
- ``served``: a local Hub (no token) holding ``REPO`` with an LFS and a regular file;
  returns ``(server, api, weights)``; ``served_process``: the same on a ``hub_process``.

Access-log lines of a request are written before its response's last byte leaves, so a
test may read the log as soon as the client has an answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ckpt_localhub import LocalHub
from ckpt_localhub.command import local_hub as local_hub_command
from ckpt_localhub.process import HubProcess

REPO_ROOT = Path(__file__).resolve().parents[2]
# The local Hub's own distribution in the checkout: a CLI child imports this copy of it (the
# demo), installed or not, as it does the checkout's ckpt_action.
LOCALHUB_ROOT = REPO_ROOT / "packages" / "ckpt-localhub"
TOKEN = "hf_local_test_token"
REPO = "local-user/ckpts"
__all__ = ["REPO", "TOKEN", "HubProcess", "InProcessHub", "configure_client", "entries", "hf_client", "hub_env",
           "hub_process", "hub_server", "local_hub", "make_hub_env", "served", "served_process", "sha256_file"]


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def read_log(path: Path | None) -> list[dict[str, Any]]:
    if path is None or not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def entries(server: HubProcess | LocalHub, method: str | None = None, contains: str = "",
            listener: str | None = None) -> list[dict[str, Any]]:
    """Access-log lines of a Hub, filtered by method, a substring of the path, and listener."""
    return [e for e in read_log(server.access_log)
            if (method is None or e["method"] == method) and contains in e["path"]
            and (listener is None or e["listener"] == listener)]


def make_hub_env(url: str, home: Path, token: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(
        HF_ENDPOINT=url,
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_HUB_DISABLE_UPDATE_CHECK="1",
        HF_HOME=str(home),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), str(LOCALHUB_ROOT), os.environ.get("PYTHONPATH"))
                                   if p),
    )
    if token is not None:
        env["HF_TOKEN"] = token
    return env


class InProcessHub(HubProcess):
    """A :class:`HubProcess` served from this process: a :class:`LocalHub` with the options
    ``extra_args`` give the command line, the same files (data dir, access log, faults file
    reread when it changes) and the same methods. Starting and stopping one costs
    milliseconds, a child about a second."""

    def _start(self, port: int) -> None:
        argv = ["--data-dir", str(self.data_dir), *self.extra_args]
        params = local_hub_command.make_context("local-hub", argv).params
        self.hub = LocalHub(self.data_dir, host=params["host"], port=port, faults=self.faults_path, token=self.token,
                            access_log=self.access_log, lfs_redirect=not params["lfs_direct"],
                            cdn_port=params["cdn_port"], xet=not params["no_xet"], cas_port=params["cas_port"],
                            max_connections=params["max_connections"], oidc_issuer=params["oidc_issuer"],
                            trusted_publishers=params["trusted_publishers"],
                            oidc_token_ttl=params["oidc_token_ttl"])
        self.running = True
        self.port, self.url = self.hub.port, self.hub.url

    def peak_rss(self) -> int:
        raise NotImplementedError("an in-process Hub shares this process's memory: use hub_process")

    def stop(self, remove: bool = False) -> None:
        if getattr(self, "running", False):
            self.running = False
            self.hub.stop()
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)

    def restart(self) -> None:
        self.stop()
        try:
            self._start(self.port)
        except OSError:
            self._start(0)


def _hub_factory(kind: type[HubProcess],
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., HubProcess]]:
    started: list[HubProcess] = []

    def start(token: str | None = None, faults: list[dict[str, Any]] | None = None,
              extra_args: tuple[str, ...] = ()) -> HubProcess:
        server = kind(tmp_path_factory.mktemp("hub"), token=token, faults=faults, extra_args=extra_args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., HubProcess]]:
    """Start local Hubs in this process (:class:`InProcessHub`); all stopped at teardown."""
    yield from _hub_factory(InProcessHub, tmp_path_factory)


@pytest.fixture
def hub_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., HubProcess]]:
    """Start local Hubs as child processes (:class:`HubProcess`); all stopped at teardown."""
    yield from _hub_factory(HubProcess, tmp_path_factory)


@pytest.fixture
def hub_env(tmp_path: Path) -> Callable[..., dict[str, str]]:
    def build(server: HubProcess | LocalHub, token: str | None = None) -> dict[str, str]:
        if token is None and isinstance(server, HubProcess):
            token = server.token
        return make_hub_env(server.url, tmp_path / "hf_home", token)

    return build


def configure_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, xet: bool) -> Path:
    """Point the in-process huggingface_hub at tmp dirs, on the Xet path or plain LFS;
    returns the cache dir. The one builder behind ``hf_client`` and ``xet_client``."""
    from huggingface_hub import constants

    cache = tmp_path / "hf_cache"
    for name in ("HF_TOKEN", "HF_ENDPOINT", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_DISABLE_XET"):
        monkeypatch.delenv(name, raising=False)
    if xet:
        monkeypatch.setenv("HF_XET_CACHE", str(tmp_path / "xet_cache"))
    else:
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    # These are read once at import, so configure the module too.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", not xet)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf_home" / "stored_tokens"))
    return cache


@pytest.fixture
def hf_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the in-process huggingface_hub at tmp dirs and plain LFS; returns the cache dir."""
    return configure_client(tmp_path, monkeypatch, xet=False)


@pytest.fixture
def local_hub(tmp_path: Path, hf_client: Path) -> Iterator[LocalHub]:
    with LocalHub(tmp_path / "hub_data", access_log=tmp_path / "hub_access.log") as hub:
        yield hub


def _serve_repo(server: HubProcess) -> tuple[HubProcess, Any, bytes]:
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=server.url, token=False)
    api.create_repo(REPO)
    weights = os.urandom(5000)
    api.create_commit(REPO, [CommitOperationAdd("model/weights.bin", weights),
                             CommitOperationAdd("model/config.json", b'{"a": 1}')], commit_message="first")
    return server, api, weights


@pytest.fixture
def served(hub_server: Callable[..., HubProcess], hf_client: Path) -> tuple[HubProcess, Any, bytes]:
    """A local Hub (no token) with one repo holding a regular and an LFS file."""
    return _serve_repo(hub_server())


@pytest.fixture
def served_process(hub_process: Callable[..., HubProcess], hf_client: Path) -> tuple[HubProcess, Any, bytes]:
    """``served`` with the Hub as a child process (``.proc``), for a test that kills it."""
    return _serve_repo(hub_process())
