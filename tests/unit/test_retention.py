"""prune's retention plan and --best's choice: pure functions over the listed checkpoints."""

from __future__ import annotations

import pytest

from ckpt_action.checkpoint.metrics import Objective
from ckpt_action.ops.retention import Candidate, keep_reasons, ranked


def _c(step, **metrics):
    return Candidate(f"checkpoint-{step}", step, metrics or None)


CKPTS = [_c(100, eval_loss=0.9), _c(200, eval_loss=0.3), _c(300), _c(400, eval_loss=0.5),
         _c(500, eval_loss=0.3, acc=0.1), _c(600, eval_loss=0.7), Candidate("checkpoint-700", 700, None, "bad")]


def test_ranked_never_takes_a_checkpoint_without_the_metric_and_breaks_ties_by_newest():
    order = [c.name for c, _v in ranked(CKPTS, Objective("eval_loss", "min"))]
    assert order == ["checkpoint-500", "checkpoint-200", "checkpoint-400", "checkpoint-600", "checkpoint-100"]
    assert [c.name for c, _v in ranked(CKPTS, Objective("acc", "max"))] == ["checkpoint-500"]
    assert ranked(CKPTS, Objective("bleu", "max")) == []
    assert ranked(CKPTS, Objective("eval_loss", "max"))[0][0].name == "checkpoint-100"


def test_keep_last_every_and_best_combine_as_a_union_with_reasons():
    reasons = keep_reasons(CKPTS, keep_last=2, keep_every=300, keep_best=Objective("eval_loss", "min", 2))
    assert sorted(reasons) == ["checkpoint-200", "checkpoint-300", "checkpoint-500", "checkpoint-600",
                               "checkpoint-700"]
    assert reasons["checkpoint-700"] == ["among the last 2"]
    assert reasons["checkpoint-600"] == ["among the last 2", "step a multiple of 300"]
    assert reasons["checkpoint-300"] == ["step a multiple of 300"]
    assert reasons["checkpoint-500"] == ["best 2 by eval_loss:min (0.3)"]
    assert reasons["checkpoint-200"] == ["best 2 by eval_loss:min (0.3)"]


def test_each_rule_alone():
    assert sorted(keep_reasons(CKPTS, keep_last=1)) == ["checkpoint-700"]
    assert sorted(keep_reasons(CKPTS, keep_every=200)) == ["checkpoint-200", "checkpoint-400", "checkpoint-600"]
    best = keep_reasons(CKPTS, keep_best=Objective("eval_loss", "min", 1))
    assert best["checkpoint-500"] == ["best 1 by eval_loss:min (0.3)"]
    # keep-best alone never prunes what it cannot judge: a checkpoint without the metric stays
    assert sorted(best) == ["checkpoint-300", "checkpoint-500", "checkpoint-700"]
    assert "no usable eval_loss" in best["checkpoint-300"][0]
    with_last = keep_reasons(CKPTS, keep_last=1, keep_best=Objective("eval_loss", "min", 1))
    assert sorted(with_last) == ["checkpoint-500", "checkpoint-700"], "with keep-last, keep-last judges the rest"
    assert keep_reasons(CKPTS) == {}


def test_a_checkpoint_with_a_malformed_metrics_field_is_never_best():
    odd = [Candidate("checkpoint-1", 1, None, "metrics is not an object"), _c(2, eval_loss=5.0)]
    assert [c.name for c, _v in ranked(odd, Objective("eval_loss", "min"))] == ["checkpoint-2"]


@pytest.mark.parametrize("k", [0, -1])
def test_bad_counts_refused(k):
    with pytest.raises(ValueError):
        keep_reasons(CKPTS, keep_last=k)


def test_keep_every_keeps_step_0_a_multiple_of_every_n():
    """``--keep-every N`` keeps every step that is a multiple of N, step 0 included (the run's
    starting point, e.g. the base model saved before training)."""
    ckpts = [_c(0), _c(50), _c(100), _c(150), _c(200)]
    reasons = keep_reasons(ckpts, keep_every=100)
    assert sorted(reasons) == ["checkpoint-0", "checkpoint-100", "checkpoint-200"]
    assert reasons["checkpoint-0"] == ["step a multiple of 100"]
