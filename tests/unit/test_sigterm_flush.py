"""The Trainer callback's flush after SIGTERM, without a Trainer: an older push in flight
yields to the newest save when both cannot land in what is left at the measured rate, and
the report says, per checkpoint, durable at which pin or why not."""

from __future__ import annotations

import time

from ckpt_action.handle import CheckpointHandle
from ckpt_action.integrations.pushqueue import Outcome
from ckpt_action.integrations.sigterm import SigtermFlush
from ckpt_action.watch import preempt


class Job:
    def __init__(self, step: int) -> None:
        self.step = step


MB = 1024 * 1024


def _flush(kills: list[int]) -> tuple[SigtermFlush, list[str]]:
    said: list[str] = []
    flush = SigtermFlush(25.0, None, lambda: None, lambda: kills.append(1) or True, say=said.append)
    flush.restart = 1.0
    return flush, said


def test_an_older_push_yields_to_the_newest_when_both_cannot_land_by_the_deadline() -> None:
    kills: list[int] = []
    flush, said = _flush(kills)
    flush.rate.add(1000 * MB, 100.0)  # 10 MiB a second, measured
    flush.submitted(2, 100 * MB)
    flush.started(2, 100 * MB)  # 10 s left of it
    flush.submitted(4, 100 * MB)  # 10 s alone
    notice = preempt.Notice.begin("SIGTERM", 15.0, "sigterm_grace", None)
    flush._maybe_yield(notice, set())
    assert kills == [1]
    flush.ended(Outcome(Job(2), "failed", error=RuntimeError("the upload process ended")))
    flush.started(4, 100 * MB)
    flush.ended(Outcome(Job(4), "pushed", handle=CheckpointHandle("org/run", "checkpoint-4", "b" * 40, 4)))
    flush._report(-1, settled=True)
    assert said[-2].startswith("checkpoint-2 not durable: its push yielded to checkpoint-4: both could not land")
    assert said[-1] == f"checkpoint-4 durable at {'b' * 40}"


def test_no_yield_when_both_fit_or_the_newest_alone_would_not() -> None:
    kills: list[int] = []
    flush, _ = _flush(kills)
    flush.rate.add(1000 * MB, 100.0)
    flush.submitted(2, 100 * MB)
    flush.started(2, 100 * MB)
    flush.submitted(4, 100 * MB)
    flush._maybe_yield(preempt.Notice.begin("SIGTERM", 60.0, "sigterm_grace", None), set())  # both fit
    flush._maybe_yield(preempt.Notice.begin("SIGTERM", 5.0, "sigterm_grace", None), set())  # neither would
    assert kills == []


def test_no_yield_on_a_rate_measured_over_pushes_too_small_to_say_it() -> None:
    """Small pushes take their fixed cost, not their size over the link's rate (ckpt-chaos on a
    loaded machine: 91 KiB in 17 s); such a "rate" must not cut a push short."""
    kills: list[int] = []
    flush, _ = _flush(kills)
    flush.rate.add(91 * 1024, 17.0)
    flush.submitted(2, 91 * 1024)
    flush.started(2, 91 * 1024)
    flush.submitted(4, 91 * 1024)
    flush._maybe_yield(preempt.Notice.begin("SIGTERM", 25.0, "sigterm_grace", None), set())
    assert kills == []


def test_the_handler_only_records_and_wakes_the_flush_thread() -> None:
    """No lock, no wait: a second notice during a flush keeps the first deadline."""
    flush, _ = _flush([])
    flush.handler(15, None)
    first = flush.notice
    assert first is not None and flush._wake.is_set()
    time.sleep(0.01)
    flush.handler(15, None)
    assert flush.notice is first


class _QueueSeenIdleJustBeforeASubmit:
    """A push queue read as idle a moment before the main thread hands it a save: that very
    moment, the main thread stages ``checkpoint-2``, queues it, records it and unstages."""

    def __init__(self, flush: SigtermFlush) -> None:
        self.flush, self.items = flush, 0

    @property
    def idle(self) -> bool:
        was_idle = self.items == 0
        if was_idle:
            with self.flush.saving(2):
                self.items += 1  # submitted: the push of checkpoint-2 waits
                self.flush.submitted(2, 1024)
        return was_idle


def test_a_save_staged_and_queued_while_the_flush_looks_is_never_taken_for_pushed(tmp_path) -> None:
    """The signal came in ``on_save`` before the callback's turn: ``checkpoint-2`` is on disk
    and not yet queued. Whatever the interleaving of the flush's looks with the main thread's
    staging, the flush is not settled while checkpoint-2 is queued and not pushed."""
    (tmp_path / "checkpoint-2").mkdir()
    flush, _ = _flush([])
    flush.output_dir = tmp_path
    queue = _QueueSeenIdleJustBeforeASubmit(flush)
    looks = [flush._settled(queue) for _ in range(2)]  # type: ignore[arg-type]
    assert looks == [False, False]
