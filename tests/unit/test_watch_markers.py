"""When `watch` takes a checkpoint as complete, per framework.

Each test replays one framework's write order, as read in its source (the module docstring of
``ckpt_action.watch.markers`` cites where): files appear one by one, some written in two halves
(a torn file), and after every event the scanner looks with the clock moved far past any quiet
period. A folder is never ready before its framework's last write, and a save that stops half-way
(a crash) stays incomplete however long it stays quiet. These are the fast checks; each is
backed by a test that runs the real library under a Watcher against a local Hub: the Trainer and
accelerate in tests/integration/test_watch_frameworks.py, DCP in test_watch_dcp.py (the transformers
extra), Lightning in test_watch_lightning.py and Orbax in test_watch_orbax.py (both need
requirements-frameworks.lock), and each framework once more as a whole `ckpt-action watch -- python
script.py` process in tests/e2e/test_watch_frameworks_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ckpt_action.watch import markers
from ckpt_action.watch.scanner import Scanner

FOREVER = 10_000.0  # seconds of quiet: "however long it stays quiet"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def torch_zip(payload: bytes = b"x" * 100) -> bytes:
    """A file in torch.save's format: a zip whose central directory is written last."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
    return buf.getvalue()


def write_torn(path: Path, data: bytes) -> Iterator[None]:
    """Write ``data`` in two halves, yielding between them (a file caught mid-write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data[: len(data) // 2])
        fh.flush()
        yield
        fh.write(data[len(data) // 2:])
    yield


def trainer_save(root: Path, step: int) -> Iterator[None]:
    """transformers 5.x Trainer._save_checkpoint into checkpoint-STEP: save_model (config, weights,
    training_args.bin), optimizer, scheduler, RNG state, trainer_state.json last, written in place."""
    d = root / f"checkpoint-{step}"
    d.mkdir(parents=True)
    yield
    (d / "config.json").write_text("{}")
    yield
    yield from write_torn(d / "model.safetensors", b"w" * 1000)
    for name in ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        yield from write_torn(d / name, torch_zip())
    yield from write_torn(d / "trainer_state.json", json.dumps({"global_step": step, "log_history": []}).encode())


def accelerate_save(root: Path, step: int) -> Iterator[None]:
    """accelerate 1.x save_state with automatic naming: weights, optimizer, scheduler, sampler,
    then random_states_<rank>.pkl, then custom_checkpoint_<i>.pkl; nothing renamed."""
    d = root / f"checkpoint_{step}"
    d.mkdir(parents=True)
    yield
    yield from write_torn(d / "model.safetensors", b"w" * 1000)
    for name in ("optimizer.bin", "scheduler.bin", "sampler.bin", "random_states_0.pkl"):
        yield from write_torn(d / name, torch_zip())


def lightning_save(root: Path, step: int) -> Iterator[None]:
    """Lightning's _atomic_save across filesystems: fsspec's transaction writes a temporary file
    elsewhere, then moves it into place, which is a copy: the final name appears torn.
    Real: tests/integration/test_watch_lightning.py."""
    yield from write_torn(root / f"epoch=0-step={step}.ckpt", torch_zip(b"y" * 5000))


def dcp_save(root: Path, step: int) -> Iterator[None]:
    """torch.distributed.checkpoint FileSystemWriter: each rank's .distcp, then the coordinator
    writes .metadata.tmp and renames it to .metadata. Real: tests/integration/test_watch_dcp.py."""
    d = root / f"step_{step}"
    d.mkdir(parents=True)
    yield
    for rank in (0, 1):
        yield from write_torn(d / f"__{rank}_0.distcp", b"t" * 800)
    yield from write_torn(d / ".metadata.tmp", b"meta" * 10)
    os.rename(d / ".metadata.tmp", d / ".metadata")
    yield


def dcp_rank_local_save(root: Path, step: int) -> Iterator[None]:
    """The same with ``use_collectives=False``: no coordinator; each rank writes its data, then
    its own __<rank>.metadata.tmp renamed to __<rank>.metadata (ranks run side by side).
    Real: tests/integration/test_watch_dcp.py."""
    d = root / f"step_{step}"
    d.mkdir(parents=True)
    yield
    for rank in (0, 1):
        yield from write_torn(d / f"__{rank}_0.distcp", b"t" * 800)
    for rank in (0, 1):
        yield from write_torn(d / f"__{rank}.metadata.tmp", b"meta" * 10)
        os.rename(d / f"__{rank}.metadata.tmp", d / f"__{rank}.metadata")
        yield


def orbax_rename_save(root: Path, step: int) -> Iterator[None]:
    """Orbax AtomicRenameTemporaryPath: save into STEP.orbax-checkpoint-tmp-N (with
    _CHECKPOINT_METADATA holding the init time), add the commit time, write commit_success.txt
    in the tmp dir (0.12), rename to STEP. Real: tests/integration/test_watch_orbax.py."""
    tmp = root / f"{step}.orbax-checkpoint-tmp-1234"
    tmp.mkdir(parents=True)
    (tmp / "_CHECKPOINT_METADATA").write_text(json.dumps({"init_timestamp_nsecs": 1}))
    yield
    yield from write_torn(tmp / "default" / "_METADATA", b"m" * 300)
    (tmp / "_CHECKPOINT_METADATA").write_text(json.dumps({"init_timestamp_nsecs": 1, "commit_timestamp_nsecs": 2}))
    yield
    final = root / str(step)
    yield from write_torn(tmp / "commit_success.txt", f"Checkpoint commit was successful to {final}".encode())
    os.rename(tmp, root / str(step))
    yield


def orbax_commit_file_save(root: Path, step: int) -> Iterator[None]:
    """Orbax CommitFileTemporaryPath: write under the final name, then commit_success.txt.
    Real: tests/integration/test_watch_orbax.py."""
    d = root / str(step)
    d.mkdir(parents=True)
    (d / "_CHECKPOINT_METADATA").write_text(json.dumps({"init_timestamp_nsecs": 1}))
    yield
    yield from write_torn(d / "default" / "_METADATA", b"m" * 300)
    (d / "_CHECKPOINT_METADATA").write_text(json.dumps({"init_timestamp_nsecs": 1, "commit_timestamp_nsecs": 2}))
    yield
    yield from write_torn(d / "commit_success.txt", f"Checkpoint commit was successful to {d}".encode())


CASES: dict[str, tuple[Callable[[Path, int], Iterator[None]], str]] = {
    "trainer": (trainer_save, markers.DEFAULT_PATTERNS["trainer"]),
    "accelerate": (accelerate_save, markers.DEFAULT_PATTERNS["accelerate"]),
    "lightning": (lightning_save, markers.DEFAULT_PATTERNS["lightning"]),
    "dcp": (dcp_save, r"step_(\d+)"),
    "dcp-rank-local": (dcp_rank_local_save, r"step_(\d+)"),
    "orbax-rename": (orbax_rename_save, markers.DEFAULT_PATTERNS["orbax"]),
    "orbax-commit-file": (orbax_commit_file_save, markers.DEFAULT_PATTERNS["orbax"]),
}


def ready_steps(scanner: Scanner, clock: Clock) -> list[int]:
    scanner.scan()
    clock.now += FOREVER
    return [c.step for c in scanner.scan() if c.ready]


@pytest.mark.parametrize("case", list(CASES))
def test_a_checkpoint_is_ready_only_after_its_frameworks_last_write(tmp_path, case):
    save, pattern = CASES[case]
    clock = Clock()
    scanner = Scanner(tmp_path, re.compile(pattern), settle=5.0, clock=clock)
    for _ in save(tmp_path, 100):  # the first save: the dir's framework is told from it
        pass
    assert ready_steps(scanner, clock) == [100]
    events = list(enumerate(save(tmp_path, 200)))
    seen = []
    writer = save(tmp_path, 300)
    for _ in writer:
        seen.append(ready_steps(scanner, clock))
    assert all(steps[-1] != 300 for steps in seen[:-1]), (case, seen)
    assert seen[-1][-1] == 300
    assert events  # the replay of step 200 ran whole


@pytest.mark.parametrize("case", list(CASES))
def test_a_save_cut_half_way_is_never_ready(tmp_path, case):
    save, pattern = CASES[case]
    clock = Clock()
    scanner = Scanner(tmp_path, re.compile(pattern), settle=5.0, clock=clock)
    for _ in save(tmp_path, 100):
        pass
    writes = save(tmp_path, 200)
    total = sum(1 for _ in save(tmp_path / "count", 200))
    for _ in range(total // 2):  # the trainer is killed half-way through its save
        next(writes)
    assert ready_steps(scanner, clock) == [100]
    clock.now += FOREVER
    assert [c.step for c in scanner.scan() if c.ready] == [100]
    assert scanner.framework == case.split("-")[0]


@pytest.mark.parametrize("case", ["trainer", "accelerate", "dcp"])
def test_a_named_format_holds_the_first_save_to_its_marker(tmp_path, case):
    save, pattern = CASES[case]
    clock = Clock()
    scanner = Scanner(tmp_path, re.compile(pattern), fmt=case, settle=5.0, clock=clock)
    writes = save(tmp_path, 100)
    next(writes)
    next(writes)  # a folder with a first file only: nothing says which framework yet
    assert ready_steps(scanner, clock) == []


def test_a_plain_folder_is_ready_after_the_quiet_period_and_not_before(tmp_path):
    clock = Clock()
    scanner = Scanner(tmp_path, re.compile(r"checkpoint-(\d+)"), settle=5.0, clock=clock)
    d = tmp_path / "checkpoint-7"
    d.mkdir()
    (d / "weights.npy").write_bytes(b"a" * 10)
    assert not scanner.scan()[0].ready
    clock.now += 4.0
    assert not scanner.scan()[0].ready
    (d / "weights.npy").write_bytes(b"a" * 20)  # still being written: the quiet period starts again
    clock.now += 4.0
    assert not scanner.scan()[0].ready
    clock.now += 4.5  # the scanner saw the change at its last look, 4.5 s ago
    assert not scanner.scan()[0].ready
    clock.now += 1.0
    ckpt = scanner.scan()[0]
    assert ckpt.ready and scanner.framework == "plain"
    before = ckpt.snapshot
    assert scanner.unchanged(ckpt, before)
    (d / "weights.npy").write_bytes(b"b" * 21)
    assert not scanner.unchanged(ckpt, before)


def test_detection_from_a_dirs_files():
    assert markers.framework_of(["optimizer.bin", "model.safetensors"]) == "accelerate"
    assert markers.framework_of(["trainer_state.json"]) == "trainer"
    assert markers.framework_of(["_CHECKPOINT_METADATA"]) == "orbax"
    assert markers.framework_of(["epoch=1-step=5.ckpt"], is_file=True) == "lightning"
    assert markers.detect([None, "trainer", None]) == "trainer"
    assert markers.detect([None]) is None


def test_a_ranks_file_landing_just_after_the_marker_restarts_the_quiet_period(tmp_path):
    """Trainer with save_on_each_node and two processes a node: the node's local main process
    writes trainer_state.json while local rank 1 may still be writing rng_state_1.pth (no barrier
    between them in _save_checkpoint): the marker alone is not enough, the folder must then stay
    quiet MARKER_SETTLE seconds."""
    from ckpt_action.watch.scanner import MARKER_SETTLE

    clock = Clock()
    node = tmp_path / "node0"
    scanner = Scanner(node, re.compile(markers.DEFAULT_PATTERNS["trainer"]), settle=30.0, clock=clock)
    d = node / "checkpoint-4"
    d.mkdir(parents=True)
    (d / "rng_state_0.pth").write_bytes(torch_zip())
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    assert not scanner.scan()[0].ready
    clock.now += MARKER_SETTLE / 2
    (d / "rng_state_1.pth").write_bytes(torch_zip())  # rank 1, late
    assert not scanner.scan()[0].ready
    clock.now += MARKER_SETTLE / 2 + 0.1
    assert not scanner.scan()[0].ready  # quiet only since rank 1's file
    clock.now += MARKER_SETTLE
    assert scanner.scan()[0].ready
