"""Metrics as data: the name and value rules, NAME=VALUE parsing, the manifest's field,
the Trainer's log history, and the objectives of --best / --keep-best."""

from __future__ import annotations

import json
import math

import pytest

from ckpt_action.checkpoint.manifest import FileDigest, Manifest
from ckpt_action.checkpoint.metrics import (
    MAX_METRICS,
    MAX_NAME,
    Objective,
    check_metrics,
    from_trainer_state,
    metric_name_problem,
    parse_metrics,
    parse_objective,
)
from ckpt_action.errors import InputError


@pytest.mark.parametrize("name", ["eval_loss", "eval/accuracy", "bleu-4", "x" * MAX_NAME, "é"])
def test_good_names(name):
    assert metric_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "x" * (MAX_NAME + 1), "a\nb", "a\x1bb", "a b", "a=b", "a:b", "a\u202eb",
                                  "a\u2028b", 3])
def test_bad_names(name):
    assert metric_name_problem(name) is not None


def test_parse_metrics_names_the_parameter_and_refuses_what_is_not_a_finite_number():
    assert parse_metrics(["eval_loss=0.25", "acc=1"], "metric") == {"eval_loss": 0.25, "acc": 1.0}
    for bad, words in [("eval_loss", "NAME=VALUE"), ("eval_loss=nan", "finite"), ("eval_loss=inf", "finite"),
                       ("eval_loss=abc", "number"), ("a b=1", "metric name"), ("=1", "metric name")]:
        with pytest.raises(InputError) as err:
            parse_metrics([bad], "metric")
        assert err.value.param == "metric" and all(w in err.value.render("cli") for w in words), err.value
        assert "--metric" in err.value.render("cli") and "input 'metrics'" in err.value.render("action")
    with pytest.raises(InputError, match="twice"):
        parse_metrics(["a=1", "a=2"], "metric")
    with pytest.raises(InputError, match="at most"):
        parse_metrics([f"m{i}=1" for i in range(MAX_METRICS + 1)], "metric")


def test_check_metrics_from_python():
    assert check_metrics({"eval_loss": 1, "acc": 0.5}, "metrics") == {"eval_loss": 1.0, "acc": 0.5}
    for bad in ({"a": math.nan}, {"a": True}, {"a": "1"}, {"a\n": 1.0}, [("a", 1)]):
        with pytest.raises(InputError) as err:
            check_metrics(bad, "metrics")  # type: ignore[arg-type]
        assert err.value.param == "metrics" and "metrics=" in str(err.value)


def test_objective_parses_metric_mode_and_count():
    assert parse_objective("eval_loss:min", "best") == Objective("eval_loss", "min", 1)
    assert parse_objective("acc:max:3", "keep_best", count=True) == Objective("acc", "max", 3)
    for bad in ("eval_loss", "eval_loss:low", ":min", "acc:max:0", "acc:max:x", "a\nb:min"):
        with pytest.raises(InputError) as err:
            parse_objective(bad, "keep_best", count=True)
        assert "--keep-best" in err.value.render("cli")
    with pytest.raises(InputError) as err:
        parse_objective("acc:max:3", "best")  # a count only where several are kept
    assert err.value.render("cli").startswith("--best 'acc:max:3' must be METRIC:min|max")


def test_manifest_carries_metrics_and_old_manifests_stay_readable():
    files = {"a": FileDigest(1, "0" * 64, "1" * 40, False)}
    m = Manifest(files=files, step=7, metrics={"eval_loss": 0.5})
    back = Manifest.from_json(m.to_json())
    assert back.metrics == {"eval_loss": 0.5} and back.metrics_problem is None
    assert m.content_key() != Manifest(files=files, step=7).content_key(), "new metrics make a new manifest"
    old = json.loads(Manifest(files=files, step=7).to_json())
    assert "metrics" not in old
    assert Manifest.from_json(json.dumps(old).encode()).metrics is None


@pytest.mark.parametrize("raw", [{"a": "1"}, {"a": None}, {"a\n::warning::x": 1.0}, [1], {"a": True},
                                 {f"m{i}": 1.0 for i in range(MAX_METRICS + 1)}, {"x" * 500: 1.0}])
def test_malformed_metrics_from_the_hub_are_reported_not_fatal(raw):
    files = {"a": FileDigest(1, "0" * 64, "1" * 40, False)}
    doc = json.loads(Manifest(files=files, step=7).to_json())
    doc["metrics"] = raw
    back = Manifest.from_json(json.dumps(doc).encode())
    assert back.metrics is None and back.metrics_problem and "metrics" in back.metrics_problem
    assert "\n" not in back.metrics_problem


def test_from_trainer_state_takes_the_eval_metrics_of_that_step():
    state = {"log_history": [
        {"loss": 2.0, "step": 10}, {"eval_loss": 1.5, "eval_runtime": 0.1, "epoch": 1.0, "step": 10},
        {"eval_loss": 1.2, "step": 20}, {"eval_loss": float("nan"), "eval_bad name": 1, "eval_ok": 3, "step": 30},
        {"checkpoint": "checkpoint-10", "step": 10}]}
    data = json.dumps(state).encode()
    assert from_trainer_state(data, 10) == {"eval_loss": 1.5, "eval_runtime": 0.1}
    assert from_trainer_state(data, 20) == {"eval_loss": 1.2}
    assert from_trainer_state(data, 30) == {"eval_ok": 3.0}, "what is not a metric is left out"
    assert from_trainer_state(data, 40) == {}
    assert from_trainer_state(b"not json", 10) == {}


def test_metric_names_are_escaped_in_the_job_summary_and_the_log():
    from ckpt_action.ci.escaping import escape
    from ckpt_action.ci.outputs import checkpoints_table, summary_markdown
    from ckpt_action.ops.discover import CheckpointInfo
    from ckpt_action.ops.prune import ListResult

    evil = "a|b<img src=x>`x`[l](http://e)"
    info = CheckpointInfo("checkpoint-1", 1, True, "complete", 1, 1, "a" * 40, metrics={evil: 0.5})
    md = summary_markdown("list", {"repo": "o/r", "revision": "a" * 40, "count": 1},
                          checkpoints_table(ListResult("o/r", "a" * 40, [info])))
    table_row = next(line for line in md.splitlines() if "checkpoint-1" in line)
    assert table_row.count("|") == 8, "the card's seven cells: a metric name cannot add one"
    assert "<img" not in md and "`x`" not in md and "](" not in md
    assert "0.5" in table_row
    assert not escape("::warning::x=1").startswith("::")
