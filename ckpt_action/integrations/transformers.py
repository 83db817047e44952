"""transformers Trainer: push every save to the Hub in the background, resume from the Hub.

::

    from ckpt_action.integrations.transformers import CheckpointCallback, resume_from_hub

    trainer = Trainer(..., callbacks=[CheckpointCallback(repo="org/run")])
    trainer.train(resume_from_checkpoint=resume_from_hub("org/run", args.output_dir))

Each save ``output_dir/checkpoint-N`` is pushed as ``checkpoint-N`` with the same
guarantees as ``ckpt-action push`` (manifest last, pinned SHA, retries), while training
goes on. Unlike Trainer's own ``push_to_hub``/``hub_strategy`` it reports the SHA, marks
completeness, and resumes from the Hub. Needs the ``transformers`` extra: ``pip install ".[transformers]"``
in a checkout, or ``pip install "ckpt-action[transformers] @ git+https://github.com/OWNER/ckpt-action@v1"``.

Over 400 lines on purpose: most of it is the one callback class and its user-facing
docstring, whose Trainer hooks share the push queue's state and read best together.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ckpt_action import names
from ckpt_action.client import (
    Client,
    active_wandb_run,
    connection_of,
    pulled_checkpoint,
    retention_of,
    retention_rules,
    trainer_metrics,
)
from ckpt_action.options import Retention

from ..errors import CkptError, InputError, RemoteError
from ..handle import CheckpointHandle
from ..progress import human, interactive, no_progress_lines
from ..settings import Settings
from ..watch import preempt
from ..watch.uploader import ProcessUploader
from . import multinode
from .pushqueue import Outcome, PushFailedError, PushQueue
from .sigterm import SigtermFlush

if TYPE_CHECKING:
    from ckpt_action.client import LatestResult

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ckpt_action.integrations.transformers needs transformers: install the extra, pip install"
        f" '.[transformers]' in a ckpt-action checkout ({exc})"
    ) from exc

__all__ = ["CheckpointCallback", "PushFailedError", "resume_from_hub"]

log = logging.getLogger("ckpt_action")
CHECKPOINT_PREFIX = "checkpoint"  # transformers.trainer_utils.PREFIX_CHECKPOINT_DIR
PER_PROCESS_COPIES = frozenset({"trainer_state.json", "training_args.bin"})
"""Files Trainer writes on each node's main process with fields of that process
(``is_world_process_zero``, its own arguments): the world main's copies are the
checkpoint's, the other nodes' are left out of a push from every process."""
STAGING_DIR = ".ckpt-action-push"
"""Under ``output_dir``: hard-linked copies of the checkpoints waiting or being pushed."""


@dataclass(frozen=True)
class _Job:
    step: int
    staged: Path
    size: int = 0


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _stage(src: Path, root: Path, skip: frozenset[str] = frozenset()) -> Path:
    """A copy of ``src`` under ``root`` made of hard links (a full copy where links fail),
    without the top-level files named in ``skip``.

    The push reads the copy, so Trainer may delete ``src`` (``save_total_limit``) while it
    uploads: the linked files live on until the copy is removed. A symlink is staged as a
    symlink, never dropped or followed, so the push sees the checkpoint as it would see
    ``src``: a link to a file inside is pushed as that file, and one it refuses (a linked
    dir, a link out of the checkpoint, a dangling one) fails the push naming it. An
    absolute link into ``src`` is made relative, so it still points inside the copy.
    """
    # No lock against the queue's worker, which removes ``root`` once it is empty: were it
    # removed between these two calls, make it again (once the copy is in it, it is not empty).
    # The worker then never waits on the thread that stages, which a SIGTERM may interrupt.
    while True:
        root.mkdir(parents=True, exist_ok=True)
        try:
            dest = Path(tempfile.mkdtemp(prefix=f"{src.name}-", dir=root))
            break
        except FileNotFoundError:
            continue
    real_src = os.path.realpath(src)
    for dirpath, dirs, files in os.walk(src):  # never descends into a linked dir: staged as a link below
        here = dest / Path(dirpath).relative_to(src)
        here.mkdir(exist_ok=True)
        for name in dirs + files:
            path = Path(dirpath) / name
            if dirpath == str(src) and name in skip:
                continue
            if path.is_symlink():
                os.symlink(_inside_relative(os.readlink(path), Path(dirpath), real_src), here / name)
            elif name in files:
                try:
                    os.link(path, here / name, follow_symlinks=False)
                except OSError:  # another filesystem, or links not allowed
                    shutil.copy2(path, here / name, follow_symlinks=False)
    return dest


def _inside_relative(target: str, parent: Path, real_src: str) -> str:
    """A link's target as the staged copy needs it: an absolute target inside the checkpoint
    becomes relative to the link's dir; any other target is kept, for the push to judge."""
    if not os.path.isabs(target):
        return target
    real = os.path.realpath(target)
    if real == real_src or real.startswith(real_src + os.sep):
        return os.path.relpath(real, os.path.realpath(parent))
    return target


class CheckpointCallback(TrainerCallback):
    """Push each checkpoint Trainer saves to ``repo`` as ``checkpoint-N``, in the background.

    - One push runs at a time, in save order. By default at most one waits behind it and
      a newer save replaces the waiting one: the replaced checkpoint is never pushed, is
      logged as a WARNING naming it (then, in ``on_save``), and listed in ``self.skipped``. With
      ``push_every_save=True`` every save is pushed, in order: up to ``max_waiting`` saves
      (default 2) wait behind the running push, and a save beyond that makes training
      wait in ``on_save`` until the oldest one starts. Each waiting save is a copy of hard
      links under ``output_dir/.ckpt-action-push/`` (no space on the same file system; a
      full copy where links fail), removed, with the dir once empty, as soon as its push
      ends. Only the world's main process (rank 0) pushes.
    - In a job of many processes (several nodes with ``save_on_each_node=True``, FSDP
      sharded state, DeepSpeed per-rank files) every process pushes its node's files of
      each save in step with the others (``push(distributed=True)``): one commit holding
      every rank's files, made before training goes on.
    - Uploads run in a child process at lower CPU and I/O priority (the uploader of
      ``ckpt-action watch``), so hashing and sending a checkpoint never holds the
      training's GIL; the process starts when training begins, so it is ready by the
      first save. ``self.upload_mode`` says ``"process"`` once one ran there. Where
      a process cannot be started (or with ``uploads="thread"``) they run on a thread of
      the training process, as before.
    - On SIGTERM (a preemption notice, a cancelled job) the handler only records the signal
      (:mod:`.sigterm` says why); a thread of its own gives the running and waiting pushes,
      the newest first, up to ``sigterm_grace`` seconds (default 25; ``CKPT_PREEMPT_DEADLINE``
      when set) to land, while a save being written or staged is finished and queued and
      training stops at its next step. It logs the seconds left, then per checkpoint
      ``checkpoint-N durable at SHA`` or why not, and the process goes on to what it did
      with SIGTERM before (the handler installed earlier, or the default: exit). A push cut
      short commits nothing. ``sigterm_grace=0`` installs no handler. Only in the main
      thread of the world's main process (of every process in a job of many).
    - Transfer progress is one line per push on stderr (``pushed checkpoint-N at SHA:
      size in s``); huggingface_hub's bars show only when stderr is a terminal. In a log,
      the callback turns huggingface_hub's bars off from ``on_train_begin`` to the end of
      training and back on then (a switch of the whole process: huggingface_hub has no
      per-call one), unless ``client_bars=True``.
    - The evaluation metrics Trainer logged at a save's step (``eval_loss``, ...: its
      ``trainer_state.json``'s ``log_history``) go into that checkpoint's manifest, for
      ``list``, ``latest --best`` and ``prune --keep-best``.
    - ``keep_last``, ``keep_every``, ``keep_best`` (``prune``'s rules, checked here) prune the
      repo after each push, from the pushing thread; a failed prune is logged, never the push's
      failure. ``card=True`` keeps the table of checkpoints in the repo's ``README.md`` with each
      push and prune. Neither runs in a job of many processes (pushes from every process).
    - Each push is recorded in ``self.pushed`` (handles, pinned to 40-hex SHAs), in
      ``state.log_history`` (``{"checkpoint": "checkpoint-N", "checkpoint_revision": SHA,
      "checkpoint_hub_url": URL, "step": N}``) and, with a W&B run active, as a pointer
      artifact with aliases ``latest`` and ``step-N``.
    - At the end of training it waits for the last push. A failed push raises
      :class:`PushFailedError` there (``on_failure="warn"`` logs it instead); it never
      leaves a partial checkpoint on the Hub, whose manifest comes last. Nothing is left
      in ``output_dir`` but Trainer's own checkpoints.
    - After a resume, ``state.log_history`` holds the revisions of earlier pushes too. A
      checkpoint cannot contain its own SHA (the SHA names the commit holding the
      checkpoint's bytes, so it exists only once they are fixed), but it holds every SHA
      recorded before it was saved: Trainer writes ``log_history`` into each checkpoint's
      ``trainer_state.json``. The resumed checkpoint's own SHA is added at
      ``on_train_begin`` from the record :func:`resume_from_hub`'s pull left in it. A push
      that landed after the resumed checkpoint was saved is on the Hub
      (``ckpt.list_checkpoints``), not in the history.

    Options are :func:`ckpt_action.ops.push`'s (``endpoint``, ``token``, ``private``,
    ``timeout``, ``retries``), defaulting from the same environment variables; they are
    checked here, so a bad one fails before training starts. ``artifact_name`` names the
    W&B pointer; ``log_to_wandb=False`` logs none.

    >>> callback = CheckpointCallback(repo="org/run")  # HF_ENDPOINT, HF_TOKEN as for push
    >>> callback
    CheckpointCallback(repo='org/run')

    then ``Trainer(model, args, train_dataset=ds, callbacks=[callback])``.
    """

    def __init__(
        self,
        repo: str,
        *,
        endpoint: str | None = None,
        token: str | None = None,
        private: bool = True,
        timeout: float | None = None,
        retries: int | None = None,
        on_failure: Literal["raise", "warn"] = "raise",
        log_to_wandb: bool = True,
        artifact_name: str | None = None,
        push_every_save: bool = False,
        max_waiting: int = 2,
        client_bars: bool = False,
        keep_last: int | None = None,
        keep_every: int | None = None,
        keep_best: str | None = None,
        card: bool = False,
        uploads: Literal["process", "thread"] = "process",
        sigterm_grace: float = 25.0,
        client: Client | None = None,
        retention: Retention | None = None,
    ) -> None:
        # client= and retention= stand for the loose keywords (given both: an InputError).
        hub = connection_of(client, endpoint=endpoint, token=token, timeout=timeout, retries=retries)
        endpoint, token, timeout, retries = hub["endpoint"], hub["token"], hub["timeout"], hub["retries"]
        auth = hub.get("auth")  # with client=: keyless (auth="oidc") re-exchanges before each token expires
        given = retention_of(retention, keep_last=keep_last, keep_every=keep_every, keep_best=keep_best)
        keep_last, keep_every, keep_best = given.keep_last, given.keep_every, given.keep_best
        self.repo = names.repo_id(repo)
        if uploads not in ("process", "thread"):
            raise InputError(f"uploads must be 'process' or 'thread', not {uploads!r}")
        if (isinstance(sigterm_grace, bool) or not isinstance(sigterm_grace, (int, float))
                or not sigterm_grace >= 0 or sigterm_grace == float("inf")):
            raise InputError(f"sigterm_grace must be a number of seconds >= 0, not {sigterm_grace!r}")
        if on_failure not in ("raise", "warn"):
            raise InputError(f"on_failure must be 'raise' or 'warn', not {on_failure!r}")
        if isinstance(max_waiting, bool) or not isinstance(max_waiting, int) or max_waiting < 1:
            raise InputError(f"max_waiting must be a whole number >= 1, not {max_waiting!r}")
        settings = Settings.from_env(endpoint=endpoint, token=token or None, timeout=timeout, retries=retries,
                                     auth=auth)
        names.token_for_write(settings.token or settings.auth == "oidc", settings.endpoint)
        self._client = Client(endpoint, token, timeout=timeout, retries=retries, auth=auth)
        self._private = private
        retention = Retention(keep_last=keep_last, keep_every=keep_every, keep_best=keep_best)
        self._retention: Retention | None = None
        if retention.wanted:
            retention_rules(retention)  # prune's own checks of them, now, before training starts
            self._retention = retention
        self.card = card
        self._endpoint = settings.endpoint
        # The in-process push's patience with a rate limit, not the watch's shorter one.
        self._rate_limit_wait = settings.max_rate_limit_wait
        self._hub = {"endpoint": endpoint, "token": token or None, "timeout": timeout, "retries": retries,
                     "auth": auth}
        self.uploads = uploads
        self.upload_mode: str | None = None
        """Where the last push ran: ``"process"`` (the uploader child), ``"thread"``, or None before one."""
        self._uploader: ProcessUploader | None = None
        self._uploader_lock = threading.Lock()
        self._starter: threading.Thread | None = None
        """Starts the upload process when training begins (see :meth:`_start_uploader`)."""
        self.sigterm_grace = float(sigterm_grace)
        # CKPT_PREEMPT_DEADLINE, checked now: a bad one fails before training starts.
        self._sigterm = SigtermFlush(self.sigterm_grace, preempt.deadline_from_env(), lambda: self._queue,
                                     self._kill_upload, self._hurry_upload)
        self.push_every_save = push_every_save
        self.max_waiting = max_waiting
        self.client_bars = client_bars
        self._bars_turned_off = False
        self.on_failure = on_failure
        self.log_to_wandb = log_to_wandb
        self.artifact_name = artifact_name
        self.pushed: list[CheckpointHandle] = []
        """Every checkpoint pushed, in order."""
        self.failures: list[tuple[str, Exception]] = []
        """(checkpoint-N, error) for every push that failed."""
        self.skipped: list[str] = []
        """checkpoint-N of every save a newer one replaced before its push began (never pushed)."""
        self._staging: Path | None = None
        self._queue: PushQueue[_Job] | None = None

    def __repr__(self) -> str:  # the token stays out of logs
        return f"CheckpointCallback(repo={self.repo!r})"

    # ------------------------------------------------------------------ Trainer events

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self._sigterm.output_dir = _output_dir(args)
        self._sigterm.floor = int(state.global_step)
        if not _is_main(args, state):
            if multinode.active():  # each process's part of the in-step push gets the grace too
                self._install_sigterm()
            return
        if getattr(args, "push_to_hub", False):
            log.warning("Trainer's push_to_hub is on as well: each save is pushed twice (once by Trainer)")
        if self._queue is None:  # else an earlier train() of this callback is still pushing from it
            # Left by a process that died while pushing; nothing else reads it.
            shutil.rmtree(_output_dir(args) / STAGING_DIR, ignore_errors=True)
        self._quiet_client_bars()
        self._record_resumed(args, state)
        self._install_sigterm()
        self._start_uploader()

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        if multinode.active():
            with self._sigterm.saving(int(state.global_step)):
                self._push_from_every_process(args, state)
            self._sigterm.park()
            return
        if not _is_main(args, state):
            return
        self._record(state)
        step = int(state.global_step)
        name = f"{CHECKPOINT_PREFIX}-{step}"
        src = _output_dir(args) / name
        if not src.is_dir():
            error = FileNotFoundError(f"{src} does not exist: only checkpoints under args.output_dir are pushed")
            log.warning("cannot push %s: %s", name, error)
            self.failures.append((name, error))
            return
        if self._queue is None:
            self._queue = PushQueue(self._push, discard=self._discard, on_outcome=self._sigterm.ended,
                                    keep="every" if self.push_every_save else "newest", max_waiting=self.max_waiting)
        self._staging = _output_dir(args) / STAGING_DIR
        # A SIGTERM landing here only records itself (see .sigterm): this save is still staged and
        # queued, and pushed first.
        with self._sigterm.saving(step):
            staged = _stage(src, self._staging)
            job = _Job(step, staged, _size(staged))
            self._sigterm.submitted(step, job.size)
            self._queue.submit(job)
        self._record(state)  # a save this one replaced is reported now, not at the end of training
        self._sigterm.park()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self._sigterm.park()  # after a SIGTERM: until the flush is over
        if _is_main(args, state):
            self._record(state)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if not _is_main(args, state) and not multinode.active():
            return
        self.wait(state)

    # ------------------------------------------------------------------ the pushes

    def wait(self, state: TrainerState | None = None) -> None:
        """Wait for the running and the waiting push, record them, and report failures.

        Called at the end of training; call it yourself after a training loop that
        stopped early. Raises :class:`PushFailedError` unless ``on_failure="warn"``.
        """
        self._sigterm.park()  # a SIGTERM's flush first: its deadline bounds the wait
        if self._queue is not None:
            self._queue.close()
            self._queue, queue = None, self._queue
            self._record(state, queue)
        if self._staging is not None:
            with contextlib.suppress(OSError):  # only when empty: every staged copy is removed by now
                self._staging.rmdir()
            self._staging = None
        self._close_uploader()
        self._uninstall_sigterm()
        self._restore_client_bars()
        if self.failures:
            error = PushFailedError.of(self.failures)
            self.failures = []
            if self.on_failure == "raise":
                raise error
            log.warning("%s", error)

    def _push_from_every_process(self, args: TrainingArguments, state: TrainerState) -> None:
        """Many processes (nodes without a shared filesystem, FSDP or DeepSpeed per-rank
        files): each pushes what its node holds of the checkpoint, one commit; the files a
        node's processes share go up once. In step with the other processes, so before
        training goes on (a background push could pair different saves across processes)."""
        step = int(state.global_step)
        name = f"{CHECKPOINT_PREFIX}-{step}"
        multinode.wait_for_saves()
        src = _output_dir(args) / name
        staging = _output_dir(args) / STAGING_DIR
        skip = frozenset() if _is_main(args, state) else PER_PROCESS_COPIES
        job = _Job(step, _stage(src, staging, skip) if src.is_dir() else multinode.empty_dir(staging))
        try:
            outcome: Outcome[_Job] = Outcome(job, "pushed", handle=self._push(job, distributed=True))
        except CkptError as exc:
            outcome = Outcome(job, "failed", error=exc)
        finally:
            self._discard(job)
        self._record_one(state, outcome, main=_is_main(args, state))

    def _discard(self, job: _Job) -> None:
        """Remove a staged copy the queue is done with, and the staging dir once it is empty:
        a process that dies between saves leaves nothing of it in ``output_dir``."""
        shutil.rmtree(job.staged, ignore_errors=True)
        # No lock: :func:`_stage` makes the dir again if this removes it under it.
        with contextlib.suppress(OSError):  # OSError: another copy is staged there
            job.staged.parent.rmdir()

    def _push(self, job: _Job, distributed: bool = False) -> CheckpointHandle:
        subfolder = f"{CHECKPOINT_PREFIX}-{job.step}"
        started = time.monotonic()
        size = sum(p.stat().st_size for p in job.staged.rglob("*") if p.is_file())
        self._sigterm.started(job.step, size)
        # The card is written in the push's own commit, which the uploader child does not make:
        # a push with it (and a push of many processes, in step) runs in this process.
        uploader = None if distributed or self.card else self._process_uploader()
        if uploader is not None:
            handle = self._push_in_child(uploader, job, subfolder)  # the child records the save's evaluation
        else:
            self.upload_mode = "thread"
            metrics = trainer_metrics(job.staged, job.step) or None  # this save's evaluation, if any
            with no_progress_lines():  # this thread's pushes: the one line below instead
                handle = self._client.push(job.staged, self.repo, step=job.step, subfolder=subfolder,
                                           private=self._private, distributed=distributed, metrics=metrics,
                                           card=self.card and not distributed).handle
        print(f"ckpt-action: pushed {subfolder} at {handle.revision}: {human(size)} in"
              f" {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        if self._retention is not None and not distributed:
            self._prune(subfolder)
        return handle

    def _prune(self, pushed: str) -> None:
        """Prune by this callback's rules after a push; a failure is logged, never the push's."""
        try:
            with no_progress_lines():
                res = self._client.prune(self.repo, retention=self._retention, card=self.card)
        except CkptError as exc:
            log.warning("%s is pushed, but pruning after it failed: %s", pushed, exc)
            return
        if res.deleted:
            log.info("pruned %s (kept %s)", ", ".join(res.deleted), ", ".join(res.kept))

    def _process_uploader(self) -> ProcessUploader | None:
        """The uploader child, started on first use; None in thread mode or where a process
        cannot be started (then this and every later push runs on the queue's thread)."""
        if self.uploads != "process":
            return None
        with self._uploader_lock:
            if self._uploader is None or self._uploader.proc.poll() is not None:
                try:
                    began = time.monotonic()
                    self._uploader = ProcessUploader(
                        {**os.environ, "CKPT_MAX_RATE_LIMIT_WAIT": f"{self._rate_limit_wait:g}"})
                    self._sigterm.restart = time.monotonic() - began  # what a yield to a newer save costs
                except (OSError, ValueError) as exc:  # no fork/exec here (a sandbox, a frozen app)
                    log.warning("cannot start the upload process (%s): pushing from a thread of this process", exc)
                    self.uploads = "thread"
                    self._uploader = None
            return self._uploader

    def _start_uploader(self) -> None:
        """Start the upload process now, on a thread, as ``watch`` starts its child before the
        training: its interpreter start then overlaps Trainer's setup rather than the steps
        after the first save, and that save's push finds it ready. Not where pushes stay in
        this process (``card=True``, many processes)."""
        if self.uploads != "process" or self.card or multinode.active():
            return
        if self._starter is None or not self._starter.is_alive():
            self._starter = threading.Thread(target=self._process_uploader, name="ckpt-action-upload-start",
                                             daemon=True)
            self._starter.start()

    def _push_in_child(self, uploader: ProcessUploader, job: _Job, subfolder: str) -> CheckpointHandle:
        uploader.submit({"op": "push", "local_dir": str(job.staged), "repo": self.repo, "step": job.step,
                         "private": self._private, "hub": self._hub, "quiet": True})
        answer = None
        while answer is None:
            answer = uploader.poll(timeout=1.0)
        self.upload_mode = "process"
        if not answer.get("ok"):
            raise RemoteError(str(answer.get("error")))
        return CheckpointHandle(self.repo, str(answer.get("subfolder") or subfolder), str(answer["revision"]),
                                job.step, self._endpoint)

    def _close_uploader(self) -> None:
        starter, self._starter = self._starter, None
        if starter is not None:
            starter.join()  # else it could start a process after this closed the last one
        with self._uploader_lock:
            uploader, self._uploader = self._uploader, None
        if uploader is not None:
            uploader.close()

    def _install_sigterm(self) -> None:
        """Flush on SIGTERM (see :mod:`.sigterm`): only where a handler can be set (the main thread)."""
        if self.sigterm_grace > 0:
            self._sigterm.install()

    def _uninstall_sigterm(self) -> None:
        self._sigterm.uninstall()

    def _hurry_upload(self) -> None:
        """The upload process at the default priority again (a notice came: training stops)."""
        uploader = self._uploader
        if uploader is not None:
            uploader.hurry()

    def _kill_upload(self) -> bool:
        """Cut the push in flight short (the flush's deadline, or a yield to a newer save): kill
        the upload process, without its lock (a flush never waits on a lock). False where the
        push runs on a thread of this process, which cannot be stopped."""
        uploader = self._uploader
        if uploader is None or self.upload_mode == "thread":
            return False
        uploader.kill()
        return True

    def _quiet_client_bars(self) -> None:
        """huggingface_hub's upload bars write a line per refresh into a training log."""
        if self.client_bars or interactive():
            return
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars

        if not are_progress_bars_disabled():
            disable_progress_bars()
            self._bars_turned_off = True

    def _restore_client_bars(self) -> None:
        if self._bars_turned_off:
            from huggingface_hub.utils import enable_progress_bars

            enable_progress_bars()
            self._bars_turned_off = False

    def _record_resumed(self, args: TrainingArguments, state: TrainerState) -> None:
        """A run resumed from a checkpoint :func:`resume_from_hub` pulled: its own SHA, which
        its ``trainer_state.json`` cannot hold, goes into ``log_history`` like any push's."""
        step = int(state.global_step)
        name = f"{CHECKPOINT_PREFIX}-{step}"
        if step <= 0 or any(e.get("checkpoint") == name for e in state.log_history):
            return
        pulled = pulled_checkpoint(_output_dir(args) / name)
        if pulled is None or pulled[0] != self.repo or pulled[1] != name:
            return
        handle = CheckpointHandle(self.repo, name, pulled[2], step, self._endpoint)
        entry: dict[str, Any] = {"checkpoint": name, "checkpoint_revision": handle.revision,
                                 "checkpoint_hub_url": handle.hub_url, "step": step}
        state.log_history.append(entry)  # typed as floats by transformers; the pushes' entries are alike

    def _record(self, state: TrainerState | None, queue: PushQueue[_Job] | None = None) -> None:
        """Take the finished pushes (on Trainer's thread): log history, ``pushed``, W&B."""
        queue = queue or self._queue
        if queue is None:
            return
        for outcome in queue.drain():
            self._record_one(state, outcome)

    def _record_one(self, state: TrainerState | None, outcome: Outcome[_Job], main: bool = True) -> None:
        """``main``: the world's main process, which alone logs history and W&B."""
        name = f"{CHECKPOINT_PREFIX}-{outcome.item.step}"
        if outcome.status == "superseded":
            self.skipped.append(name)
            log.warning("%s was not pushed: a newer save replaced it while another push ran (it never reaches the"
                        " Hub; CheckpointCallback(push_every_save=True) pushes every save)", name)
            return
        if outcome.error is not None:
            log.warning("pushing %s failed: %s", name, outcome.error)
            self.failures.append((name, outcome.error))
            return
        handle = outcome.handle
        assert handle is not None
        self.pushed.append(handle)
        log.info("pushed %s at %s", name, handle.revision)
        if not main:
            return
        if state is not None:
            entry: dict[str, Any] = {"checkpoint": handle.subfolder, "checkpoint_revision": handle.revision,
                                     "checkpoint_hub_url": handle.hub_url, "step": outcome.item.step}
            state.log_history.append(entry)
        if self.log_to_wandb:
            run = active_wandb_run()
            if run is not None:
                try:
                    self._client.log_pointer(handle, run, artifact_name=self.artifact_name)
                except CkptError as exc:
                    log.warning("%s is pushed, but logging its W&B pointer failed: %s", name, exc)


def _output_dir(args: TrainingArguments) -> Path:
    return Path(args.output_dir or "trainer_output")  # TrainingArguments' own default


def _is_main(args: TrainingArguments, state: TrainerState) -> bool:
    """The world's main process: the one that pushes (every process calls the callback)."""
    return bool(getattr(state, "is_world_process_zero", True)) and getattr(args, "process_index", 0) == 0


def resume_from_hub(
    repo: str,
    output_dir: str | os.PathLike[str],
    *,
    revision: str | None = None,
    require: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> str | None:
    """Pull the latest complete ``checkpoint-N`` of ``repo`` into ``output_dir/checkpoint-N``.

    Returns that path, for ``trainer.train(resume_from_checkpoint=...)``, or None when the
    repo has no complete checkpoint (a first run; ``require=True`` raises
    :class:`~ckpt_action.errors.NoCheckpointError` instead, where a first run is not
    expected). Errors raise: "could not tell" never looks like "start from scratch". The
    files are verified before the folder appears; an existing ``output_dir/checkpoint-N``
    is replaced by the verified copy: an earlier pull is updated in place, anything else
    (the Trainer's own save of a job restarted on the same disk, whole or torn) is moved
    aside to ``output_dir/replaced-checkpoint-N-<UTC time>``, never deleted, and a
    warning says so.

    In a job of many processes (torch.distributed initialized, as under torchrun), call it
    on every process: world rank 0 finds the checkpoint, each node's local rank 0 pulls it
    and the other processes wait, so every node resumes from the same one. Otherwise call
    it once per machine before training reads ``output_dir``: two processes pulling into
    one folder race.

    >>> resume_from_hub("org/run", "output") == str(scratch / "output" / "checkpoint-300")
    True
    >>> resume_from_hub("org/empty", "output") is None  # a first run
    True

    then ``trainer.train(resume_from_checkpoint=resume_from_hub("org/run", args.output_dir))``.
    """
    client = Client(endpoint, token, timeout=timeout, retries=retries)
    # What latest read of the checkpoint it chose goes to the pull (on the process that chose it).
    chosen: list[LatestResult] = []

    def find() -> CheckpointHandle | None:
        chosen.append(client.latest(repo, revision=revision, require=require))
        return chosen[-1].handle

    def fetch(handle: CheckpointHandle) -> Path:
        return _pull_in_place(handle, Path(output_dir) / handle.subfolder, client, chosen[-1] if chosen else None)

    if multinode.active():
        # Rank 0 finds it, each node's local rank 0 pulls it, the other processes wait.
        found = multinode.once_per_node(find, fetch)
        return None if found is None else str(Path(output_dir) / found.subfolder)
    found = find()
    return None if found is None else str(fetch(found))


RESUME_DIR = ".ckpt-action-resume"
"""Under ``output_dir``: where a checkpoint is pulled when the Trainer's own dir of that name
is in the way, before the swap. A fixed place, so a pull cut short there is resumed (or
its staging removed) by the next restart's pull."""


def _pull_in_place(handle: CheckpointHandle, target: Path, client: Client,
                   found: LatestResult | None = None) -> Path:
    """Pull ``handle`` to ``target``: into it when it is new, empty or an earlier pull;
    else (files the pull rules may not replace: the Trainer's own save) into
    :data:`RESUME_DIR`, then swapped in, the old dir moved aside whole."""
    if not os.path.lexists(target) or (target.is_dir() and not target.is_symlink() and not any(target.iterdir())):
        return client.pull(handle, target, force=True, found=found).local_dir
    if pulled_checkpoint(target) is not None:
        try:
            return client.pull(handle, target, force=True, found=found).local_dir
        except InputError:  # it holds files the earlier pull did not write: swapped like any other
            pass
    fresh = target.parent / RESUME_DIR / target.name
    client.pull(handle, fresh, force=True, found=found)
    with contextlib.suppress(OSError):  # the mode the Trainer gave its dir, not a new one's
        os.chmod(fresh, os.lstat(target).st_mode & 0o7777)
    aside = _free_name(target.parent, f"replaced-{target.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    os.rename(target, aside)
    try:
        os.rename(fresh, target)
    except OSError:
        os.rename(aside, target)  # as it was
        raise
    with contextlib.suppress(OSError):  # only when empty
        fresh.parent.rmdir()
    log.warning("%s held files ckpt-action did not pull (the Trainer's own save, or what was left of it): moved to"
                " %s, and replaced by the verified copy of %s at %s; delete %s once you no longer need it", target,
                aside, handle.subfolder, handle.revision, aside.name)
    return target


def _free_name(parent: Path, name: str) -> Path:
    """``parent/name``, or ``parent/name-2``, ``-3``... when that exists."""
    path, n = parent / name, 1
    while os.path.lexists(path):
        n += 1
        path = parent / f"{name}-{n}"
    return path
