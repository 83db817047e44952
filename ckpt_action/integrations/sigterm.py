"""The Trainer callback's SIGTERM: the handler only records it; a thread of its own flushes.

Why this shape. A Python signal handler runs on the main thread, between two bytecodes of
whatever that thread was doing: staging a save, inside the push queue's condition, writing
to stderr, holding any lock of the training's own. A handler that waits for the pushes may
wait for something the very thread it interrupted holds, and spend the whole grace in a
deadlock (it did: the queue's worker needed the staging lock of the ``on_save`` the signal
had interrupted, and the save being staged was never queued). So the handler takes no lock,
waits for nothing, starts nothing and prints nothing: it records the notice (the signal,
its time, the deadline) and sets an Event only the flush thread waits on (``Event.set``
takes that event's own lock, which no other code of the main thread ever holds), and
returns. The flush thread is started with the training (``Thread.start`` in a handler would
take the interpreter's thread table lock) and holds none of the main thread's locks.

The main thread goes on meanwhile: a save being written or staged when the signal landed
is finished and queued, and the queue pushes the newest first. At its next Trainer hook
(where it holds nothing of ours) the main thread parks until the flush is over, so the
training stops competing with the upload. The flush ends when nothing is staged, running
or waiting and no newer save is being written, or at the deadline (the upload process is
killed then: a push cut short commits nothing). It says what became of each checkpoint,
then sends SIGTERM again to the main thread, whose handler now does what SIGTERM did
before: the handler installed earlier, or the default (the process ends by the signal).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..progress import human
from ..watch import preempt
from .pushqueue import Outcome, PushQueue

POLL = 0.05
"""Seconds between two looks of the flush thread at the pushes (it waits on nothing it could miss)."""
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
RESTART = 5.0
"""Seconds a new upload process is taken to need before one started was measured."""


@dataclass
class _Fate:
    status: str  # waiting, pushing, durable, failed, superseded, yielded
    size: int = 0
    detail: str = ""


@dataclass
class _Running:
    step: int
    size: int
    started: float


class SigtermFlush:
    """The flush of one callback: ``queue()`` answers its push queue (or None);
    ``kill_upload()`` cuts the push in flight short and answers whether it could (a push
    on a thread of this process cannot be); ``hurry_upload()`` gives the upload process its
    CPU and I/O priority back (it runs at the lowest while training goes on)."""

    def __init__(self, grace: float, env_deadline: float | None, queue: Callable[[], PushQueue[Any] | None],
                 kill_upload: Callable[[], bool], hurry_upload: Callable[[], object] = lambda: None,
                 say: Callable[[str], None] | None = None) -> None:
        self.grace = grace
        self.env_deadline = env_deadline
        self._queue = queue
        self._kill_upload = kill_upload
        self._hurry_upload = hurry_upload
        self._say = say or (lambda line: print(f"ckpt-action: {line}", file=sys.stderr, flush=True))
        self.rate = preempt.Rate()
        self.restart = RESTART
        """Seconds the last upload process took to start: what a yield costs before the newest's push begins."""
        self.notice: preempt.Notice | None = None
        self.output_dir: Path | None = None
        self.floor = 0
        """Steps up to this one were there before the training began (a resumed checkpoint)."""
        self._lock = threading.Lock()  # guards _fates only; never taken by the handler
        self._fates: dict[int, _Fate] = {}
        self._running: _Running | None = None
        self._staging: int | None = None
        self._parked = False
        self._wake = threading.Event()
        self._done = threading.Event()
        self._flushed = False
        self._previous: Any = None
        self._installed = False
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- the main thread

    def install(self) -> bool:
        """Set the handler (main thread only) and start the flush thread; False where no
        handler can be set."""
        if self._installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        try:
            previous = signal.signal(signal.SIGTERM, self.handler)
        except (ValueError, OSError):  # pragma: no cover - an embedded interpreter without signals
            return False
        self._previous, self._installed = previous, True
        if self._thread is None:  # one per callback, idle between notices (a daemon: it never holds the exit)
            self._thread = threading.Thread(target=self._run, name="ckpt-action-sigterm-flush", daemon=True)
            self._thread.start()
        return True

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        with contextlib.suppress(ValueError, OSError, TypeError):
            if signal.getsignal(signal.SIGTERM) == self.handler:
                signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)

    def handler(self, signum: int, frame: Any) -> None:
        """Record and return: no lock, no wait, no print (see the module's docstring)."""
        if self._flushed:  # the flush thread sent it again: do what SIGTERM did before
            self._flushed = False
            self.notice = None
            self._chain(signum, frame)
            return
        if self.notice is not None:  # a second notice during the flush: the first deadline stands
            return
        self.notice = preempt.Notice.begin("SIGTERM", self.grace, "sigterm_grace", self.env_deadline)
        self._wake.set()

    def _chain(self, signum: int, frame: Any) -> None:
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # the default (or unknown: a handler set outside Python)
            self.uninstall()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def park(self) -> None:
        """At a Trainer hook, once a notice came: wait until the flush is over (the deadline
        bounds it), holding nothing the flush needs."""
        notice = self.notice
        if notice is None:
            return
        self._parked = True
        try:
            while self.notice is notice and not self._done.wait(0.5):
                pass
        finally:
            self._parked = False

    @contextlib.contextmanager
    def saving(self, step: int) -> Iterator[None]:
        """Around staging and queueing one save: the flush waits for it."""
        self._staging = step
        try:
            yield
        finally:
            self._staging = None

    def submitted(self, step: int, size: int) -> None:
        with self._lock:
            self._fates[step] = _Fate("waiting", size)

    # ---------------------------------------------------------------- the pushing thread

    def started(self, step: int, size: int) -> None:
        with self._lock:
            fate = self._fates.setdefault(step, _Fate("waiting", size))
            fate.status = "pushing"
        self._running = _Running(step, size, time.monotonic())

    def ended(self, outcome: Outcome[Any]) -> None:
        """The queue's outcome of one save (``item.step``)."""
        step = int(outcome.item.step)
        with self._lock:
            fate = self._fates.setdefault(step, _Fate("waiting"))
            if outcome.status == "pushed" and outcome.handle is not None:
                fate.status, fate.detail = "durable", outcome.handle.revision
            elif fate.status != "yielded":
                fate.status = outcome.status
                fate.detail = "" if outcome.error is None else str(outcome.error)
        running = self._running
        if running is not None and running.step == step:
            if outcome.status == "pushed":
                self.rate.add(running.size, time.monotonic() - running.started)
            self._running = None

    # ---------------------------------------------------------------- the flush thread

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            notice = self.notice
            if notice is None:
                continue
            self._done.clear()
            try:
                self._flush(notice)
            except Exception as exc:  # noqa: BLE001 - the process must still end as SIGTERM says
                self._say(f"SIGTERM: the flush failed: {type(exc).__name__}: {exc}")
            finally:
                self._flushed = True
                with contextlib.suppress(OSError, ValueError):
                    # To the main thread: its handler (the one Python runs) does the rest.
                    main = threading.main_thread().ident
                    if main is not None:
                        signal.pthread_kill(main, signal.SIGTERM)
                self._done.set()

    def _flush(self, notice: preempt.Notice) -> None:
        self._say(notice.announce())
        with self._lock:
            durable = [s for s, f in self._fates.items() if f.status == "durable"]
        since = max(durable, default=-1)
        yielded: set[int] = set()
        settled = False
        while True:
            queue = self._queue()
            if queue is not None:
                queue.hurry()  # newest first, and a save made now is queued without waiting
            self._hurry_upload()  # the upload process back at the default priority (once per process)
            if self._settled(queue):
                settled = True
                break
            if notice.left() <= 0:
                break
            self._maybe_yield(notice, yielded)
            time.sleep(POLL)
        if not settled and self._running is not None and not self._kill_upload():
            self._say("the push in flight runs on a thread of this process and cannot be cut short: it ends"
                      " with the process")
        self._report(since, settled)

    def _settled(self, queue: PushQueue[Any] | None) -> bool:
        """Nothing staged, running or waiting, and no newer save being written (or the main
        thread is parked, so none will be).

        Read in the reverse order of the main thread's writes (it sets ``_staging``, submits
        to the queue, records the save in ``_fates``, then clears ``_staging``): a save seen
        in ``_fates`` is then already in the queue, and one not yet there still shows as a
        newer ``checkpoint-N`` dir. Read the other way round, a save staged and queued between
        two of these looks was taken for one already pushed, and the flush ended without it."""
        if not self._parked and self._saves_in_progress():
            return False
        if self._staging is not None:
            return False
        return queue is None or queue.idle

    def _saves_in_progress(self) -> list[int]:
        """Steps of ``checkpoint-N`` dirs newer than anything queued: a save Trainer is still
        writing (its ``on_save`` comes once it is written)."""
        if self.output_dir is None:
            return []
        with self._lock:
            known = set(self._fates)
        try:
            names = [e.name for e in os.scandir(self.output_dir) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
        newest = max([self.floor, *known], default=self.floor)
        return sorted(int(m.group(1)) for n in names if (m := _CHECKPOINT.fullmatch(n)) and int(m.group(1)) > newest)

    def _maybe_yield(self, notice: preempt.Notice, yielded: set[int]) -> None:
        """An older checkpoint's push in flight yields to the newest waiting save when the two
        cannot both land before the deadline at the measured rate, and the newest alone can."""
        running = self._running
        if running is None or running.step in yielded:
            return
        with self._lock:
            newer = [(s, f.size) for s, f in self._fates.items() if f.status == "waiting" and s > running.step]
        if not newer:
            return
        step, size = max(newer)
        rate = self.rate.per_second()
        left = notice.left()
        if not preempt.should_yield(running.size, time.monotonic() - running.started, size, rate, left,
                                    self.restart):
            return
        yielded.add(running.step)
        assert rate is not None
        why = (f"its push yielded to checkpoint-{step}: both could not land in the {left:.1f} s left at the measured"
               f" {human(int(rate))}/s")
        with self._lock:
            fate = self._fates.get(running.step)
            if fate is not None and fate.status == "pushing":
                fate.status, fate.detail = "yielded", why
        if self._kill_upload():
            self._say(f"checkpoint-{running.step}: {why}")
        else:
            with self._lock:
                if fate is not None and fate.status == "yielded":
                    fate.status, fate.detail = "pushing", ""

    def _report(self, since: int, settled: bool) -> None:
        """One line per checkpoint from the newest durable at the signal on, before the exit."""
        with self._lock:
            fates = {s: _Fate(f.status, f.size, f.detail) for s, f in self._fates.items() if s >= since}
        writing = [] if settled else self._saves_in_progress()
        lines, durable = [], True
        for step in sorted(fates):
            fate, name = fates[step], f"checkpoint-{step}"
            if fate.status == "durable":
                lines.append(preempt.durable(name, fate.detail))
                continue
            durable = False
            why = {"waiting": "its push had not begun at the deadline",
                   "pushing": "its push was cut short at the deadline (a push cut short commits nothing; pushing it"
                              " again sends only what had not reached the Hub)",
                   "failed": f"its push failed: {fate.detail}",
                   "superseded": "a newer save replaced it before its push began",
                   }.get(fate.status, fate.detail)
            lines.append(preempt.not_durable(name, why))
        for step in writing:
            durable = False
            lines.append(preempt.not_durable(f"checkpoint-{step}", "its save was still being written at the"
                                             " deadline"))
        for line in lines:
            self._say(line)
        notice = self.notice
        if notice is not None:
            self._say(f"SIGTERM: the flush ended {time.monotonic() - notice.at:.1f} s after the signal")
        if not lines:
            self._say("SIGTERM: no checkpoint was saved yet: nothing to push")
        elif durable:
            self._say("SIGTERM: every saved checkpoint is pushed")
