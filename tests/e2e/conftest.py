"""Whole processes: here ``cli`` runs the CLI as a child process and ``hub_server`` starts
the local Hub as one (``python -m ckpt_localhub``), as a user and a CI job run them."""

import os
from pathlib import Path

import pytest


@pytest.fixture
def cli(cli_process):
    return cli_process


@pytest.fixture
def hub_server(hub_process):
    return hub_process


@pytest.fixture(scope="session")
def tool_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The action's native venv cache (CKPT_ACTION_CACHE) the act host-mode tests share, built
    once per session (CKPT_TEST_TOOL_CACHE: kept across sessions)."""
    keep = os.environ.get("CKPT_TEST_TOOL_CACHE")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep)
    return tmp_path_factory.mktemp("toolcache")
