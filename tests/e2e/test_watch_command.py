"""`ckpt-action watch -- python train.py` as a CI job runs it: SIGTERM mid-save (the preemption
notice), the newest complete checkpoint on the Hub within the grace period, and a resume job that
continues from it through `latest` and `pull`. The training is a small script that saves
checkpoint-N the Trainer's way (files, then trainer_state.json last), slowly, and finishes the
save in progress when it gets SIGTERM, as a trainer with a preemption handler does.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ENTRYPOINT
from tests.helpers.localhub_fixtures import make_hub_env

REPO = "me/preempted"
GRACE = 20

TRAIN = r'''
import json, os, signal, sys, time
from pathlib import Path

out = Path(sys.argv[1])
status = Path(sys.argv[2])
step_s = float(os.environ.get("STEP_S", "0.2"))  # a training step
chunk_s = float(os.environ.get("CHUNK_S", "0.3"))  # a slow save: 6 chunks, this far apart
hold_at = int(os.environ.get("HOLD_AT", "0"))  # this step's save stops half-way until SIGTERM, then ends slowly
stop = False

def on_term(signum, frame):
    global stop
    stop = True

signal.signal(signal.SIGTERM, on_term)
start = 0
if os.environ.get("RESUME_FROM"):
    start = json.loads(Path(os.environ["RESUME_FROM"], "trainer_state.json").read_text())["global_step"]
step = start
while not stop and step < start + int(os.environ.get("STEPS", "100")):
    step += 1
    time.sleep(step_s)
    d = out / f"checkpoint-{step}"
    d.mkdir(parents=True)
    status.write_text(json.dumps({"saving": step}))
    with open(d / "model.safetensors", "wb") as fh:
        for chunk in range(6):
            fh.write(os.urandom(64 * 1024))
            fh.flush()
            if step == hold_at and chunk == 2:
                status.write_text(json.dumps({"held": step}))
                while not stop:
                    time.sleep(0.01)
            time.sleep(0.3 if step == hold_at else chunk_s)
    (d / "training_args.bin").write_bytes(b"args")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": step, "resumed_from": start}))
    status.write_text(json.dumps({"saved": step}))
sys.exit(0)
'''
QUICK = {"STEP_S": "0.02", "CHUNK_S": "0.02"}
"""A training whose steps and saves take no time to speak of, where their length is not the point."""


def test_sigterm_mid_save_pushes_the_newest_complete_checkpoint_within_grace_and_a_resume_continues(
        hub_server, tmp_path):
    server = hub_server()
    env = make_hub_env(server.url, tmp_path / "home")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out, status = tmp_path / "out", tmp_path / "status.json"
    log = open(tmp_path / "watch.log", "wb")
    watch = subprocess.Popen([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(out), "--repo", REPO,
                              "--grace", str(GRACE), "--json", "--", sys.executable, str(script), str(out),
                              str(status)], env={**env, **QUICK, "HOLD_AT": "3"}, stdout=subprocess.PIPE, stderr=log,
                             cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while True:  # the third save is half-written, and held there until the signal
            assert time.monotonic() < deadline, "the training never reached its third save"
            assert watch.poll() is None, (tmp_path / "watch.log").read_text()
            if status.exists() and json.loads(status.read_text() or "{}").get("held") == 3:
                break
            time.sleep(0.05)
        assert not (out / "checkpoint-3" / "trainer_state.json").exists()
        sent = time.monotonic()
        watch.send_signal(signal.SIGTERM)
        stdout, _ = watch.communicate(timeout=GRACE + 30)
        took = time.monotonic() - sent
    finally:
        if watch.poll() is None:
            watch.kill()
        log.close()
    stderr = (tmp_path / "watch.log").read_text()
    assert watch.returncode == 0, stderr
    assert took < GRACE, (took, stderr)
    report = json.loads(stdout)
    pushed = [p["name"] for p in report["pushed"]]
    assert pushed[0] in ("checkpoint-1", "checkpoint-2", "checkpoint-3")
    assert "checkpoint-3" in pushed and not report["failed"] and not report["left"], report

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(ENTRYPOINT), *args], env=env, capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    latest = cli("latest", "--repo", REPO, "--json")
    assert latest.returncode == 0, latest.stderr
    assert json.loads(latest.stdout)["subfolder"] == "checkpoint-3"
    resume = tmp_path / "resume"
    pulled = cli("pull", "--repo", REPO, "--latest", "--local-dir", str(resume))
    assert pulled.returncode == 0, pulled.stderr
    for name in ("model.safetensors", "training_args.bin", "trainer_state.json"):
        assert (resume / name).read_bytes() == (out / "checkpoint-3" / name).read_bytes()
    # The resume job, on a fresh dir, continues from the pulled checkpoint.
    again = subprocess.run([sys.executable, str(script), str(tmp_path / "out2"), str(tmp_path / "s2.json")],
                           env={**env, **QUICK, "RESUME_FROM": str(resume), "STEPS": "1"}, timeout=120)
    assert again.returncode == 0
    state = json.loads((tmp_path / "out2" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state == {"global_step": 4, "resumed_from": 3}


def test_a_training_command_that_cannot_start_is_exit_2_and_sends_nothing(hub_server, tmp_path):
    server = hub_server()
    env = make_hub_env(server.url, tmp_path / "home")
    run = subprocess.run([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(tmp_path / "out"),
                          "--repo", REPO, "--", str(tmp_path / "no-such-trainer")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "the training command cannot start" in run.stderr and "no-such-trainer" in run.stderr
    assert not [e for e in server.log_entries() if e.get("method") == "POST"]


def test_the_command_exit_status_is_the_watchs_and_what_waits_is_pushed(hub_server, tmp_path):
    server = hub_server()
    env = make_hub_env(server.url, tmp_path / "home")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(out), "--repo", REPO,
                          "--json", "--", sys.executable, str(script), str(out), str(tmp_path / "s")],
                         env={**env, **QUICK, "STEPS": "2"}, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert [p["name"] for p in json.loads(run.stdout)["pushed"]] == ["checkpoint-1", "checkpoint-2"]
    failing = subprocess.run([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(out), "--repo", REPO,
                              "--", sys.executable, "-c", "import sys; sys.exit(7)"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert failing.returncode == 7, failing.stderr


def test_uploads_run_in_a_child_at_lower_cpu_and_io_priority():
    import os

    from ckpt_action.watch.uploader import NICENESS, ProcessUploader

    uploader = ProcessUploader()
    try:
        assert uploader.proc.pid != os.getpid()
        assert os.getpriority(os.PRIO_PROCESS, uploader.proc.pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0)
                                                                          + NICENESS)
        if sys.platform.startswith("linux"):
            assert "ioprio best-effort 7" in uploader.priority, uploader.priority
            # The child runs only on what the training leaves: the idle policy, for its
            # threads too (hf_xet's runtime starts its own).
            assert "SCHED_IDLE" in uploader.priority, uploader.priority
            assert os.sched_getscheduler(uploader.proc.pid) == os.SCHED_IDLE
    finally:
        uploader.close()
    assert uploader.proc.returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the idle policy is Linux's")
def test_a_preemption_notice_gives_the_upload_child_its_priority_back():
    """Once the training stops for a notice, the push must land before the deadline, not on the
    CPU others leave: every thread of the child leaves SCHED_IDLE."""
    import os
    import threading

    from ckpt_action.watch.uploader import ProcessUploader

    uploader = ProcessUploader()
    try:
        assert os.sched_getscheduler(uploader.proc.pid) == os.SCHED_IDLE
        threading.Event().wait(0.2)  # not a race: the child's threads exist or not, all must move
        assert "SCHED_OTHER" in uploader.hurry()
        tids = [int(t) for t in os.listdir(f"/proc/{uploader.proc.pid}/task")]
        assert [os.sched_getscheduler(t) for t in tids] == [os.SCHED_OTHER] * len(tids)
    finally:
        uploader.close()


def test_without_a_command_it_watches_until_sigint_then_stops_at_once(hub_server, tmp_path):
    server = hub_server()
    env = make_hub_env(server.url, tmp_path / "home")
    out = tmp_path / "out"
    (out / "checkpoint-4").mkdir(parents=True)
    (out / "checkpoint-4" / "w.bin").write_bytes(b"w" * 104)
    watch = subprocess.Popen([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(out), "--repo", REPO,
                              "--settle", str(SETTLE), "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    said = LogLines(watch)
    try:
        said.wait_for("pushing checkpoint-4 ")  # quiet past --settle, and no command: the watch pushes it
        (out / "checkpoint-5").mkdir()
        (out / "checkpoint-5" / "w.bin").write_bytes(b"w" * 105)  # a save arriving while a push runs
        said.wait_for("pushed checkpoint-5:")
        assert watch.poll() is None
        (out / "checkpoint-6").mkdir()
        (out / "checkpoint-6" / "w.bin").write_bytes(b"new")  # written just before the signal
        sent = time.monotonic()
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=GRACE + 30)
        took = time.monotonic() - sent
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, said.text()
    assert watch.stdout is not None
    report = json.loads(watch.stdout.read())
    assert [p["name"] for p in report["pushed"]] == ["checkpoint-4", "checkpoint-5", "checkpoint-6"], report
    assert took < GRACE, took


SETTLE = 0.5
"""The watch's quiet period where the test waits for it: short, and well within the time a save
begun just before the signal is waited for (``SAVE_IN_PROGRESS``)."""


class LogLines:
    """A child's stderr, read line by line as it comes (on a thread): what the watch said so far."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        stream = proc.stderr
        threading.Thread(target=lambda: [self.lines.put(line) for line in stream], daemon=True).start()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.seen):
            try:
                self.seen.append(self.lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"the watch never said {text!r}: {self.text()}") from None

    def text(self) -> str:
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


def test_a_fifo_named_trainer_state_json_neither_hangs_the_watch_nor_outlives_its_grace(hub_server, tmp_path):
    """A FIFO where the Trainer's marker goes: the watch looks with lstat, refuses the
    checkpoint naming the file, never opens it (a blocking open waited for a writer for good,
    SIGTERM's grace with it), and stops within its grace on SIGTERM."""
    import os

    server = hub_server()
    env = make_hub_env(server.url, tmp_path / "home")
    out = tmp_path / "out"
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-1" / "model.safetensors").write_bytes(b"m" * 101)
    (out / "checkpoint-1" / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    grace = 3
    watch = subprocess.Popen([sys.executable, str(ENTRYPOINT), "watch", "--local-dir", str(out), "--repo", REPO,
                              "--settle", str(SETTLE), "--grace", str(grace), "--json"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = LogLines(watch)
    fifo = out / "checkpoint-2" / "trainer_state.json"
    try:
        said.wait_for("pushed checkpoint-1:")
        fifo.parent.mkdir()
        (fifo.parent / "model.safetensors").write_bytes(b"m" * 102)
        os.mkfifo(fifo)
        said.wait_for("checkpoint-2: it holds trainer_state.json, which is not a regular file", timeout=60)
        sent = time.monotonic()
        watch.send_signal(signal.SIGTERM)
        watch.wait(timeout=grace + 60)
        took = time.monotonic() - sent
    finally:
        if watch.poll() is None:
            watch.kill()
            with contextlib.suppress(OSError):  # a watch stuck in open() is let go
                os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
    assert watch.returncode == 1, said.text()  # a checkpoint it refused is not a clean run
    assert watch.stdout is not None
    report = json.loads(watch.stdout.read())
    assert [p["name"] for p in report["pushed"]] == ["checkpoint-1"]
    assert "trainer_state.json" in report["refused"]["checkpoint-2"], report
    assert took < grace + 10, took
