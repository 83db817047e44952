"""The unit layer's rule, held: a unit test runs in this process with no server and no
child process (CONTRIBUTING.md, "Tests"). A test that opens a connection, listens, or
starts a process fails here, saying which; it belongs in ``tests/integration/`` (a local
Hub in-process) or ``tests/e2e/`` (whole processes)."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest


class LayerError(AssertionError):
    """A unit test did what only the integration or e2e layers may."""


def _refuse(what: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise LayerError(f"a unit test may not {what}: move it to tests/integration/ or tests/e2e/")

    return refused


@pytest.fixture(autouse=True)
def _unit_layer_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, what in (("connect", "open a connection"), ("connect_ex", "open a connection"),
                       ("bind", "listen on a socket")):
        monkeypatch.setattr(socket.socket, name, _refuse(what))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse("start a process"))
    yield
