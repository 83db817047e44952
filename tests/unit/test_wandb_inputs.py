"""Every W&B input is checked before anything is sent anywhere: the API refuses a bad
project, entity, run id, artifact name or registry target with InputError (naming the
keyword) before W&B is even imported, so a push never commits only to fail on its pointer."""

from __future__ import annotations

import sys

import pytest

import ckpt_action as ckpt
from ckpt_action.errors import InputError
from ckpt_action.handle import CheckpointHandle

HANDLE = CheckpointHandle("org/run", "checkpoint-1", "a" * 40, 1)
BAD = [
    ({"project": "team/p"}, "project="),
    ({"project": "p", "entity": "a:b"}, "entity="),
    ({"project": "p", "artifact_name": "bad name"}, "artifact_name="),
    ({"project": "p", "artifact_name": "ok\n"}, "artifact_name="),
    ({"project": "p\n"}, "project="),
]


@pytest.mark.parametrize(("kwargs", "word"), BAD, ids=[w + str(i) for i, (_k, w) in enumerate(BAD)])
def test_log_pointer_checks_its_inputs_before_wandb(kwargs, word, monkeypatch):
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    monkeypatch.setitem(sys.modules, "wandb", None)  # any import of wandb would raise ImportError
    with pytest.raises(InputError) as err:
        ckpt.log_pointer(HANDLE, **kwargs)
    assert word in str(err.value)


def test_the_check_accepts_what_wandb_accepts():
    from ckpt_action import client as api

    api.check_wandb_inputs(project="llama-sft", entity="my-team", run_id="2x9fk1ab", artifact_name="org--run--sft",
                           registry="wandb-registry-model/llama")
