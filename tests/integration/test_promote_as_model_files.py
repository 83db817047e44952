"""promote --as-model of a PEFT adapter checkpoint and of ``.bin`` weights, against a local Hub.

peft is not in requirements-transformers.lock: the adapter release is checked by its files
and by loading its safetensors, not by ``PeftModel.from_pretrained``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the conversion needs torch (the [distributed] extra)")
from safetensors.torch import load_file, save_file  # noqa: E402

import ckpt_action as ckpt  # noqa: E402
from ckpt_action.errors import CkptError  # noqa: E402

REPO = "org/adapters"


def push_dir(hub, path: Path, step: int):
    return ckpt.push(path, REPO, step=step, endpoint=hub.url)


def files_of(hub, handle, tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    ckpt.pull(handle, dest, endpoint=hub.url)
    return dest


def names(dest: Path) -> set[str]:
    return {p.name for p in dest.iterdir()} - {".ckpt-pull.json"}


def test_a_peft_adapter_checkpoint_keeps_the_adapter_and_leaves_training_state_out(hub_server, tmp_path):
    hub = hub_server()
    src = tmp_path / "checkpoint-5"
    src.mkdir()
    adapter = {"base_model.model.h.0.attn.lora_A.weight": torch.randn(4, 16),
               "base_model.model.h.0.attn.lora_B.weight": torch.randn(16, 4)}
    save_file(adapter, src / "adapter_model.safetensors")
    (src / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 4}')
    (src / "README.md").write_text("# adapter\n")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        torch.save({"x": torch.ones(2)}, src / name)
    (src / "trainer_state.json").write_text("{}")
    handle = push_dir(hub, src, 5)
    release = ckpt.promote(handle, "release", as_model=True, tag="v1", endpoint=hub.url)
    dest = files_of(hub, release, tmp_path, "release")
    assert names(dest) == {"adapter_model.safetensors", "adapter_config.json", "README.md", "ckpt-manifest.json"}
    got = load_file(dest / "adapter_model.safetensors")
    assert set(got) == set(adapter) and all(torch.equal(got[k], v) for k, v in adapter.items())


def test_bin_weights_are_converted_with_weights_only(hub_server, tmp_path):
    hub = hub_server()
    src = tmp_path / "checkpoint-3"
    src.mkdir()
    state = {"model.w": torch.randn(5, 3), "model.b": torch.arange(4, dtype=torch.int32), "other": torch.ones(1)}
    torch.save(state, src / "pytorch_model.bin")
    (src / "config.json").write_text("{}")
    torch.save({"s": torch.ones(1)}, src / "optimizer.pt")
    handle = push_dir(hub, src, 3)
    release = ckpt.promote(handle, "release", as_model=True, strip_prefix="model.", endpoint=hub.url)
    dest = files_of(hub, release, tmp_path, "release")
    assert names(dest) == {"model.safetensors", "config.json", "ckpt-manifest.json"}
    got = load_file(dest / "model.safetensors")
    assert set(got) == {"w", "b"}
    assert torch.equal(got["w"], state["model.w"]) and torch.equal(got["b"], state["model.b"])


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_bin_that_needs_more_than_weights_only_is_refused_and_nothing_is_written(hub_server, tmp_path):
    hub = hub_server()
    src = tmp_path / "checkpoint-4"
    src.mkdir()
    marker = tmp_path / "ran"
    torch.save({"w": torch.ones(2), "evil": _RunsCode(marker)}, src / "pytorch_model.bin")
    handle = push_dir(hub, src, 4)
    with pytest.raises(CkptError, match="weights_only=True"):
        ckpt.promote(handle, "release", as_model=True, endpoint=hub.url)
    assert not marker.exists()
    assert {i.subfolder for i in ckpt.list_checkpoints(REPO, endpoint=hub.url)} == {"checkpoint-4"}
