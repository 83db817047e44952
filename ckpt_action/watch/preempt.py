"""A preemption notice: its deadline, what is left of it, and what each checkpoint became.

Shared by ``ckpt-action watch`` and the Trainer callback, so both say the same thing in the
same words: when the signal came and how many seconds are left (``SIGTERM: 118.0 s left
until the deadline (CKPT_PREEMPT_DEADLINE)``), then one line per checkpoint before the
process exits (``checkpoint-16 durable at <sha>`` / ``checkpoint-8 not durable: <why>``).

The deadline is the grace period (``watch --grace``, ``sigterm_grace=``) counted from the
signal, unless the environment names one: ``CKPT_PREEMPT_DEADLINE`` is seconds after the
signal (a value below 1e9: Slurm's ``--signal=B:TERM@120`` is ``120``) or an epoch time
(``$SLURM_JOB_END_TIME``, a spot notice's termination time), and then replaces the grace.

Nothing here takes a lock or waits: :meth:`Notice.begin` may run inside a signal handler.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InputError

ENV = "CKPT_PREEMPT_DEADLINE"
EPOCH_FROM = 1e9
"""A value of :data:`ENV` at least this big is an epoch time (2001-09-09 on), below it seconds."""


def deadline_from_env(env: Mapping[str, str] | None = None) -> float | None:
    """:data:`ENV` as given (seconds, or an epoch time), None when unset, empty or 0; garbage is
    an :class:`InputError` of one line naming the variable, raised before anything starts.

    >>> deadline_from_env({"CKPT_PREEMPT_DEADLINE": "120"})
    120.0
    >>> deadline_from_env({}) is None
    True
    """
    text = (os.environ if env is None else env).get(ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if value == 0:  # as unset: the grace
        return None
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{ENV}={text[:40]!r} is not a deadline: give seconds after the signal (e.g. 120) or an"
                         " epoch time (e.g. $SLURM_JOB_END_TIME), or unset it")
    return value


@dataclass
class Notice:
    """One stop: the signal's name, when it came and when the deadline falls (monotonic
    seconds), and what set the deadline (``--grace``, ``sigterm_grace``, or :data:`ENV`)."""

    signal: str
    at: float
    deadline: float
    source: str

    @classmethod
    def begin(cls, signal: str, grace: float, grace_name: str, env_deadline: float | None,
              *, now: float | None = None, wall: float | None = None) -> Notice:
        """The notice of a signal received now. No lock, no I/O: safe in a signal handler.

        >>> Notice.begin("SIGTERM", 25, "--grace", None, now=100.0).deadline
        125.0
        >>> Notice.begin("SIGTERM", 25, "--grace", 1_700_000_000.5, now=100.0, wall=1_700_000_000.0).deadline
        100.5
        """
        now = time.monotonic() if now is None else now
        if env_deadline is None:
            return cls(signal, now, now + grace, grace_name)
        if env_deadline < EPOCH_FROM:
            return cls(signal, now, now + env_deadline, ENV)
        wall = time.time() if wall is None else wall
        return cls(signal, now, now + max(0.0, env_deadline - wall), ENV)

    def left(self, now: float | None = None) -> float:
        """Seconds until the deadline (0 once it passed)."""
        return max(0.0, self.deadline - (time.monotonic() if now is None else now))

    def announce(self, now: float | None = None) -> str:
        """The first line said once the signal is noticed."""
        return (f"{self.signal}: {self.left(now):.1f} s left until the deadline ({self.source}): pushing the newest"
                " complete checkpoint first")


def durable(name: str, revision: str) -> str:
    """The line for a checkpoint that landed, at its pin.

    >>> durable("checkpoint-16", "ab" * 20)
    'checkpoint-16 durable at abababababababababababababababababababab'
    """
    return f"{name} durable at {revision}"


def not_durable(name: str, why: str) -> str:
    return f"{name} not durable: {why}"


RATE_MIN_BYTES = 64 * 1024 * 1024
"""A push smaller than this says nothing of the link's rate: its time is the fixed cost of a
push (requests, a commit, a CPU share at the idle priority), so it is not counted. Measured
with ckpt-chaos: pushes of 91 KiB taking 17 s on a loaded machine made a "5 KiB/s" rate, and
an older push that would have landed was cut short for a newer one that then did not."""


class Rate:
    """The upload rate measured over the pushes that ended (those of at least
    :data:`RATE_MIN_BYTES`): bytes per second, None before one."""

    def __init__(self) -> None:
        self.bytes = 0
        self.seconds = 0.0

    def add(self, size: int, seconds: float) -> None:
        if size >= RATE_MIN_BYTES and seconds > 0:
            self.bytes += size
            self.seconds += seconds

    def per_second(self) -> float | None:
        return self.bytes / self.seconds if self.seconds > 0 and self.bytes > 0 else None


def should_yield(running_size: int, running_for: float, newest_size: int, rate: float | None, left: float,
                 restart: float = 0.0) -> bool:
    """Whether an older checkpoint's push still running should be cut short for the newest:
    at the measured ``rate`` the two do not both fit in the ``left`` seconds, and the newest
    alone does, counting ``restart`` seconds to start a new upload process (else cutting the
    older would lose both). Without a rate, never.

    >>> should_yield(100, 0.0, 100, 10.0, 15.0)  # 20 s for both, 10 s for the newest alone
    True
    >>> should_yield(100, 0.0, 100, 10.0, 25.0)  # both fit
    False
    >>> should_yield(100, 0.0, 300, 10.0, 15.0)  # the newest alone does not fit either
    False
    >>> should_yield(100, 0.0, 100, 10.0, 15.0, restart=6.0)  # nor once a new process is started
    False
    """
    if rate is None or rate <= 0:
        return False
    running_left = max(0.0, running_size - rate * running_for)
    newest_alone = restart + newest_size / rate
    return (running_left + newest_size) / rate > left and newest_alone <= left
