r"""Follow one dir's checkpoints from their first file to complete.

Each scan lists the entries whose whole name matches the pattern (its one group is the
step), tells the dir's framework (:func:`.markers.detect`, unless named), and records each
checkpoint's files with their sizes and mtimes. A checkpoint is **ready** when it carries
its framework's marker and nothing in it changed for the quiet period: ``settle`` seconds
for a framework without a marker (``plain``), at most ``MARKER_SETTLE`` seconds for the
others (a rank's last files may land just after the marker). The scanner only reads; it
keeps what it saw so the watcher can tell whether a checkpoint changed while it was pushed
(:meth:`Scanner.unchanged`).

What it never does: follow a link (a checkpoint name that is a link is refused, wherever it
points; so is a checkpoint holding a link out of itself), open a FIFO, socket or device
(looked at with ``lstat``; refused), take two names for one step (``checkpoint_5`` and
``checkpoint-5`` would both land as ``checkpoint-5``: both refused, each message naming all),
or read a step in anything but ASCII digits (``checkpoint-٣``, which ``\d`` matches and
``int`` reads as 3: refused, naming it).
Refusals are in :attr:`Scanner.refused`, each one line saying what to change.

What a rescan costs: one ``stat`` of the dir, which is listed again only when its mtime says
its entries changed (or the mtime is too recent to trust, within :data:`RACY_NS` of the
listing), and one walk of each checkpoint not finished yet. A checkpoint the watcher is done
with (:meth:`Scanner.finish`: pushed, skipped, failed) is not looked into again, so ten
thousand finished checkpoints on disk cost what ten do.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import param, quoted
from ..names import COUNT_FORM, count_text
from . import markers

MARKER_SETTLE = 2.0
"""Longest quiet period once a framework's marker is there (``--settle`` if shorter)."""

RACY_NS = 2_000_000_000
"""A dir whose mtime is this close to (or after) the time it was listed is listed again next
time: an entry made in the same tick of the filesystem's clock as the listing leaves the
mtime as it was."""

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
    inode: int = 0
    finished: bool = False
    """The watcher is done with it (pushed, skipped or failed): not looked into again."""
    problem: str | None = None
    """Why its own files make it a checkpoint watch will not push (a link out, a FIFO)."""


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
        self.refused: dict[str, str] = {}
        """Checkpoints watch will not push, each with why and what to change."""
        self._listed: tuple[tuple[int, int], list[os.DirEntry[str]]] | None = None

    def finish(self, name: str) -> None:
        """The watcher is done with ``name``: its files are not looked at again (a new dir
        under the same name is a new checkpoint)."""
        ckpt = self.checkpoints.get(name)
        if ckpt is not None:
            ckpt.finished = True

    def _entries(self) -> list[os.DirEntry[str]]:
        """The dir's entries: listed again only when its mtime (or inode) changed, or is too
        recent to trust."""
        try:
            st = os.stat(self.local_dir)
        except OSError:  # not created yet (or not readable now): nothing to push yet
            self._listed = None
            return []
        key = (st.st_ino, st.st_mtime_ns)
        if self._listed is not None and self._listed[0] == key:
            return self._listed[1]
        listed_at = time.time_ns()
        try:
            with os.scandir(self.local_dir) as it:
                entries = list(it)
        except OSError:
            self._listed = None
            return []
        self._listed = (key, entries) if listed_at - st.st_mtime_ns > RACY_NS else None
        return entries

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
        misnamed: dict[str, str] = {}
        entries = self._entries()
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
            step = count_text(m.group(1) or "")
            if step is None:  # '\d' takes other scripts' digits ('٣'), which int() reads as 3
                misnamed[entry.name] = (f"{quoted(entry.name, 80)}: its step {quoted(m.group(1), 40)} is not"
                                        f" {COUNT_FORM}: save it as checkpoint-N with N in ASCII digits")
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
                inode = entry.inode()
            except OSError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                continue
            is_file = stat.S_ISREG(mode)
            ckpt = self.checkpoints.get(entry.name)
            if ckpt is None or ckpt.is_file != is_file or ckpt.inode != inode:
                ckpt = Checkpoint(entry.name, step, Path(entry.path), is_file, inode=inode)
            present[entry.name] = ckpt
        self.checkpoints = present
        self.saving = saving
        for ckpt in present.values():
            if ckpt.finished:
                continue
            if os.path.islink(ckpt.path):
                ckpt.snapshot, ckpt.problem = None, None
                continue
            snap, ckpt.problem = markers.survey(ckpt.path)
            if snap != ckpt.snapshot:
                ckpt.snapshot, ckpt.quiet_since = snap, now
            names = [ckpt.name] if ckpt.is_file else [Path(p).name for p in (snap or {})]
            ckpt.framework = markers.framework_of(names, is_file=ckpt.is_file)
        self.refused = {**misnamed, **self._refusals(present)}
        if self.named is None:
            found = markers.detect(c.framework for c in present.values())
            if found is not None:
                self.detected = found
        self.commit_files = any("commit_success.txt" in (c.snapshot or {}) for c in present.values())
        for ckpt in present.values():
            if ckpt.finished:
                continue
            if ckpt.name in self.refused:
                ckpt.ready, ckpt.why = False, self.refused[ckpt.name]
                continue
            self._judge(ckpt, now, writer_gone)
        return sorted(present.values(), key=lambda c: (c.step, c.name))

    def _refusals(self, present: dict[str, Checkpoint]) -> dict[str, str]:
        """What watch will not push, and why (see the module docstring)."""
        where = param("local_dir")
        refused: dict[str, str] = {}
        by_step: dict[int, list[str]] = {}
        for ckpt in present.values():
            by_step.setdefault(ckpt.step, []).append(ckpt.name)
            if ckpt.finished:
                continue
            if os.path.islink(ckpt.path):
                target = os.path.realpath(ckpt.path)
                root = os.path.realpath(self.local_dir)
                out = "outside" if os.path.commonpath([root, target]) != root else "inside"
                refused[ckpt.name] = (f"{ckpt.name} is a link to {target} ({out} {where}), and watch never follows"
                                      f" a link: save the checkpoint itself in {where}, or remove the link")
            elif ckpt.problem:
                refused[ckpt.name] = f"{ckpt.name}: {ckpt.problem}: remove it from the checkpoint"
        for step, names in by_step.items():
            if len(names) > 1:
                listed = ", ".join(sorted(names))
                for name in names:
                    if not present[name].finished:
                        refused[name] = (f"{listed} are all step {step}, and each would land as checkpoint-{step}:"
                                         " keep one name per step (remove or rename the others)")
        return refused

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
