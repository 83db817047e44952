"""Follow one dir's checkpoints from their first file to complete.

Each scan lists the entries whose whole name matches the pattern (its one group is the
step), tells the dir's framework (:func:`.markers.detect`, unless named), and records each
checkpoint's files with their sizes and mtimes. A checkpoint is **ready** when it carries
its framework's marker and nothing in it changed for the quiet period: ``settle`` seconds
for a framework without a marker (``plain``), at most ``MARKER_SETTLE`` seconds for the
others (a rank's last files may land just after the marker). The scanner only reads; it
keeps what it saw so the watcher can tell whether a checkpoint changed while it was pushed
(:meth:`Scanner.unchanged`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import markers

MARKER_SETTLE = 2.0
"""Longest quiet period once a framework's marker is there (``--settle`` if shorter)."""

Snapshot = dict[str, tuple[int, int]]


@dataclass
class Checkpoint:
    """One checkpoint the scanner follows."""

    name: str
    step: int
    path: Path
    is_file: bool
    snapshot: Snapshot | None = None
    quiet_since: float = 0.0
    ready: bool = False
    why: str = "new"
    framework: str | None = None


class Scanner:
    """The checkpoints of ``local_dir`` (see the module docstring).

    ``fmt``: a name from :data:`.markers.FORMATS` (``auto`` tells it from the dir).
    ``clock``: monotonic seconds (tests pass their own).
    """

    def __init__(self, local_dir: Path, pattern: re.Pattern[str], *, fmt: str = "auto", settle: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.local_dir = local_dir
        self.pattern = pattern
        self.named = fmt if fmt != "auto" else None
        self.detected: str | None = None
        self.settle = settle
        self.clock = clock
        self.checkpoints: dict[str, Checkpoint] = {}
        self.commit_files = False
        self.saving: dict[str, tuple[Snapshot | None, float]] = {}
        """Orbax's temporary dirs (``<step>.orbax-checkpoint-tmp*``): a save being written
        under another name, renamed into a checkpoint when done; each one's snapshot and
        since when it is unchanged (a stop waits for one that changed lately)."""

    @property
    def framework(self) -> str:
        """The dir's framework: named, told from its checkpoints, or ``plain`` until one is."""
        return self.named or self.detected or "plain"

    def quiet_needed(self) -> float:
        return self.settle if self.framework == "plain" else min(self.settle, MARKER_SETTLE)

    def scan(self, *, writer_gone: bool = False) -> list[Checkpoint]:
        """List the dir again; every checkpoint still there, in step order, with ``ready`` set.

        ``writer_gone``: the training has exited, so nothing changes any more: a checkpoint
        with its marker is ready at once (one without a marker still needs one).
        """
        now = self.clock()
        present: dict[str, Checkpoint] = {}
        try:
            entries = list(os.scandir(self.local_dir))
        except OSError:  # not created yet (or not readable now): nothing to push yet
            entries = []
        saving: dict[str, tuple[Snapshot | None, float]] = {}
        for entry in entries:
            if markers.ORBAX_TMP.fullmatch(entry.name):
                snap = markers.snapshot(Path(entry.path))
                was = self.saving.get(entry.name)
                saving[entry.name] = was if was is not None and was[0] == snap else (snap, now)
                continue
            m = self.pattern.fullmatch(entry.name)
            if m is None:
                continue
            try:
                is_file = entry.is_file()
                if not is_file and not entry.is_dir():
                    continue
            except OSError:
                continue
            ckpt = self.checkpoints.get(entry.name)
            if ckpt is None or ckpt.is_file != is_file:
                ckpt = Checkpoint(entry.name, int(m.group(1)), Path(entry.path), is_file)
            present[entry.name] = ckpt
        self.checkpoints = present
        self.saving = saving
        for ckpt in present.values():
            snap = markers.snapshot(ckpt.path)
            if snap != ckpt.snapshot:
                ckpt.snapshot, ckpt.quiet_since = snap, now
            names = [ckpt.name] if ckpt.is_file else [Path(p).name for p in (snap or {})]
            ckpt.framework = markers.framework_of(names, is_file=ckpt.is_file)
        if self.named is None:
            found = markers.detect(c.framework for c in present.values())
            if found is not None:
                self.detected = found
        self.commit_files = any("commit_success.txt" in (c.snapshot or {}) for c in present.values())
        for ckpt in present.values():
            self._judge(ckpt, now, writer_gone)
        return sorted(present.values(), key=lambda c: (c.step, c.name))

    def _judge(self, ckpt: Checkpoint, now: float, writer_gone: bool) -> None:
        fmt = self.framework
        if ckpt.snapshot is None:
            ckpt.ready, ckpt.why = False, "gone"
            return
        if not ckpt.snapshot:
            ckpt.ready, ckpt.why = False, "empty"
            return
        if (fmt == "lightning" and not ckpt.is_file) or (fmt != "lightning" and ckpt.is_file):
            ckpt.ready, ckpt.why = False, f"not a {fmt} checkpoint"
            return
        marked, why = markers.has_marker(fmt, ckpt.path, commit_files=self.commit_files)
        if not marked:
            ckpt.ready, ckpt.why = False, why
            return
        quiet = now - ckpt.quiet_since
        if writer_gone and fmt != "plain":
            ckpt.ready, ckpt.why = True, ""
        elif quiet < self.quiet_needed():
            ckpt.ready, ckpt.why = False, f"settling ({quiet:.1f} of {self.quiet_needed():g} s quiet)"
        else:
            ckpt.ready, ckpt.why = True, ""

    def unchanged(self, ckpt: Checkpoint, before: Snapshot | None) -> bool:
        """The checkpoint's files are as they were in ``before`` (sizes and mtimes): what was
        hashed and uploaded is what the folder holds."""
        return before is not None and markers.snapshot(ckpt.path) == before
