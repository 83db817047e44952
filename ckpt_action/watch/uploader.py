"""Pushes off the training's back: one child process, at a lower CPU and I/O priority.

The watcher hands it one request at a time (a JSON line on its stdin: push a folder, or
prune) and reads one answer line per request on its stdout. The child runs
``python -m ckpt_action.watch.uploader``: it lowers its own priority first
(:func:`lower_priority`), ignores SIGINT and SIGTERM (the watcher decides when it stops,
and kills it at the end of the grace period: a push cut short commits nothing), and calls
the public API (``ckpt_action.api.push`` / ``prune``). The token travels in the request,
never on the command line. Where a process cannot be started, :class:`ThreadUploader`
runs the same requests on a thread of this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from typing import Any

Request = dict[str, Any]
Answer = dict[str, Any]

# ioprio_set(2): the syscall's number per architecture; best-effort class, lowest level.
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "i386": 289, "i686": 289, "armv7l": 314, "ppc64le": 273}
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_BEST_EFFORT_LOWEST = (2 << 13) | 7
_IOPRIO_BEST_EFFORT_DEFAULT = (2 << 13) | 4
NICENESS = 10
_WAIT_RE = re.compile(r"asks to wait (\d+) s")


def lower_priority() -> list[str]:
    """Lower this process's CPU priority (``nice`` +10, then, on Linux, the ``SCHED_IDLE``
    policy) and its I/O priority (best-effort, lowest level); answers what it could do.

    Called first thing in the child, before any thread exists, so that every thread it
    starts later (hf_xet's runtime, the hashing pool) inherits the policy.
    """
    done = []
    try:
        os.nice(NICENESS)
        done.append(f"nice +{NICENESS}")
    except OSError:
        pass
    # nice +10 still takes a share of a core from a training that keeps every core busy
    # (weight 110 against its 1024: about a tenth): measured, 37 ms of each step waiting.
    # SCHED_IDLE runs only on what the other processes leave (weight 3), so the push yields
    # to the training and uses the cores whenever the training waits (data, a save, eval).
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            done.append("SCHED_IDLE")
        except OSError:
            pass
    if sys.platform.startswith("linux"):
        import ctypes
        import platform

        number = _IOPRIO_SET.get(platform.machine())
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if number is not None and libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_BEST_EFFORT_LOWEST) == 0:
                done.append("ioprio best-effort 7")
        except (OSError, AttributeError):
            pass
    return done


def raise_priority(pid: int) -> list[str]:
    """Undo :func:`lower_priority` for every thread of process ``pid``, as far as this process
    may: a preemption notice came, the training is stopping, and the newest checkpoint must
    land before the deadline rather than wait for the CPU others leave (``SCHED_IDLE`` gets
    next to nothing on a busy machine). Back to ``SCHED_OTHER``, nice 0 where allowed, and
    the default best-effort I/O level; answers what it could do."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        tids = [pid]
    done: set[str] = set()
    for tid in tids:
        if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_OTHER"):
            with contextlib.suppress(OSError):
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                done.add("SCHED_OTHER")
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, tid, 0)
            done.add("nice 0")
    if sys.platform.startswith("linux"):
        import ctypes
        import platform

        number = _IOPRIO_SET.get(platform.machine())
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            if number is not None and all(libc.syscall(number, _IOPRIO_WHO_PROCESS, tid, _IOPRIO_BEST_EFFORT_DEFAULT)
                                          == 0 for tid in tids):
                done.add("ioprio best-effort 4")
    return sorted(done)


def handle(request: Request) -> Answer:
    """Run one request through the public API; every failure is an answer, never raised."""
    from ckpt_action import api
    from ckpt_action.client import trainer_metrics
    from ckpt_action.errors import CkptError, RemoteError
    from ckpt_action.progress import no_progress_lines

    hub = request.get("hub") or {}
    try:
        if request["op"] == "push":
            metrics = trainer_metrics(request["local_dir"], request["step"]) if request["step"] is not None else {}
            # "quiet": no periodic progress lines (the Trainer callback prints one line per push).
            with no_progress_lines() if request.get("quiet") else contextlib.nullcontext():
                handle = api.push(request["local_dir"], request["repo"], step=request["step"],
                                  private=request.get("private", True), metrics=metrics or None, **hub)
            return {"ok": True, "subfolder": handle.subfolder, "revision": handle.revision}
        if request["op"] == "prune":
            res = api.prune(request["repo"], request["keep_last"], keep_every=request.get("keep_every"),
                            keep_best=request.get("keep_best"), **hub)
            return {"ok": True, "deleted": list(res.deleted), "revision": res.revision}
        return {"ok": False, "error": f"unknown request {request['op']!r}"}
    except CkptError as exc:
        text = str(exc)
        quota = isinstance(exc, RemoteError) and "429" in text
        wait = _WAIT_RE.search(text)
        return {"ok": False, "error": text, "quota": quota, "wait": int(wait.group(1)) if wait else None,
                "gone": request["op"] == "push" and not os.path.isdir(request["local_dir"])}
    except Exception as exc:  # noqa: BLE001 - one failed push is an answer; the watcher goes on
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "quota": False, "wait": None,
                "gone": request["op"] == "push" and not os.path.isdir(request["local_dir"])}


class ThreadUploader:
    """Requests run one at a time on a daemon thread of this process."""

    kind = "thread"

    def __init__(self) -> None:
        self._answers: queue.Queue[Answer] = queue.Queue()
        self.busy = False
        self.priority: list[str] = []

    def submit(self, request: Request) -> None:
        assert not self.busy
        self.busy = True
        threading.Thread(target=lambda: self._answers.put(handle(request)), name="ckpt-watch-upload",
                         daemon=True).start()

    def poll(self, timeout: float = 0.0) -> Answer | None:
        try:
            answer = self._answers.get(timeout=timeout) if timeout > 0 else self._answers.get_nowait()
        except queue.Empty:
            return None
        self.busy = False
        return answer

    def kill(self) -> None:
        """A thread cannot be stopped: the push in flight is left to finish or fail on its own."""

    def hurry(self) -> list[str]:
        """A thread of this process runs at its priority already."""
        return []

    def close(self) -> None:
        pass


class ProcessUploader(ThreadUploader):
    """Requests run in ``python -m ckpt_action.watch.uploader``, a child at lower priority."""

    kind = "process"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__()
        child_env = dict(os.environ if env is None else env)
        # A rate limit that asks for longer than this is answered at once (the watcher
        # coalesces), rather than holding the only upload slot for many minutes.
        child_env.setdefault("CKPT_MAX_RATE_LIMIT_WAIT", "30")
        self.proc = subprocess.Popen([sys.executable, "-m", "ckpt_action.watch.uploader"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=child_env, text=True, bufsize=1)
        assert self.proc.stdout is not None
        hello = self.proc.stdout.readline()
        self.priority = json.loads(hello).get("priority", []) if hello else []
        self._hurried: list[str] | None = None
        threading.Thread(target=self._read, name="ckpt-watch-answers", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self._answers.put(json.loads(line))
        if self.busy:
            self._answers.put({"ok": False, "error": "the upload process ended", "quota": False, "wait": None,
                               "gone": False})

    def submit(self, request: Request) -> None:
        assert not self.busy and self.proc.stdin is not None
        self.busy = True
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self._answers.put({"ok": False, "error": f"the upload process is gone ({exc})", "quota": False,
                               "wait": None, "gone": False})

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def hurry(self) -> list[str]:
        """A deadline is coming: the child's threads get the CPU and the disk at the default
        priority again (:func:`raise_priority`); once per child."""
        if self._hurried is None and self.proc.poll() is None:
            self._hurried = raise_priority(self.proc.pid)
        return self._hurried or []

    def close(self) -> None:
        # An ending child competes with nothing: at the idle policy, on a machine kept busy
        # (the training's last steps, another job), it could wait past the timeout below for
        # the CPU to finish its imports and read the end of its input.
        self.hurry()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def main() -> None:
    """The child: lower priority, then one answer line per request line until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    priority = lower_priority()  # first: every import below already runs at the lower priority
    # The answers get stdout to themselves: anything a library prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from ckpt_action.progress import quiet_client_bars

    quiet_client_bars()
    print(json.dumps({"priority": priority}), file=answers, flush=True)
    with contextlib.suppress(Exception):  # a failing import is the first request's answer instead
        # What the first push imports (the API, the Hub client), loaded while nothing is
        # asked of this process rather than on the time of the first save's push.
        import huggingface_hub.hf_api  # noqa: F401

        import ckpt_action.api  # noqa: F401
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(handle(json.loads(line))), file=answers, flush=True)


if __name__ == "__main__":
    main()
