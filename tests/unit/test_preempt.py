"""The preemption notice shared by watch and the Trainer callback: the deadline from the
environment (seconds, or an epoch time; garbage refused naming the variable), what is left
of it, and when an older push yields to the newest."""

from __future__ import annotations

import pytest

from ckpt_action.errors import InputError
from ckpt_action.watch import preempt


@pytest.mark.parametrize(("value", "expected"), [("120", 120.0), (" 30 ", 30.0), ("1767225600", 1767225600.0),
                                                 ("", None), ("0", None)])
def test_the_deadline_is_seconds_or_an_epoch_time(value, expected):
    assert preempt.deadline_from_env({"CKPT_PREEMPT_DEADLINE": value}) == expected


@pytest.mark.parametrize("value", ["soon", "-5", "nan", "inf", "12s"])
def test_a_garbage_deadline_is_one_line_naming_the_variable(value):
    with pytest.raises(InputError) as caught:
        preempt.deadline_from_env({"CKPT_PREEMPT_DEADLINE": value})
    message = str(caught.value)
    assert message.startswith("CKPT_PREEMPT_DEADLINE=") and "\n" not in message


def test_below_1e9_it_counts_from_the_signal_above_it_is_the_wall_clock():
    after = preempt.Notice.begin("SIGTERM", 25, "sigterm_grace", 120.0, now=1000.0, wall=1_700_000_000.0)
    assert after.deadline == 1120.0 and after.source == "CKPT_PREEMPT_DEADLINE"
    epoch = preempt.Notice.begin("SIGTERM", 25, "sigterm_grace", 1_700_000_090.0, now=1000.0, wall=1_700_000_000.0)
    assert epoch.deadline == 1090.0
    past = preempt.Notice.begin("SIGTERM", 25, "sigterm_grace", 1_600_000_000.0, now=1000.0, wall=1_700_000_000.0)
    assert past.left(1000.0) == 0.0
    grace = preempt.Notice.begin("SIGTERM", 25, "sigterm_grace", None, now=1000.0)
    assert grace.deadline == 1025.0
    assert grace.announce(1005.0) == ("SIGTERM: 20.0 s left until the deadline (sigterm_grace): pushing the newest"
                                      " complete checkpoint first")


def test_an_older_push_yields_only_when_both_cannot_fit_and_the_newest_alone_can():
    rate = 10.0  # bytes a second
    assert preempt.should_yield(100, 0.0, 100, rate, 15.0)
    assert not preempt.should_yield(100, 9.0, 100, rate, 15.0)  # the older is nearly done: both fit
    assert not preempt.should_yield(100, 0.0, 200, rate, 15.0)  # the newest alone does not fit
    assert not preempt.should_yield(100, 0.0, 100, None, 15.0)  # no measured rate: never
    r = preempt.Rate()
    assert r.per_second() is None
    r.add(91 * 1024, 17.0)  # a small push: its fixed cost, not the link's rate
    assert r.per_second() is None
    mb = 1024 * 1024
    r.add(100 * mb, 2.0)
    r.add(300 * mb, 2.0)
    assert r.per_second() == 100.0 * mb
