"""The integration layer's rule, held: the CLI runs in this process (the ``cli`` fixture)
against local Hubs in this process (``hub_server``, ``local_hub``, ``xet_hub``), as
CONTRIBUTING.md says. A test that starts the CLI or a local Hub as a child process fails
here unless it says why the process itself is the point::

    @pytest.mark.process("reads the child's peak memory")

(the allow-list; whole-process tests otherwise live in ``tests/e2e/``). Other children (the
real ``hf`` CLI, ``model_signing``, a script of the test's own) are not concerned."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

_OURS = ("ckpt_action", "ckpt_localhub", "ckpt_action.__main__", "ckpt_action.cli.app")


def ours(argv: Any) -> bool:
    """Whether a child's command line runs the CLI or a local Hub (directly, by ``-m``, by
    the console script, or through a wrapper naming the entry point)."""
    if isinstance(argv, (str, bytes)):  # a shell line (shell=True) or one program
        argv = shlex.split(argv.decode() if isinstance(argv, bytes) else argv)
    args = [os.fspath(a) for a in ([argv] if isinstance(argv, os.PathLike) else argv)]
    args = [a.decode() if isinstance(a, bytes) else a for a in args]
    return any("entrypoint.py" in a or os.path.basename(a) == "ckpt-action" or a in _OURS
               or "-m ckpt_action" in a for a in args)


@pytest.fixture(autouse=True)
def _integration_layer_rule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    marker = request.node.get_closest_marker("process")
    if marker is not None:
        assert marker.args and str(marker.args[0]).strip(), "@pytest.mark.process needs a reason"
        yield
        return
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if ours(args):
            raise AssertionError(
                "an integration test runs the CLI and the local Hub in this process (the cli and hub_server "
                "fixtures); if the process itself is the point, mark the test "
                "@pytest.mark.process('why') or move it to tests/e2e/")
        original(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
    yield
