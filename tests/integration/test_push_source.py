"""The local dir of a push: a Trainer output_dir (the parent of checkpoint-N dirs) is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import ckpt_action as ckpt
from tests.conftest import clean_env, write_checkpoint


def output_dir(root: Path) -> Path:
    for step in (200, 400):
        write_checkpoint(root / f"checkpoint-{step}", {"model.safetensors": b"w" * 10, "trainer_state.json": b"{}"})
    return root


def test_the_parent_of_checkpoints_is_refused_before_any_request_naming_the_dir_to_push(cli, tmp_path: Path) -> None:
    parent = output_dir(tmp_path / "out")
    # An endpoint nothing listens on: reaching it would be exit 1, not 2.
    env = clean_env(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", HF_TOKEN="hf_x")
    run = cli("push", "--repo", "o/r", "--local-dir", str(parent), "--step", "400", env=env)
    assert run.code == 2, run.stderr
    assert str(parent / "checkpoint-400") in run.stderr and "--local-dir" in run.stderr
    with pytest.raises(ckpt.InputError, match="checkpoint-400"):
        ckpt.push(parent, "o/r", step=400, endpoint="http://127.0.0.1:9", token="hf_x")


def test_a_checkpoint_holding_a_folder_beside_its_files_is_pushed_as_it_is(tmp_path: Path) -> None:
    from ckpt_action.disk.source import local_dir_to_push

    # Files at the top level (or any other folder name) make it a checkpoint, not an output_dir.
    mixed = output_dir(tmp_path / "mixed")
    (mixed / "config.json").write_text("{}")
    assert local_dir_to_push(str(mixed)) == mixed
    other = write_checkpoint(tmp_path / "other", {"checkpoint-1/a.bin": b"a", "tokenizer/t.json": b"{}"})
    assert local_dir_to_push(str(other)) == other
