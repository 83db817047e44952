"""Whole processes: here ``cli`` runs the CLI as a child process and ``hub_server`` starts
the local Hub as one (``python -m ckpt_localhub``), as a user and a CI job run them."""

import pytest


@pytest.fixture
def cli(cli_process):
    return cli_process


@pytest.fixture
def hub_server(hub_process):
    return hub_process
