"""Repos and checkpoint dirs the benchmarks run on, built fast.

The many-folder repo is written through the real client but in few commits (thousands
of small additions per ``create_commit``), because one commit per checkpoint would
spend minutes building what the benchmark reads in a second. Its checkpoints look like
what ckpt-action pushes: Trainer's files plus a manifest, so ``latest`` verifies them.
"""

from __future__ import annotations

import os
from pathlib import Path

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, digest_bytes

# Trainer's checkpoint files (11) + our manifest = 12 per folder. Three match the Hub's
# LFS patterns, as in real checkpoints; their tiny contents repeat across folders, so the
# content-addressed store uploads each only once and the build stays fast.
REGULAR_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "trainer_state.json", "chat_template.jinja", "README.md")
LFS_FILES = ("model.safetensors", "optimizer.pt", "rng_state.pth")
FILES_PER_FOLDER = len(REGULAR_FILES) + len(LFS_FILES) + 1
BLOCK = 64 * 1024 * 1024





def folder_files(step: int) -> dict[str, bytes]:
    """The 12 files of ``checkpoint-<step>``: small, distinct per step except the LFS ones."""
    files = {name: f'{{"step": {step}, "file": "{name}"}}\n'.encode() for name in REGULAR_FILES}
    files |= {name: f"lfs payload {name}\n".encode() for name in LFS_FILES}
    manifest = Manifest(files={n: digest_bytes(n, d) for n, d in files.items()}, step=step, complete=True,
                        created_at="2026-01-01T00:00:00Z")
    files[MANIFEST_NAME] = manifest.to_json()
    return files


def build_many_folders(api: object, repo: str, folders: int, *, batch_files: int = 2000) -> int:
    """Create ``repo`` with ``checkpoint-{100..100*folders}``; returns the commits made."""
    from huggingface_hub import CommitOperationAdd, HfApi

    assert isinstance(api, HfApi)
    api.create_repo(repo, exist_ok=True)
    ops: list[CommitOperationAdd] = []
    commits = 0
    for n in range(1, folders + 1):
        step = 100 * n
        for name, data in folder_files(step).items():
            ops.append(CommitOperationAdd(f"checkpoint-{step}/{name}", data))
        if len(ops) >= batch_files or n == folders:
            api.create_commit(repo, operations=ops, commit_message=f"checkpoints up to {step}")
            commits += 1
            ops = []
    return commits


# Sizes of the big checkpoint's files (MiB): shards, optimizer state and small extras,
# like a ~1B-parameter model's Trainer checkpoint. Sum: 2048 MiB.
BIG_CHECKPOINT_MIB = {"model-00001-of-00002.safetensors": 640, "model-00002-of-00002.safetensors": 640,
                      "optimizer.pt": 704, "scheduler.pt": 32, "rng_state.pth": 32}
# Quick: the smallest that still has a weights file above the Hub's git id limit (20 MiB), so
# the one-read path of a big file runs, and files below it.
QUICK_CHECKPOINT_MIB = {"model.safetensors": 24, "optimizer.pt": 6, "rng_state.pth": 2}
SMALL_FILES = {"config.json": b'{"model_type": "bench"}\n', "trainer_state.json": b'{"global_step": 1}\n'}


def write_checkpoint(root: Path, sizes_mib: dict[str, int], salt: int = 0) -> int:
    """Write a checkpoint dir of incompressible, never-repeating content; returns its bytes.

    One random 64 MiB block is reused with a per-block counter in its first bytes, so
    every block (and every file, and every ``salt``) hashes differently while writing
    runs at disk speed instead of os.urandom's.
    """
    root.mkdir(parents=True, exist_ok=True)
    block = bytearray(os.urandom(BLOCK))
    total = 0
    counter = salt * 1_000_000
    for name, mib in sizes_mib.items():
        left = mib * 1024 * 1024
        with open(root / name, "wb") as fh:
            while left > 0:
                counter += 1
                block[:16] = counter.to_bytes(16, "little")
                n = min(left, BLOCK)
                fh.write(memoryview(block)[:n])
                left -= n
                total += n
    for name, data in SMALL_FILES.items():
        (root / name).write_bytes(data)
        total += len(data)
    return total
