"""The callback's push queue: order, one waiting push replaced by a newer one, failures reported.

A fake push that blocks until the test releases it makes every interleaving deterministic;
no test here depends on timing (every wait has a deadline and a reason to end).
"""

from __future__ import annotations

import threading

import pytest

from ckpt_action.handle import CheckpointHandle
from ckpt_action.integrations.pushqueue import PushFailedError, PushQueue

DEADLINE = 30.0


class FakePush:
    """push(n) blocks until release(n); records the order pushes start in."""

    def __init__(self, fail: set[int] | None = None) -> None:
        self.started: list[int] = []
        self.discarded: list[int] = []
        self.fail = fail or set()
        self._go: dict[int, threading.Event] = {}
        self._began: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def _event(self, table: dict[int, threading.Event], n: int) -> threading.Event:
        with self._lock:
            return table.setdefault(n, threading.Event())

    def __call__(self, n: int) -> CheckpointHandle:
        self.started.append(n)
        self._event(self._began, n).set()
        assert self._event(self._go, n).wait(DEADLINE), f"push {n} was never released"
        if n in self.fail:
            raise RuntimeError(f"push {n} failed")
        return CheckpointHandle("org/run", f"checkpoint-{n}", f"{n:040x}", n)

    def release(self, n: int) -> None:
        self._event(self._go, n).set()

    def wait_started(self, n: int) -> None:
        assert self._event(self._began, n).wait(DEADLINE), f"push {n} never started"

    def discard(self, n: int) -> None:
        self.discarded.append(n)


def test_pushes_run_in_order_and_a_newer_save_replaces_the_waiting_one() -> None:
    fake = FakePush()
    q: PushQueue[int] = PushQueue(fake, discard=fake.discard)
    q.submit(1)
    fake.wait_started(1)  # 1 runs
    q.submit(2)  # waits
    q.submit(3)  # replaces 2
    q.submit(4)  # replaces 3
    assert q.wait(timeout=0.05) is False  # 1 is still held, 4 waits
    for n in (1, 2, 3, 4):
        fake.release(n)
    assert q.wait(timeout=DEADLINE)
    assert fake.started == [1, 4]
    assert [(o.item, o.status) for o in q.drain()] == [(2, "superseded"), (3, "superseded"), (1, "pushed"),
                                                       (4, "pushed")]
    assert sorted(fake.discarded) == [1, 2, 3, 4]  # every staging copy removed exactly once
    assert q.drain() == []
    assert q.close(timeout=DEADLINE)


def test_a_failed_push_is_reported_and_later_ones_still_run() -> None:
    fake = FakePush(fail={1})
    q: PushQueue[int] = PushQueue(fake, discard=fake.discard)
    q.submit(1)
    fake.wait_started(1)
    q.submit(2)
    fake.release(1)
    fake.release(2)
    assert q.close(timeout=DEADLINE)
    outcomes = q.drain()
    assert [(o.item, o.status) for o in outcomes] == [(1, "failed"), (2, "pushed")]
    assert isinstance(outcomes[0].error, RuntimeError) and outcomes[0].handle is None
    assert outcomes[1].handle is not None and outcomes[1].handle.subfolder == "checkpoint-2"
    assert sorted(fake.discarded) == [1, 2]


def test_close_lets_the_queued_pushes_finish_then_refuses_more() -> None:
    fake = FakePush()
    q: PushQueue[int] = PushQueue(fake)
    q.submit(1)
    fake.wait_started(1)
    q.submit(2)
    closer = threading.Thread(target=q.close, args=(DEADLINE,))
    closer.start()
    fake.release(1)
    fake.release(2)
    closer.join(DEADLINE)
    assert not closer.is_alive()
    assert fake.started == [1, 2] and q.idle
    with pytest.raises(RuntimeError, match="closed"):
        q.submit(3)


def test_push_failed_error_names_the_first_failure_and_the_count() -> None:
    err = PushFailedError.of([("checkpoint-2", RuntimeError("boom")), ("checkpoint-4", RuntimeError("again"))])
    assert str(err) == "pushing checkpoint-2 failed (2 pushes failed): boom"
    assert err.exit_code == 1 and len(err.failures) == 2


def test_keep_every_pushes_each_item_in_order_and_submit_waits_at_the_bound() -> None:
    fake = FakePush()
    q: PushQueue[int] = PushQueue(fake, discard=fake.discard, keep="every", max_waiting=2)
    q.submit(1)
    fake.wait_started(1)  # 1 runs
    q.submit(2)
    q.submit(3)  # two wait: the bound
    blocked = threading.Thread(target=q.submit, args=(4,))
    blocked.start()
    blocked.join(0.05)
    assert blocked.is_alive(), "a third waiting item blocks the caller (training waits)"
    fake.release(1)  # 1 ends, 2 starts: a slot frees
    fake.wait_started(2)
    blocked.join(DEADLINE)
    assert not blocked.is_alive()
    for n in (2, 3, 4):
        fake.release(n)
    assert q.close(timeout=DEADLINE)
    assert fake.started == [1, 2, 3, 4]
    assert [(o.item, o.status) for o in q.drain()] == [(n, "pushed") for n in (1, 2, 3, 4)]
    assert sorted(fake.discarded) == [1, 2, 3, 4]


@pytest.mark.parametrize("kwargs", [{"keep": "all"}, {"keep": "every", "max_waiting": 0},
                                    {"keep": "every", "max_waiting": True}])
def test_a_bad_policy_is_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        PushQueue(FakePush(), **kwargs)


def test_once_hurried_the_newest_waiting_is_pushed_next_and_submit_never_blocks() -> None:
    """A preemption notice: the deadline is for the newest save, and training handing over a
    save is never made to wait for a slot."""
    fake = FakePush()
    seen: list[tuple[int, str]] = []
    q: PushQueue[int] = PushQueue(fake, discard=fake.discard, keep="every", max_waiting=1,
                                  on_outcome=lambda o: seen.append((o.item, o.status)))
    q.submit(1)
    fake.wait_started(1)
    q.submit(2)  # the one slot
    q.hurry()
    done = threading.Event()
    threading.Thread(target=lambda: (q.submit(3), done.set()), daemon=True).start()
    assert done.wait(DEADLINE), "submit blocked after hurry()"
    fake.release(1)
    fake.wait_started(3)  # the newest first
    fake.release(3)
    fake.wait_started(2)
    fake.release(2)
    assert q.wait(timeout=DEADLINE)
    assert fake.started == [1, 3, 2]
    assert seen == [(1, "pushed"), (3, "pushed"), (2, "pushed")]
    q.close()
