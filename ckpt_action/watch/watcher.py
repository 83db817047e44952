"""The watch loop: push each complete checkpoint once, in step order; stop within the grace period.

Every ``poll`` seconds the loop scans the dir (:class:`.scanner.Scanner`), and when the
uploader is idle hands it the next ready checkpoint, pushed as ``checkpoint-STEP`` (so
``latest`` and ``pull`` find it whatever the local name). After a push it checks that the
files did not change while they were hashed and uploaded; if they did, the checkpoint is
pushed again once it is complete and quiet. A push records the evaluation metrics the
Trainer logged at that step (``trainer_state.json``'s ``log_history``), as the callback's do.
With ``keep_last``, ``keep_every`` or ``keep_best`` (prune's rules, a union) it prunes on the
Hub after pushes, the last one too when the training has exited by itself (prune never
deletes what a tag or a promotion holds; a grace period is for pushes, not prunes).

**The commit quota.** The Hub takes at most ``commits_per_hour`` commits per repo an hour
(128). When more checkpoints are ready than the hour has commits left, or once the Hub
answered 429 to a commit, the watcher pushes only the newest ready checkpoint when it can,
and reports the older ones as skipped; a quota's 429 never fails the run.

**Stopping.** :meth:`Watcher.stop` (or SIGTERM/SIGINT under :meth:`Watcher.run`) starts the
grace period: the newest ready checkpoint is pushed first, a save still being written is
waited for, and at ``grace`` seconds the upload in flight is killed (a push cut short
commits nothing that ``latest`` takes as complete) and what was left is reported. The log
says the signal and the seconds left, then per checkpoint ``checkpoint-N durable at SHA`` or
why not (:mod:`.preempt`, shared with the Trainer callback); ``CKPT_PREEMPT_DEADLINE``, when
set, replaces the grace; an older checkpoint's push in flight yields to the newest when both
cannot land by the deadline at the measured rate. When the training command exits by
itself, everything ready is pushed, without a deadline.

About 600 lines on purpose: the loop, its stop (and what a preemption notice says), and its
report are one state machine, read best in one place.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..errors import InputError, param
from ..options import Retention

if TYPE_CHECKING:
    from ckpt_action.client import Client
from . import markers, preempt
from .scanner import Checkpoint, Scanner, Snapshot
from .uploader import ProcessUploader, ThreadUploader

COMMITS_PER_HOUR = 128
"""The Hub's commit quota per repo and hour."""
HOUR = 3600.0
SAVE_IN_PROGRESS = 5.0
"""Once stopping, a checkpoint not complete yet that changed within this many seconds is a
save in progress, waited for (within the grace period); one quiet for longer is left
(``Watcher(stalled_after=)``)."""
FORWARDED = ("SIGHUP", "SIGUSR1", "SIGUSR2")
"""Signals passed on to the training command as they come (SIGTERM and SIGINT also stop the watch)."""


@dataclass
class WatchReport:
    """What a watch did: ``pushed`` (name, Hub subfolder, revision) in push order; ``skipped``
    (coalesced under the commit quota); ``failed`` (name: error); ``left`` (complete, not
    pushed when it stopped: name: why); ``incomplete`` (never complete); ``pruned``;
    ``refused`` (never pushed, and what to change: a link, a FIFO, two names for one step)."""

    pushed: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    framework: str = "plain"
    command_status: int | None = None
    uploader: str = ""
    priority: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every complete checkpoint was pushed, or skipped for the commit quota."""
        return not self.failed and not self.refused and all(
            why.startswith("commit quota") for why in self.left.values())

    def exit_code(self) -> int:
        """The command's status (a signal N as 128+N), else 0; 1 when that is 0 and a push failed."""
        status = self.command_status
        if status is not None and status != 0:
            return 128 - status if status < 0 else status
        return 0 if self.ok else 1

    def as_dict(self) -> dict[str, Any]:
        return {"pushed": [{"name": n, "subfolder": s, "revision": r} for n, s, r in self.pushed],
                "skipped": self.skipped, "failed": self.failed, "left": self.left, "incomplete": self.incomplete,
                "pruned": self.pruned, "refused": self.refused, "framework": self.framework,
                "command_status": self.command_status}


class _Flag:
    """A stop flag set from a signal handler: a plain attribute, no lock (an Event's lock, taken
    by a handler interrupting the very ``set()`` it runs on, would deadlock; nothing waits on it)."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


def _bytes(path: Path) -> int:
    """The bytes of a checkpoint (a dir, or a file)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def compile_pattern(pattern: str | None, fmt: str) -> re.Pattern[str]:
    """The checkpoint name pattern (whole names), refused unless it has exactly one group."""
    text = pattern if pattern is not None else markers.DEFAULT_PATTERNS.get(fmt, r"checkpoint-(\d+)")
    try:
        compiled = re.compile(text)
    except re.error as exc:
        raise InputError(f"{param('pattern')} is not a regular expression ({exc})", param="pattern") from None
    if compiled.groups != 1:
        raise InputError(f"{param('pattern')} needs exactly one capture group, for the step (e.g. "
                         rf"'step_(\d+)'); {_as_typed(text)} has {compiled.groups}", param="pattern")
    return compiled


def _as_typed(text: str) -> str:
    """A pattern in a message as the user typed it (a repr would double each backslash), in
    quotes; one with a control or non-ASCII character as a repr."""
    return f"'{text}'" if text.isascii() and text.isprintable() and len(text) <= 80 else repr(text)


def _seconds(value: float, name: str, *, minimum: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{param(name)} must be a number of seconds, not {value!r}", param=name) from None
    if not number >= minimum or number == float("inf"):
        raise InputError(f"{param(name)} must be a number of seconds >= {minimum:g}, not {value!r}",
                         param=name)
    return number


class Watcher:
    """Push every complete checkpoint ``local_dir`` gets to ``repo``, from this process.

    Uploads run in a child process at a lower priority (``uploader="process"``, the
    default; ``"thread"`` where a process cannot be started). A training script starts and
    stops it, or uses it as a context manager::

        with ckpt.Watcher("out", repo="org/run", keep_last=3) as watcher:
            trainer.train()
        print(watcher.report.pushed)

    The arguments are `ckpt-action watch`'s options (``pattern`` with exactly one
    group for the step; ``format`` one of ``auto``, ``trainer``, ``accelerate``,
    ``lightning``, ``dcp``, ``orbax``, ``plain``; ``settle`` and ``grace`` in seconds).
    ``stalled_after``: once stopping, a checkpoint not complete that has not changed for this
    many seconds is taken as a save that died, not one in progress, and no longer waited for.
    """

    def __init__(self, local_dir: str | os.PathLike[str], repo: str, *, pattern: str | None = None,
                 format: str = "auto", settle: float = 10.0, grace: float = 25.0,
                 keep_last: int | None = None, keep_every: int | None = None, keep_best: str | None = None,
                 commits_per_hour: int = COMMITS_PER_HOUR, private: bool = True,
                 endpoint: str | None = None, token: str | None = None, timeout: float | None = None,
                 retries: int | None = None, poll: float = 0.5, uploader: str = "process",
                 stalled_after: float = SAVE_IN_PROGRESS, log: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, client: Client | None = None,
                 retention: Retention | None = None) -> None:
        from ckpt_action import names
        from ckpt_action.client import connection_of, retention_of

        # client= and retention= stand for the loose keywords (given both: an InputError).
        hub = connection_of(client, endpoint=endpoint, token=token, timeout=timeout, retries=retries)
        given = retention_of(retention, keep_last=keep_last, keep_every=keep_every, keep_best=keep_best)

        if format not in markers.FORMATS:
            raise InputError(f"{param('format')} must be one of {', '.join(markers.FORMATS)}, not {format!r}",
                             param="format")
        self.local_dir = Path(local_dir)
        if self.local_dir.exists() and not self.local_dir.is_dir():
            raise InputError(f"{param('local_dir')} {str(self.local_dir)!r} is a file: name the dir the training "
                             "saves its checkpoints in", param="local_dir")
        self.repo = names.repo_id(repo)
        self.pattern = compile_pattern(pattern, format)
        self.settle = _seconds(settle, "settle")
        self.grace = _seconds(grace, "grace")
        self.poll = _seconds(poll, "poll", minimum=0.01)
        self.stalled_after = _seconds(stalled_after, "stalled_after")
        from ckpt_action.client import retention_rules

        retention = given
        if retention.wanted:
            retention_rules(retention)  # prune's own checks of them, before anything starts
        self.retention = retention if retention.wanted else None
        self.keep_last = retention.keep_last
        if isinstance(commits_per_hour, bool) or not isinstance(commits_per_hour, int) or commits_per_hour < 1:
            raise InputError(f"{param('commits_per_hour')} must be a whole number >= 1", param="commits_per_hour")
        self.commits_per_hour = commits_per_hour
        if uploader not in ("process", "thread"):
            raise InputError(f"{param('uploader')} must be 'process' or 'thread'", param="uploader")
        self.uploader_kind = uploader
        self.private = private
        self.hub = hub
        self.log = log or (lambda message: None)
        self.clock = clock
        self.scanner = Scanner(self.local_dir, self.pattern, fmt=format, settle=self.settle, clock=clock)
        self.report = WatchReport()
        self._done: dict[str, Snapshot] = {}
        self._skipped: set[str] = set()
        self._commits: deque[float] = deque()
        self._quota_until = 0.0
        self._inflight: tuple[str, Checkpoint | None, Snapshot | None, Path | None] | None = None
        self._prune_due = False
        self._coalesce = False
        self._stop = _Flag()
        self._deadline: float | None = None
        # CKPT_PREEMPT_DEADLINE, checked before anything starts.
        self._env_deadline = preempt.deadline_from_env()
        self._notice: preempt.Notice | None = None
        self._announced = False
        self._rate = preempt.Rate()
        self._yielded: set[str] = set()
        self._push_began: tuple[float, int] | None = None  # (clock, bytes) of the push in flight
        self._durable_at_stop: str | None = None
        self._restart = 5.0  # seconds the upload process took to start (measured at each start)
        self._writer_gone = False
        self._thread: threading.Thread | None = None
        self._uploader: ThreadUploader | None = None

    # --- the Python API -------------------------------------------------------------------

    def start(self) -> Watcher:
        """Start watching on a background thread (uploads in their own process)."""
        self._uploader = self._new_uploader()
        self._thread = threading.Thread(target=self._guarded_loop, name="ckpt-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self, grace: float | None = None) -> WatchReport:
        """Push what is complete (newest first), wait for a save in progress, stop within
        ``grace`` seconds (default: the watcher's), and answer the report."""
        self.request_stop(None if grace is None else _seconds(grace, "grace"))
        if self._thread is not None:
            self._thread.join()
        return self.report

    def finish(self, timeout: float | None = None) -> WatchReport:
        """The training ended by itself (not a preemption): push every complete checkpoint
        still waiting, prune as ``keep_last``/``keep_every``/``keep_best`` say (a stop's grace
        period never prunes), and answer the report. No grace period cuts a push short, each
        being bounded by its own timeouts and retries; ``timeout`` (seconds) bounds the whole,
        after which it stops as :meth:`stop` does at the end of its grace period."""
        limit = None if timeout is None else _seconds(timeout, "timeout")
        self._writer_gone = True
        if self._thread is not None:
            self._thread.join(limit)
            if self._thread.is_alive():
                self.request_stop(0)
                self._thread.join()
        return self.report

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """A block that ended normally is a training that ended by itself (:meth:`finish`);
        one that raised, or was interrupted, stops within the grace period (:meth:`stop`)."""
        if exc_type is None:
            self.finish()
        else:
            self.stop()

    def request_stop(self, grace: float | None = None, signal_name: str = "stop") -> None:
        """Start the grace period (from a signal handler too: it only sets fields and an
        Event no other code holds). Without ``grace``, ``CKPT_PREEMPT_DEADLINE`` when set,
        else the watcher's grace."""
        if self._deadline is None:
            self._notice = preempt.Notice.begin(signal_name, self.grace if grace is None else grace, "--grace",
                                                self._env_deadline if grace is None else None, now=self.clock())
            self._deadline = self._notice.deadline
        self._stop.set()

    # --- the command ------------------------------------------------------------------------

    def run(self, command: Sequence[str] = ()) -> WatchReport:
        """Watch until SIGTERM/SIGINT, or, with ``command``, run it as a child, forward signals
        to it, and stop when it exits. Call from the main thread (it sets signal handlers)."""
        child: subprocess.Popen[bytes] | None = None
        if command:
            try:
                child = subprocess.Popen(list(command))
            except OSError as exc:
                raise InputError(f"the training command cannot start: {command[0]}: {exc.strerror or exc}: check"
                                 " the command after '--'") from None
        handlers: dict[int, Any] = {}

        def on_stop(signum: int, frame: FrameType | None) -> None:
            if child is not None and child.poll() is None:
                with contextlib.suppress(OSError):
                    child.send_signal(signum)
            self.request_stop(signal_name=signal.Signals(signum).name)

        def forward(signum: int, frame: FrameType | None) -> None:
            if child is not None and child.poll() is None:
                with contextlib.suppress(OSError):
                    child.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            handlers[sig] = signal.signal(sig, on_stop)
        for name in FORWARDED:
            if hasattr(signal, name):
                handlers[getattr(signal, name)] = signal.signal(getattr(signal, name), forward)
        try:
            self._uploader = self._new_uploader()
            self._loop(child)
        finally:
            for number, old in handlers.items():
                signal.signal(number, old)
            if child is not None and child.poll() is None:
                child.kill()
            if child is not None:
                self.report.command_status = child.wait()
        return self.report

    # --- the loop ---------------------------------------------------------------------------

    def _guarded_loop(self) -> None:
        """The loop on the API's thread: an unexpected error ends the watch, said in the report
        (``failed["watch"]``) and the log, rather than silently."""
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - reported to the caller through stop()
            self.report.failed["watch"] = f"the watch stopped: {type(exc).__name__}: {exc}"
            self.log(self.report.failed["watch"])

    def _new_uploader(self) -> ThreadUploader:
        if self.uploader_kind == "process":
            try:
                began = time.monotonic()
                uploader: ThreadUploader = ProcessUploader()
                self._restart = time.monotonic() - began
            except OSError as exc:
                self.log(f"cannot start the upload process ({exc}): uploading from a thread of this process")
                uploader = ThreadUploader()
        else:
            uploader = ThreadUploader()
        self.report.uploader, self.report.priority = uploader.kind, uploader.priority
        return uploader

    def _loop(self, child: subprocess.Popen[bytes] | None = None) -> None:
        assert self._uploader is not None
        try:
            while True:
                if child is not None and not self._writer_gone and child.poll() is not None:
                    self._writer_gone = True
                    self.log(f"the training command exited with status {child.returncode}: pushing what is complete")
                if self._notice is not None and not self._announced:
                    self._announced = True
                    self._durable_at_stop = self.report.pushed[-1][1] if self.report.pushed else None
                    self.log(self._notice.announce(self.clock()))
                if self._notice is not None:
                    self._uploader.hurry()  # the deadline before the CPU others leave (once per child)
                ckpts = self._scan()
                self.report.framework = self.scanner.framework
                self._maybe_yield(ckpts)
                answer = self._uploader.poll(timeout=self.poll if self._uploader.busy else 0)
                if answer is not None:
                    self._answered(answer)  # the next push is chosen from a new look at the dir
                elif not self._uploader.busy:
                    self._next(ckpts)
                if self._finished(ckpts):
                    break
                if self._deadline is not None and self.clock() >= self._deadline:
                    self._out_of_time(ckpts)
                    break
                if not self._uploader.busy:
                    time.sleep(self.poll)
        finally:
            if self._inflight is not None:
                self._uploader.kill()
                self._end_inflight()
            self._uploader.close()

    def _scan(self) -> list[Checkpoint]:
        """The scanner's look, its refusals said once each (and kept in the report as they stand)."""
        ckpts = self.scanner.scan(writer_gone=self._writer_gone)
        for name, why in self.scanner.refused.items():
            if self.report.refused.get(name) != why:
                self.log(f"not pushed: {why}")
        self.report.refused = dict(self.scanner.refused)
        return ckpts

    def _stopping(self) -> bool:
        return self._stop.is_set() or self._writer_gone

    def _waiting(self, ckpts: list[Checkpoint]) -> list[Checkpoint]:
        return [c for c in ckpts if c.ready and self._done.get(c.name) != c.snapshot and c.name not in self._skipped
                and c.name not in self.report.failed]

    def _budget(self, now: float) -> int:
        while self._commits and self._commits[0] <= now - HOUR:
            self._commits.popleft()
        if now < self._quota_until:
            return 0
        return self.commits_per_hour - len(self._commits)

    def _next(self, ckpts: list[Checkpoint]) -> None:
        waiting = self._waiting(ckpts)
        now = self.clock()
        budget = self._budget(now)
        if waiting and budget > 0:
            if len(waiting) > budget or self._coalesce:
                for older in waiting[:-1]:
                    self._skipped.add(older.name)
                    self.scanner.finish(older.name)
                    self.report.skipped.append(older.name)
                    self.log(f"commit quota: skipping {older.name}, pushing the newer {waiting[-1].name}")
                waiting = waiting[-1:]
            self._push(waiting[-1] if self._stop.is_set() else waiting[0])
        elif self._prune_wanted(budget):
            self._prune_due = False
            self._inflight = ("prune", None, None, None)
            assert self._uploader is not None and self.retention is not None
            self._uploader.submit({"op": "prune", "repo": self.repo, **self.retention.keywords(), "hub": self.hub})

    def _prune_wanted(self, budget: int) -> bool:
        """A prune is due after a push: while training runs, or after it exited by itself (no
        deadline then); never in a grace period, which is for pushes."""
        return self._prune_due and budget > 1 and self.retention is not None and not self._stop.is_set()

    def _push(self, ckpt: Checkpoint) -> None:
        staging = None
        source = ckpt.path
        if ckpt.is_file:  # a file per checkpoint (Lightning): pushed as a folder holding it
            staging = Path(tempfile.mkdtemp(prefix="ckpt-watch-"))
            try:
                os.link(ckpt.path, staging / ckpt.name)
            except OSError:
                shutil.copy2(ckpt.path, staging / ckpt.name)
            source = staging
        self.log(f"pushing {ckpt.name} as checkpoint-{ckpt.step}")
        self._inflight = (ckpt.name, ckpt, ckpt.snapshot, staging)
        self._push_began = (self.clock(), _bytes(ckpt.path))
        assert self._uploader is not None
        self._uploader.submit({"op": "push", "local_dir": str(source), "repo": self.repo, "step": ckpt.step,
                               "private": self.private, "hub": self.hub})

    def _end_inflight(self) -> None:
        if self._inflight is not None:
            name, ckpt, _, staging = self._inflight
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            if ckpt is not None:
                self.report.left.setdefault(name, "its push was cut short at the end of the grace period")
        self._inflight = None

    def _answered(self, answer: dict[str, Any]) -> None:
        assert self._inflight is not None
        name, ckpt, before, staging = self._inflight
        self._inflight = None
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        now = self.clock()
        if ckpt is None:  # a prune
            if answer.get("ok"):
                if answer.get("deleted"):
                    self._commits.append(now)
                    self.report.pruned.extend(answer["deleted"])
                    self.log(f"pruned {', '.join(answer['deleted'])}")
            elif answer.get("quota"):
                self._quota_until = now + float(answer.get("wait") or 60)
            else:
                self.log(f"prune failed (the watch goes on): {answer.get('error')}")
            return
        if answer.get("ok"):
            self._commits.append(now)
            self._coalesce = False
            if self._push_began is not None:
                self._rate.add(self._push_began[1], now - self._push_began[0])
            if not self.scanner.unchanged(ckpt, before):
                self.log(f"{name} changed while it was pushed: pushing it again once it is complete")
                return
            assert before is not None
            self._done[name] = before
            self.scanner.finish(name)
            self.report.pushed.append((name, answer["subfolder"], answer["revision"]))
            self.report.left.pop(name, None)
            self._prune_due = True
            self.log(f"pushed {name}: {self.repo}/{answer['subfolder']} at {answer['revision']}")
        elif answer.get("gone"):
            self.log(f"{name} was deleted before it was pushed")
        elif answer.get("quota"):
            self._quota_until = now + float(answer.get("wait") or 60)
            self._coalesce = True
            self.log(f"the Hub's commit quota is reached: {name} waits, and only the newest checkpoint is pushed"
                     " when commits are allowed again")
        else:
            self.report.failed[name] = str(answer.get("error"))
            self.scanner.finish(name)
            self.log(f"push of {name} failed: {answer.get('error')}")

    def _in_progress(self, ckpts: list[Checkpoint]) -> bool:
        """A save is still being written: some checkpoint not ready, which changed lately (or
        whose writer is still running)."""
        if self._writer_gone:
            return False
        now = self.clock()
        return any(not c.ready and c.snapshot is not None and self._done.get(c.name) is None
                   and c.name not in self.scanner.refused and now - c.quiet_since < self.stalled_after
                   for c in ckpts) or any(
            now - since < self.stalled_after for _snap, since in self.scanner.saving.values())

    def _finished(self, ckpts: list[Checkpoint]) -> bool:
        if not self._stopping() or self._inflight is not None:
            return False
        # The round's scan may predate the stop: a save begun just before the signal would be
        # missed (neither pushed nor reported) were the loop to end on it. Look again.
        ckpts = self._scan()
        waiting = self._waiting(ckpts)
        budget = self._budget(self.clock())
        if (waiting and budget > 0) or self._prune_wanted(budget):
            return False
        if self._in_progress(ckpts):
            return False
        self._wrap_up(ckpts)
        return True

    def _out_of_time(self, ckpts: list[Checkpoint]) -> None:
        self.log(f"the grace period ({self.grace:g} s) is over")
        self._wrap_up(ckpts)

    def _wrap_up(self, ckpts: list[Checkpoint]) -> None:
        now = self.clock()
        for c in self._waiting(ckpts):
            why = "commit quota: the Hub takes no more commits this hour" if self._budget(now) <= 0 else \
                "not pushed within the grace period"
            self.report.left.setdefault(c.name, why)
        self.report.incomplete = [c.name for c in ckpts if not c.ready and self._done.get(c.name) is None
                                  and c.name not in self.report.left and c.name not in self.report.refused] + \
            sorted(self.scanner.saving)
        for name, why in self.report.left.items():
            self.log(f"not pushed: {name} ({why})")
        if self._notice is not None:
            self._say_durable()

    def _say_durable(self) -> None:
        """After a stop: for each checkpoint from the newest pushed before it on, whether it
        became durable and at which pin, or why not (the form the Trainer callback uses too)."""
        pushed = self.report.pushed
        names = [p[1] for p in pushed]
        first = names.index(self._durable_at_stop) if self._durable_at_stop in names else 0
        for _name, subfolder, revision in pushed[first:]:
            self.log(preempt.durable(subfolder, revision))
        for name, why in self.report.left.items():
            self.log(preempt.not_durable(name, why))
        for name in self.report.incomplete:
            self.log(preempt.not_durable(name, "its save was not complete when the watch stopped"))

    def _maybe_yield(self, ckpts: list[Checkpoint]) -> None:
        """Once stopping: an older checkpoint's push in flight yields to the newest ready one
        when both cannot land before the deadline at the upload rate measured so far (and the
        newest alone can): the upload is killed (a push cut short commits nothing) and the
        newest is pushed next."""
        if self._notice is None or self._inflight is None or self._push_began is None:
            return
        name, ckpt, _, _ = self._inflight
        if ckpt is None or name in self._yielded or self._uploader is None or self._uploader.kind != "process":
            return  # a push on a thread of this process cannot be cut short
        newer = [c for c in self._waiting(ckpts) if c.step > ckpt.step and c.name != name]
        if not newer:
            return
        newest = newer[-1]
        now = self.clock()
        began, size = self._push_began
        left = self._notice.left(now)
        rate = self._rate.per_second()
        if not preempt.should_yield(size, now - began, _bytes(newest.path), rate, left, self._restart):
            return
        assert self._uploader is not None and rate is not None
        self._yielded.add(name)
        why = (f"its push yielded to {newest.name}: both could not land in the {left:.1f} s left at the measured"
               f" {rate / 1e6:.1f} MB/s")
        self.log(f"{name}: {why}")
        self._uploader.kill()
        self._end_inflight()
        self.report.left[name] = why
        self._skipped.add(name)
        self.scanner.finish(name)
        self._uploader = self._new_uploader()
