"""Whole processes: here ``cli`` runs the CLI as a child process, as a user does."""

import pytest


@pytest.fixture
def cli(cli_process):
    return cli_process
