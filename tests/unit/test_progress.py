"""Progress lines go to the stderr of the moment they are written."""

from __future__ import annotations

import io
import sys

from ckpt_action.progress import Ticker


def test_lines_go_to_the_stderr_in_place_when_the_transfer_runs(monkeypatch):
    """Not the stderr of when the module was imported: a command run with its streams
    redirected (the CLI run in-process, a caller capturing them) gets its lines."""
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    with Ticker("push x", 3, lambda: 3, interval=5):
        pass
    assert now.getvalue() == "push x: done, 3 B in 0.0 s\n"
