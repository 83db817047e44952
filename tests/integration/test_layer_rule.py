"""The integration layer's rule is held (tests/integration/conftest.py): the CLI and the
local Hub run in this process unless a test says why it needs them as children."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ENTRYPOINT
from tests.integration.conftest import ours

RUNS = {
    "entrypoint": [sys.executable, str(ENTRYPOINT), "--help"],
    "module": [sys.executable, "-m", "ckpt_action", "--help"],
    "local-hub": [sys.executable, "-m", "ckpt_localhub", "--help"],
}


@pytest.mark.parametrize("argv", RUNS.values(), ids=RUNS.keys())
def test_an_unmarked_test_cannot_start_the_cli_or_a_hub_as_a_child(argv):
    with pytest.raises(AssertionError, match=r"mark the test @pytest.mark.process\('why'\)"):
        subprocess.run(argv, capture_output=True, check=False)


@pytest.mark.process("holds the allow-list: a marked test may start the CLI as a child")
def test_a_marked_test_may():
    assert subprocess.run(RUNS["entrypoint"], capture_output=True, check=False).returncode == 0


def test_other_children_are_not_concerned():
    assert not ours(["hf", "upload", "o/r", "."]) and not ours([sys.executable, "-m", "model_signing", "verify"])
    assert ours("ckpt-action push --repo o/r")  # a shell line (shell=True)
    assert ours(["/venv/bin/ckpt-action", "push"]) and ours([sys.executable, "-c", f"run({str(ENTRYPOINT)!r})"])
