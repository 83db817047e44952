"""The unit layer's rule is held (tests/unit/conftest.py): no socket, no child process."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from tests.unit.conftest import LayerError


def test_a_unit_test_can_neither_listen_nor_connect():
    with socket.socket() as sock, pytest.raises(LayerError, match="listen"):
        sock.bind(("127.0.0.1", 0))
    with socket.socket() as sock, pytest.raises(LayerError, match="connection"):
        sock.connect(("127.0.0.1", 9))


def test_a_unit_test_cannot_start_a_process():
    with pytest.raises(LayerError, match="start a process"):
        subprocess.run(["true"], check=False)
    with pytest.raises(LayerError, match="start a process"):
        os.fork()
