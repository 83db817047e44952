"""Fixtures for tests that drive the real hf_xet client against the local Hub's Xet path.

- ``xet_client``: configures the in-process huggingface_hub for a local Hub with Xet
  enabled (``HF_HUB_DISABLE_XET`` unset; cache, Xet cache and token files under tmp) and
  returns the download cache dir.
- ``xet_hub``: an in-process :class:`~ckpt_localhub.LocalHub` with Xet on and an
  access log.
- ``xet_env(url, home)``: the environment for an ``hf`` subprocess on the Xet path, each
  ``home`` with its own Xet cache, so a second push can only dedupe through the server, and
  hf_xet's backoff from the tests' ``RETRY_DELAY`` (its own first delay is 3 s).
- ``run_hf(args, env)``: runs the real ``hf`` CLI.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckpt_localhub import LocalHub
from tests.conftest import RETRY_DELAY, xet_retry_delay
from tests.helpers.localhub_fixtures import configure_client, entries, make_hub_env

HF = str(Path(sys.executable).with_name("hf"))


def xet_env(url: str, home: Path, token: str | None = None) -> dict[str, str]:
    env = make_hub_env(url, home, token)
    env.pop("HF_HUB_DISABLE_XET", None)
    env["HF_XET_CACHE"] = str(home / "xet")
    env["HF_XET_CLIENT_RETRY_BASE_DELAY"] = xet_retry_delay(RETRY_DELAY)
    return env


def run_hf(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([HF, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def cas_bytes_in(hub: LocalHub, method: str, contains: str) -> int:
    """Bytes the CAS listener received on matching requests (from the access log)."""
    return sum(e["bytes_in"] for e in entries(hub, method, contains, listener="cas"))


@pytest.fixture
def xet_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The in-process huggingface_hub on the Xet path, under tmp; returns the cache dir."""
    return configure_client(tmp_path, monkeypatch, xet=True)


@pytest.fixture
def xet_hub(tmp_path: Path, xet_client: Path) -> Iterator[LocalHub]:
    with LocalHub(tmp_path / "hub_data", access_log=tmp_path / "hub_access.log") as hub:
        yield hub
