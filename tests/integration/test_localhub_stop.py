"""How a local Hub stops: its listeners side by side, none outliving it."""

from __future__ import annotations

import threading

from ckpt_localhub import LocalHub
from ckpt_localhub.httpserver import Listener


def test_a_hub_stops_its_listeners_side_by_side(tmp_path, monkeypatch):
    """Each listener's stop waits for its accept loop: one after another they add up. Every
    stop here waits at a barrier for the others, which only stops begun together pass."""
    hub = LocalHub(tmp_path / "hub")
    assert len(hub._listeners) == 3
    barrier = threading.Barrier(len(hub._listeners), timeout=30)
    original = Listener.stop

    def stop(self: Listener) -> None:
        barrier.wait()
        original(self)

    monkeypatch.setattr(Listener, "stop", stop)
    hub.stop()
    monkeypatch.undo()
    assert not barrier.broken
    assert all(listener._thread is not None and not listener._thread.is_alive() for listener in hub._listeners)
