"""A bounded push queue: uploads run on a background thread, in order.

Training saves faster than a slow link uploads. Queueing every save without a bound
would grow without end; dropping saves while one uploads would lose the newest. Two
policies, both bounded:

- ``keep="newest"`` (the default): one push runs, one waits, and a newer save replaces
  the waiting one (the replaced item is reported ``superseded``);
- ``keep="every"``: every item is pushed, in order; at most ``max_waiting`` wait behind
  the running push, and :meth:`PushQueue.submit` blocks (training waits) until one
  starts when that many already wait.

Once :meth:`PushQueue.hurry` is called (a preemption notice), the newest waiting item is
pushed next, and ``submit`` no longer blocks: the deadline is for the newest save.

The queue knows nothing of transformers; the Trainer callback is one user of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from ..errors import CkptError
from ..handle import CheckpointHandle

T = TypeVar("T")
Status = Literal["pushed", "failed", "superseded"]
Keep = Literal["newest", "every"]


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What became of one submitted item."""

    item: T
    status: Status
    handle: CheckpointHandle | None = None
    error: Exception | None = None


class PushQueue(Generic[T]):
    """Run ``push(item)`` for submitted items on one background thread.

    ``discard(item)`` runs once for every item when the queue is done with it (pushed,
    failed or superseded), e.g. to remove a staging copy; it must not need a lock the
    owner's thread may hold (a signal handler may wait for this queue). Outcomes are
    collected until :meth:`drain` hands them to the owner's thread; ``on_outcome(outcome)``
    also sees each one as it happens, on the thread it happens on.

    >>> q = PushQueue(lambda n: CheckpointHandle("org/run", f"checkpoint-{n}", "a" * 40, n))
    >>> q.submit(1)
    >>> q.wait(timeout=30)
    True
    >>> [(o.item, o.status) for o in q.drain()]
    [(1, 'pushed')]
    >>> q.close()
    True
    """

    def __init__(self, push: Callable[[T], CheckpointHandle], *, discard: Callable[[T], None] | None = None,
                 name: str = "ckpt-action-push", keep: Keep = "newest", max_waiting: int = 1,
                 on_outcome: Callable[[Outcome[T]], None] | None = None) -> None:
        if keep not in ("newest", "every"):
            raise ValueError(f"keep must be 'newest' or 'every', not {keep!r}")
        if isinstance(max_waiting, bool) or not isinstance(max_waiting, int) or max_waiting < 1:
            raise ValueError(f"max_waiting must be a whole number >= 1, not {max_waiting!r}")
        self.keep: Keep = keep
        self.max_waiting = 1 if keep == "newest" else max_waiting
        self._push = push
        self._discard = discard or (lambda item: None)
        self._on_outcome = on_outcome or (lambda outcome: None)
        self._hurry = False
        self._name = name
        self._cond = threading.Condition()
        self._waiting: list[T] = []  # at most max_waiting, oldest first
        self._running = False
        self._closed = False
        self._outcomes: list[Outcome[T]] = []
        self._thread: threading.Thread | None = None

    def submit(self, item: T) -> None:
        """Queue ``item`` behind the running push: with ``keep="newest"`` it replaces an item
        still waiting there; with ``keep="every"`` it waits its turn, and this call blocks
        while ``max_waiting`` items already wait."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the push queue is closed")
            if self.keep == "every":
                # Bounded by the worker: it takes an item whenever one push ends (or fails).
                self._cond.wait_for(lambda: len(self._waiting) < self.max_waiting or self._closed or self._hurry)
                if self._closed:
                    raise RuntimeError("the push queue is closed")
                replaced: list[T] = []
                self._waiting.append(item)
            else:
                replaced = self._waiting[:]
                self._waiting[:] = [item]
            self._outcomes += [Outcome(old, "superseded") for old in replaced]
            if self._thread is None:
                # A daemon: a training process that dies must not hang on its uploads. A
                # push cut short leaves the Hub as it was (its manifest comes last).
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        for old in replaced:
            self._on_outcome(Outcome(old, "superseded"))
            self._discard(old)

    def hurry(self) -> None:
        """A deadline is coming: push the newest waiting item next, and let ``submit`` queue
        without waiting for a slot (the bound is for a training that goes on)."""
        with self._cond:
            self._hurry = True
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._waiting) or self._closed)
                if not self._waiting:
                    return
                item = self._waiting.pop() if self._hurry else self._waiting.pop(0)
                self._running = True
                self._cond.notify_all()  # a slot is free: a blocked submit may go on
            outcome: Outcome[T] = Outcome(item, "failed", error=RuntimeError("the push stopped unexpectedly"))
            try:
                outcome = Outcome(item, "pushed", handle=self._push(item))
            except Exception as exc:  # noqa: BLE001 - any failure is the owner's to report
                outcome = Outcome(item, "failed", error=exc)
            finally:
                try:
                    try:
                        self._on_outcome(outcome)
                    finally:
                        self._discard(item)
                finally:
                    with self._cond:
                        self._running = False
                        self._outcomes.append(outcome)
                        self._cond.notify_all()

    @property
    def idle(self) -> bool:
        """Nothing runs and nothing waits."""
        with self._cond:
            return not self._running and not self._waiting

    def wait(self, timeout: float | None = None) -> bool:
        """Block until nothing runs or waits; False if ``timeout`` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running and not self._waiting, timeout)

    def drain(self) -> list[Outcome[T]]:
        """The outcomes since the last drain, in the order they happened."""
        with self._cond:
            out, self._outcomes = self._outcomes, []
        return out

    def close(self, timeout: float | None = None) -> bool:
        """Let the queued pushes finish, then stop the thread; False if ``timeout`` passed first."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True


class PushFailedError(CkptError):
    """One or more background pushes failed; ``failures`` holds each item with its error. Exit code 1."""

    def __init__(self, message: str, failures: list[tuple[str, Exception]]) -> None:
        super().__init__(message)
        self.failures = failures

    @classmethod
    def of(cls, failures: list[tuple[str, Exception]]) -> PushFailedError:
        """One line naming how many failed and the first failure (``failures`` is (name, error))."""
        name, first = failures[0]
        more = f" ({len(failures)} pushes failed)" if len(failures) > 1 else ""
        return cls(f"pushing {name} failed{more}: {first}", failures)
