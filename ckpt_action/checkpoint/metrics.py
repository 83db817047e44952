"""Metrics as data: the name and value rules, ``NAME=VALUE`` parsing, the manifest's
``metrics`` field, the Trainer's evaluation metrics, and the objectives that choose by them
(``--best METRIC:min|max``, ``--keep-best METRIC:min|max[:K]``).

A metric name is printed (list, the job summary, the model card) and compared, never
run: it is bounded (at most :data:`MAX_NAME` characters, at most :data:`MAX_METRICS`
metrics a checkpoint), printable, without whitespace, and without ``=`` or ``:``, which
separate it from its value and its objective. A value is a finite number. A manifest from
the Hub whose ``metrics`` field breaks a rule is read with no metrics and the problem
said (:attr:`~ckpt_action.checkpoint.manifest.Manifest.metrics_problem`): the folder is
listed, resumed from, never chosen by a metric.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ckpt_action.errors import InputError, param, quoted
from ckpt_action.names import COUNT_FORM, count_text

MAX_NAME = 128
"""Characters a metric name may have."""
MAX_METRICS = 64
"""Metrics one checkpoint may carry."""
Mode = Literal["min", "max"]


def metric_name_problem(name: object) -> str | None:
    """Why ``name`` is not a usable metric name, None when it is.

    >>> metric_name_problem("eval_loss") is None, metric_name_problem("a b")
    (True, 'it holds whitespace')
    """
    if not isinstance(name, str):
        return "it is not a string"
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME:
        return f"it is longer than {MAX_NAME} characters"
    if any(c.isspace() for c in name):
        return "it holds whitespace"
    if not name.isprintable():
        return "it holds control or non-printing characters"
    if "=" in name or ":" in name:
        return "it holds '=' or ':'"
    return None


def _value(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def check_metrics(metrics: Mapping[str, object], name: str) -> dict[str, float]:
    """The metrics a caller gave (the parameter ``name``: ``metrics``), checked: every
    name by :func:`metric_name_problem`, every value a finite number, at most MAX_METRICS."""
    if not isinstance(metrics, Mapping):
        raise InputError(f"{param(name)} must be a mapping of metric names to numbers", param=name)
    if len(metrics) > MAX_METRICS:
        raise InputError(f"{param(name)} holds {len(metrics)} metrics, at most {MAX_METRICS} are kept: drop some",
                         param=name)
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if (why := metric_name_problem(key)) is not None:
            raise InputError(f"{param(name)}: metric name {quoted(key, 60)} is refused ({why})", param=name)
        number = _value(value)
        if number is None:
            raise InputError(f"{param(name)}: the value of {key} must be a finite number, not {quoted(value, 40)}",
                             param=name)
        out[key] = number
    return out


def parse_metrics(items: Iterable[str], name: str) -> dict[str, float]:
    """``NAME=VALUE`` texts (``--metric``, repeated; the action's ``metrics`` lines) as metrics.

    >>> parse_metrics(["eval_loss=0.25", "acc=1"], "metric")
    {'eval_loss': 0.25, 'acc': 1.0}
    """
    out: dict[str, float] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise InputError(f"{param(name)} {quoted(item, 60)} must be NAME=VALUE", param=name)
        key = key.strip()
        if (why := metric_name_problem(key)) is not None:
            raise InputError(f"{param(name)}: metric name {quoted(key, 60)} is refused ({why})", param=name)
        try:
            number = float(text.strip())
        except ValueError:
            number = None
        if number is None or not math.isfinite(number):
            raise InputError(f"{param(name)}: the value of {key} must be a finite number, not {quoted(text, 40)}",
                             param=name)
        if key in out:
            raise InputError(f"{param(name)}: {key} is given twice: give each metric once", param=name)
        out[key] = number
    if len(out) > MAX_METRICS:
        raise InputError(f"{param(name)} gives {len(out)} metrics, at most {MAX_METRICS} are kept: drop some",
                         param=name)
    return out


def read_field(raw: object) -> tuple[dict[str, float] | None, str | None]:
    """A manifest's ``metrics`` field as (metrics, None), or (None, why) when it is malformed:
    data from the Hub, reported, never raised.

    >>> read_field({"eval_loss": 0.5}), read_field(None)
    (({'eval_loss': 0.5}, None), (None, None))
    """
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        return None, "metrics is not an object"
    if len(raw) > MAX_METRICS:
        return None, f"metrics holds {len(raw)} entries, more than {MAX_METRICS}"
    out: dict[str, float] = {}
    for key, value in raw.items():
        if (why := metric_name_problem(key)) is not None:
            return None, f"metrics has a name {quoted(key, 60)} that is refused ({why})"
        number = _value(value)
        if number is None:
            return None, f"metrics has a value of {key} that is not a finite number ({quoted(value, 40)})"
        out[key] = number
    return out, None


def from_trainer_state(data: bytes, step: int) -> dict[str, float]:
    """The evaluation metrics (``eval_*``) Trainer logged at ``step``, from the bytes of a
    checkpoint's ``trainer_state.json`` (its ``log_history``). What breaks a rule (a name,
    a value that is not a finite number) is left out; unreadable data gives none."""
    try:
        state = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    history = state.get("log_history") if isinstance(state, dict) else None
    out: dict[str, float] = {}
    for entry in history if isinstance(history, list) else []:
        if not isinstance(entry, dict) or entry.get("step") != step:
            continue
        for key, value in entry.items():
            if (isinstance(key, str) and key.startswith("eval_") and metric_name_problem(key) is None
                    and (number := _value(value)) is not None and len(out) < MAX_METRICS):
                out[key] = number
    return out


@dataclass(frozen=True)
class Objective:
    """Choose by ``metric``, the lowest (``min``) or highest (``max``) first; ``count``: how many."""

    metric: str
    mode: Mode
    count: int = 1

    def __str__(self) -> str:
        return f"{self.metric}:{self.mode}"


def parse_objective(text: str, name: str, *, count: bool = False) -> Objective:
    """``METRIC:min|max`` (with ``count``: ``METRIC:min|max[:K]``) for the parameter ``name``.

    >>> parse_objective("eval_loss:min", "best")
    Objective(metric='eval_loss', mode='min', count=1)
    """
    form = "METRIC:min|max" + ("[:K]" if count else "")
    parts = text.split(":") if isinstance(text, str) else []
    if len(parts) not in ((2, 3) if count else (2,)):
        raise InputError(f"{param(name)} {quoted(text, 60)} must be {form}", param=name)
    metric, mode = parts[0].strip(), parts[1].strip()
    if (why := metric_name_problem(metric)) is not None:
        raise InputError(f"{param(name)}: metric name {quoted(metric, 60)} is refused ({why})", param=name)
    if mode not in ("min", "max"):
        raise InputError(f"{param(name)} {quoted(text, 60)} must be {form}: min or max, not {quoted(mode, 20)}",
                         param=name)
    k = 1
    if len(parts) == 3:
        given = count_text(parts[2].strip())
        if given is None or given < 1:
            raise InputError(f"{param(name)} {quoted(text, 60)}: K must be at least 1, {COUNT_FORM}", param=name)
        k = given
    return Objective(metric, "min" if mode == "min" else "max", k)
