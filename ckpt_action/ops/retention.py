"""What prune keeps by rule, and what ``--best`` chooses: pure functions over the listed
checkpoints (no request; :func:`~ckpt_action.ops.prune.plan_prune` reads the Hub and adds
what it protects besides: the latest complete checkpoint, promoted sources, tagged ones).

The rules combine as a union: a folder is kept when any rule keeps it, with every reason.
Only complete checkpoints are candidates: one the verdict fails (``Candidate.incomplete``)
is never kept as the last, an N-th or the best, so it never costs a complete one its place
(what prune does with it is :func:`~ckpt_action.ops.prune.plan_prune`'s).
A checkpoint without the metric (or whose manifest's metrics are malformed) is never
chosen by it, so it is never kept by ``keep_best`` alone, and never deleted by it either:
``keep_best`` only adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ckpt_action.checkpoint.metrics import Objective


@dataclass(frozen=True)
class Candidate:
    """A ``checkpoint-N`` folder as the rules see it."""

    name: str
    step: int
    metrics: dict[str, float] | None = None
    metrics_problem: str | None = None
    """Why its manifest's metrics are unusable (then ``metrics`` is None)."""
    unreadable: str | None = None
    """Why its manifest cannot be read at all (prune keeps such a folder, saying why)."""
    incomplete: str | None = None
    """Why the one verdict (:mod:`ckpt_action.checkpoint.verdict`) finds it no complete
    checkpoint: then no rule keeps it, and it takes no complete one's place."""


def ranked(candidates: Sequence[Candidate], objective: Objective) -> list[tuple[Candidate, float]]:
    """The candidates that have ``objective.metric``, best first (ties: the newest step first),
    with their value.

    >>> c = [Candidate("checkpoint-1", 1, {"loss": 2.0}), Candidate("checkpoint-2", 2, None)]
    >>> [(x.name, v) for x, v in ranked(c, Objective("loss", "min"))]
    [('checkpoint-1', 2.0)]
    """
    have = [(c, c.metrics[objective.metric]) for c in candidates if c.incomplete is None
            and c.metrics is not None and c.metrics_problem is None and objective.metric in c.metrics]
    sign = 1.0 if objective.mode == "min" else -1.0
    return sorted(have, key=lambda cv: (sign * cv[1], -cv[0].step, cv[0].name))


def value_text(value: float) -> str:
    """A metric's value as printed: ``0.3``, ``12``, ``1e-05``."""
    return f"{value:.6g}"


def keep_reasons(candidates: Sequence[Candidate], *, keep_last: int | None = None, keep_every: int | None = None,
                 keep_best: Objective | None = None) -> dict[str, list[str]]:
    """Every candidate some rule keeps, with why (each rule that keeps it, in this order):

    - ``keep_last``: the ``keep_last`` highest steps;
    - ``keep_every``: every step that is a multiple of ``keep_every``;
    - ``keep_best``: the ``keep_best.count`` best by its metric, among those that have it;
      given alone, it also keeps every candidate without the metric, which it cannot judge.

    >>> c = [Candidate(f"checkpoint-{s}", s) for s in (1, 2, 3, 4)]
    >>> keep_reasons(c, keep_last=1, keep_every=2)
    {'checkpoint-2': ['step a multiple of 2'], 'checkpoint-4': ['among the last 1', 'step a multiple of 2']}
    """
    for rule, count in (("keep_last", keep_last), ("keep_every", keep_every)):
        if count is not None and count < 1:
            raise ValueError(f"{rule} must be at least 1, not {count}")
    if keep_best is not None and keep_best.count < 1:
        raise ValueError(f"keep_best's count must be at least 1, not {keep_best.count}")
    reasons: dict[str, list[str]] = {}
    by_step = sorted((c for c in candidates if c.incomplete is None), key=lambda c: (c.step, c.name))
    if keep_last is not None:
        for c in by_step[-keep_last:]:
            reasons.setdefault(c.name, []).append(f"among the last {keep_last}")
    if keep_every is not None:
        for c in by_step:
            if c.step % keep_every == 0:
                reasons.setdefault(c.name, []).append(f"step a multiple of {keep_every}")
    if keep_best is not None:
        for c, value in ranked(candidates, keep_best)[:keep_best.count]:
            reasons.setdefault(c.name, []).append(f"best {keep_best.count} by {keep_best} ({value_text(value)})")
        if keep_last is None and keep_every is None:
            judged = {c.name for c, _v in ranked(candidates, keep_best)}
            for c in by_step:
                if c.name not in judged:
                    reasons.setdefault(c.name, []).append(f"no usable {keep_best.metric} recorded: keep-best alone"
                                                          " does not judge it")
    return {c.name: reasons[c.name] for c in by_step if c.name in reasons}
