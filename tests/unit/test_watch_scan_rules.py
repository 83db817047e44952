"""What `watch`'s scanner refuses to look into, and what a rescan costs.

A checkpoint name that is a link (out of the watched dir, or anywhere) is never followed; a
checkpoint holding a link out of itself, or a FIFO, socket or device, is refused before any of
its files is opened; two names for one step are refused naming all of them; and a rescan with
nothing new looks at the dir and at the unfinished checkpoints only, however many finished ones
the dir holds.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from ckpt_action.watch import markers, scanner
from ckpt_action.watch.scanner import Scanner

PATTERN = re.compile(r"checkpoint[-_](\d+)")
HANG = 30.0
"""How long a look may stay silent before the test says it hangs (a look takes milliseconds)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def trainer_like(d: Path, step: int) -> Path:
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(b"m" * 10)
    (d / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return d


def scanned(root: Path, clock: Clock | None = None) -> tuple[Scanner, dict[str, scanner.Checkpoint]]:
    clock = clock or Clock()
    scan = Scanner(root, PATTERN, settle=1.0, clock=clock)
    scan.scan()
    clock.now += 100
    return scan, {c.name: c for c in scan.scan()}


def test_a_checkpoint_name_linking_out_of_the_dir_is_refused_naming_it(tmp_path):
    secret = trainer_like(tmp_path / "secret", 3)
    (secret / "id_rsa").write_text("PRIVATE KEY")
    out = tmp_path / "out"
    trainer_like(out / "checkpoint-2", 2)
    (out / "checkpoint-3").symlink_to("../secret")
    scan, found = scanned(out)
    assert found["checkpoint-2"].ready
    assert not found["checkpoint-3"].ready
    assert "checkpoint-3" in scan.refused and "link" in scan.refused["checkpoint-3"]
    assert str(secret) in scan.refused["checkpoint-3"]


def test_a_checkpoint_holding_a_link_out_of_itself_is_refused_naming_it(tmp_path):
    (tmp_path / "id_rsa").write_text("PRIVATE KEY")
    out = tmp_path / "out"
    d = trainer_like(out / "checkpoint-4", 4)
    (d / "key").symlink_to(tmp_path / "id_rsa")
    scan, found = scanned(out)
    assert not found["checkpoint-4"].ready
    assert "key" in scan.refused["checkpoint-4"] and "outside" in scan.refused["checkpoint-4"]


def test_a_link_inside_a_checkpoint_to_its_own_file_is_taken(tmp_path):
    d = trainer_like(tmp_path / "checkpoint-4", 4)
    (d / "alias.safetensors").symlink_to("model.safetensors")
    scan, found = scanned(tmp_path)
    assert found["checkpoint-4"].ready and not scan.refused


def _in_thread(fn) -> dict[str, object]:
    done: dict[str, object] = {}

    def run() -> None:
        done["value"] = fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG)
    return done


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_trainer_state_json_is_refused_and_never_opened(tmp_path):
    d = tmp_path / "checkpoint-1"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"m")
    os.mkfifo(d / "trainer_state.json")
    try:
        done = _in_thread(lambda: scanned(tmp_path))
        assert "value" in done, "the scan hangs on the FIFO"
        scan, found = done["value"]
        assert not found["checkpoint-1"].ready
        assert "trainer_state.json" in scan.refused["checkpoint-1"]
        assert "FIFO" in scan.refused["checkpoint-1"]
    finally:  # a scan stuck in open() is let go
        fd = os.open(d / "trainer_state.json", os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize(("fmt", "name", "commit_files"), [
    ("trainer", "trainer_state.json", False), ("accelerate", "random_states_0.pkl", False),
    ("orbax", "commit_success.txt", True), ("orbax", "_CHECKPOINT_METADATA", False)])
def test_a_marker_that_became_a_fifo_since_the_scan_is_not_opened_blocking(tmp_path, fmt, name, commit_files):
    """The scan's lstat saw a file; a FIFO took its place before the marker is read: the read
    is non-blocking, so it answers 'not complete' instead of waiting for a writer."""
    d = tmp_path / "checkpoint-1"
    d.mkdir()
    os.mkfifo(d / name)
    try:
        done = _in_thread(lambda: markers.has_marker(fmt, d, commit_files=commit_files))
        assert "value" in done, f"reading {name} hangs on the FIFO"
        assert done["value"][0] is False
    finally:
        fd = os.open(d / name, os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)


def test_two_names_for_one_step_are_refused_naming_all_of_them(tmp_path):
    for name in ("checkpoint_5", "checkpoint-5", "checkpoint-05"):
        trainer_like(tmp_path / name, 5)
    trainer_like(tmp_path / "checkpoint-6", 6)
    scan, found = scanned(tmp_path)
    assert found["checkpoint-6"].ready
    for name in ("checkpoint_5", "checkpoint-5", "checkpoint-05"):
        assert not found[name].ready
        for other in ("checkpoint_5", "checkpoint-5", "checkpoint-05"):
            assert other in scan.refused[name]
        assert "step 5" in scan.refused[name]


@pytest.mark.parametrize("step", ["\u0663", "\uff15", "9" * 200], ids=["arabic-indic", "fullwidth", "200-digits"])
def test_a_step_in_other_digits_than_ascii_is_refused_naming_it(tmp_path, step):
    """The default pattern's ``\\d`` matches other scripts' digits, which ``int`` reads ('\u0663'
    is 3): such a checkpoint is refused naming it, never pushed as another step's folder, and
    200 digits do not stop the watch (``int`` would take them past the largest step)."""
    name = f"checkpoint-{step}"
    trainer_like(tmp_path / name, 3)
    trainer_like(tmp_path / "checkpoint-3", 3)
    scan, found = scanned(tmp_path)
    assert name not in found and found["checkpoint-3"].ready
    assert "ASCII digits" in scan.refused[name] and ascii(name)[1:-1][:40] in scan.refused[name]
    assert "checkpoint-3" not in scan.refused


class Counting:
    """Counts the calls that look at the disk, per function."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: dict[str, int] = {}
        for module, name in ((os, "scandir"), (os, "walk"), (os, "stat"), (os, "lstat"), (os, "listdir"),
                             (os, "open")):
            self._wrap(monkeypatch, module, name)

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> None:
        real = getattr(module, name)

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def _rescan_cost(root: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    for step in range(min(n, 10)):
        trainer_like(root / f"checkpoint-{step}", step)
    for step in range(10, n):  # the rest as bare dirs: what a finished one holds is never looked at again
        (root / f"checkpoint-{step}").mkdir()
    unfinished = root / f"checkpoint-{n}"
    unfinished.mkdir()
    (unfinished / "model.safetensors").write_bytes(b"half")
    past = os.stat(root).st_mtime - 60  # the dir's last change is old enough to trust its mtime
    os.utime(root, (past, past))
    clock = Clock()
    scan = Scanner(root, PATTERN, settle=1.0, clock=clock)
    for c in scan.scan():
        if c.step < n:
            scan.finish(c.name)  # pushed: the watcher marks it so
    clock.now += 100
    scan.scan()
    with monkeypatch.context() as m:
        counting = Counting(m)
        clock.now += 100
        scan.scan()
    assert counting.calls.get("scandir") == 1, counting.calls  # the unfinished checkpoint's, not the dir's
    return counting.total


def test_a_rescan_with_nothing_new_looks_at_the_dir_and_the_unfinished_only(tmp_path, monkeypatch):
    """10 finished checkpoints or 10,000: a rescan costs the same few calls (the issue's 10,000
    cost 45% of a core when each was walked on every rescan)."""
    small = _rescan_cost(tmp_path / "small", 10, monkeypatch)
    large = _rescan_cost(tmp_path / "large", 10_000, monkeypatch)
    assert large == small, (small, large)
    assert large < 20
