"""One bound on a step, the same for whoever writes it and whoever reads it: a push never
commits a step that ``latest``, ``list`` and ``prune`` would not see, and a manifest,
pointer or handle naming a bigger one is refused as they are."""

from __future__ import annotations

import json

import pytest

import ckpt_action as ckpt
from ckpt_action import names
from ckpt_action.checkpoint.manifest import Manifest, digest_bytes
from ckpt_action.errors import InputError, IntegrityError
from ckpt_action.handle import MAX_STEP, CheckpointHandle, step_of
from ckpt_action.wandb.format import parse_pointer, pointer_payload
from tests.conftest import clean_env, write_checkpoint

TOO_BIG = MAX_STEP + 1  # 10**18: the 10**19 was past it too


def test_the_biggest_step_pushed_is_one_its_readers_see():
    sub, stp = names.push_target(None, MAX_STEP)
    assert (sub, stp) == (f"checkpoint-{MAX_STEP}", MAX_STEP)
    assert step_of(sub) == MAX_STEP


@pytest.mark.parametrize(("sub", "stp"), [(None, TOO_BIG), (None, 10**19), ("sft", TOO_BIG),
                                          (f"checkpoint-{TOO_BIG}", None), (f"checkpoint-{10**19}", None)])
def test_a_step_past_the_bound_is_refused_on_write(sub, stp):
    with pytest.raises(InputError) as caught:
        names.push_target(sub, stp)
    assert caught.value.param in ("step", "subfolder") and str(MAX_STEP) in str(caught.value)


def test_each_door_names_the_step_it_was_given(cli_in_process, tmp_path):
    src = write_checkpoint(tmp_path / "ckpt", {"w.bin": b"w"})
    with pytest.raises(ckpt.InputError) as caught:
        ckpt.push(src, repo="o/r", step=10**19, endpoint="http://127.0.0.1:9")
    assert str(caught.value).startswith("step= 10000000000000000000 is too big"), caught.value
    run = cli_in_process("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(10**19),
                         HF_ENDPOINT="http://127.0.0.1:9")
    assert run.code == 2 and run.stderr.startswith("error: --step 10000000000000000000 is too big"), run.stderr
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", GITHUB_WORKSPACE=str(tmp_path),
                    INPUT_MODE="push", INPUT_REPO="o/r", INPUT_LOCAL_DIR="ckpt", INPUT_STEP=str(10**19))
    run = cli_in_process("from-action", env=env)
    error = run.stderr.strip().splitlines()[-1]
    assert run.code == 2 and error.startswith("error: input 'step' 10000000000000000000 is too big"), run.stderr


def test_a_manifest_naming_a_step_past_the_bound_is_unreadable():
    doc = json.loads(Manifest(files={"a.bin": digest_bytes("a.bin", b"a")}, step=MAX_STEP).to_json())
    assert Manifest.from_json(json.dumps(doc).encode()).step == MAX_STEP
    with pytest.raises(IntegrityError, match=r"manifest is unreadable.*step"):
        Manifest.from_json(json.dumps({**doc, "step": TOO_BIG}).encode())


def test_a_pointer_or_handle_naming_a_step_past_the_bound_is_refused():
    handle = CheckpointHandle("o/r", "sft", "a" * 40, MAX_STEP, "http://127.0.0.1:9")
    payload = pointer_payload(handle)
    assert parse_pointer(payload).step == MAX_STEP
    with pytest.raises(ckpt.CkptError, match="step"):
        parse_pointer({**payload, "step": TOO_BIG})
    with pytest.raises(IntegrityError, match="step"):
        CheckpointHandle("o/r", "sft", "a" * 40, TOO_BIG, "http://127.0.0.1:9")
