"""What a promote --as-model release keeps, converts and leaves out of a training checkpoint."""

from __future__ import annotations

import pytest

from ckpt_action.errors import CkptError, InputError
from ckpt_action.ops.asmodel import select, shard_size

TRAINER = ["config.json", "generation_config.json", "model.safetensors", "optimizer.pt", "scheduler.pt",
           "rng_state.pth", "rng_state_1.pth", "trainer_state.json", "training_args.bin", "tokenizer.json",
           "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt", "README.md", "LICENSE",
           "preprocessor_config.json", "chat_template.jinja"]


def test_a_trainer_checkpoint_keeps_what_from_pretrained_reads_and_nothing_else() -> None:
    s = select(TRAINER)
    assert s.kind == "safetensors" and s.convert == ()
    assert set(s.keep) == set(TRAINER) - {"optimizer.pt", "scheduler.pt", "rng_state.pth", "rng_state_1.pth",
                                          "trainer_state.json", "training_args.bin"}


def test_accelerate_training_state_and_unknown_files_are_left_out_with_why() -> None:
    s = select(["model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl", "scaler.pt",
                "custom_code.py", "extra/weights.safetensors", "anything.pkl"])
    assert s.keep == ("model.safetensors",)
    why = dict(s.left_out)
    assert why["optimizer.bin"] == "optimizer state" and why["random_states_0.pkl"] == "RNG state"
    assert why["anything.pkl"] == "a pickle" and why["custom_code.py"] == "not a file from_pretrained reads"
    assert "not at the top" in why["extra/weights.safetensors"]


def test_bin_weights_are_converted_unless_safetensors_are_there() -> None:
    assert select(["pytorch_model.bin", "config.json"]).convert == ("pytorch_model.bin",)
    s = select(["pytorch_model.bin", "model.safetensors"])
    assert s.convert == () and "pytorch_model.bin" in dict(s.left_out)


def test_no_weights_is_an_error() -> None:
    with pytest.raises(CkptError, match="without --as-model"):
        select(["optimizer.pt", "config.json"])


def test_shard_sizes() -> None:
    assert shard_size("500MB") == 500 * 10**6 and shard_size("2GiB") == 2 * 2**30
    with pytest.raises(InputError, match="max_shard_size"):
        shard_size("lots")
    with pytest.raises(InputError, match="at least 1"):
        shard_size(0)
