"""The watch loop's own rules, without a Hub: the exit code a report gives, and an unexpected
error on the API's thread said in the report rather than lost."""

from __future__ import annotations

import pytest

from ckpt_action.watch.watcher import Watcher, WatchReport


@pytest.mark.parametrize(("report", "code"), [
    (WatchReport(), 0),
    (WatchReport(command_status=3), 3),
    (WatchReport(command_status=-15), 143),  # the training killed by SIGTERM
    (WatchReport(command_status=0, failed={"checkpoint-2": "boom"}), 1),
    (WatchReport(command_status=5, failed={"checkpoint-2": "boom"}), 5),
    (WatchReport(left={"checkpoint-2": "not pushed within the grace period"}), 1),
    (WatchReport(left={"checkpoint-2": "commit quota: the Hub takes no more commits this hour"},
                 skipped=["checkpoint-1"]), 0),  # the quota never fails the run
])
def test_the_exit_code_is_the_commands_else_whether_every_complete_checkpoint_was_pushed(report, code):
    assert report.exit_code() == code


def test_an_unexpected_error_in_the_loop_is_in_the_report(tmp_path, monkeypatch):
    watcher = Watcher(tmp_path, "me/run", uploader="thread", poll=0.01)

    def broken(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(watcher.scanner, "scan", broken)
    report = watcher.start().stop(grace=1)
    assert "RuntimeError: disk on fire" in report.failed["watch"]
    assert report.exit_code() == 1


def test_a_save_begun_after_the_rounds_scan_is_not_missed_by_the_stop(tmp_path):
    """The loop's round scans, then learns it is stopping: a checkpoint written in between is
    looked at again before the loop ends (it was neither pushed nor reported when the loop
    ended on the round's own, older scan)."""
    watcher = Watcher(tmp_path, "me/run", uploader="thread", poll=0.01, settle=4)
    stale = watcher.scanner.scan(writer_gone=False)  # the round's scan: nothing yet
    (tmp_path / "checkpoint-6").mkdir()
    (tmp_path / "checkpoint-6" / "w.bin").write_bytes(b"new")  # written just before the signal
    watcher._stop.set()
    assert watcher._finished(stale) is False  # a save in progress: the stop waits for it


def test_an_orbax_save_under_its_temporary_name_is_waited_for_and_reported_if_left(tmp_path):
    """Orbax writes a save into ``<step>.orbax-checkpoint-tmp-<ts>`` and renames it to
    ``<step>`` when done (a replay of that order): at a stop, a temporary dir that changed
    lately is a save in progress, waited for within the grace period; one left at the end is
    reported incomplete, not silently passed over."""
    now = [100.0]
    watcher = Watcher(tmp_path, "me/run", format="orbax", uploader="thread", poll=0.01, clock=lambda: now[0])
    tmp = tmp_path / "3.orbax-checkpoint-tmp-1733300000"
    (tmp / "state").mkdir(parents=True)
    (tmp / "state" / "array.bin").write_bytes(b"being written")
    watcher._stop.set()
    ckpts = watcher.scanner.scan()
    assert watcher._finished(ckpts) is False  # the save in progress is waited for
    now[0] += 60  # it never finished: at the end it is named among the incomplete
    assert watcher._finished(watcher.scanner.scan()) is True
    assert watcher.report.incomplete == [tmp.name]


class ScriptedUploader:
    """The watcher's uploader seam, answering each request from a script (the Hub's answers
    are tested against the local Hub in tests/integration/test_watch.py; here the order of
    requests is the point, on a clock the test moves)."""

    kind = "thread"

    def __init__(self, answers):
        self.priority = []
        self.answers = list(answers)
        self.requests = []
        self.busy = False

    def submit(self, request):
        self.busy = True
        self.requests.append(request)

    def poll(self, timeout=0.0):
        if not self.busy:
            return None
        self.busy = False
        return self.answers.pop(0)

    def kill(self):
        pass

    def close(self):
        pass


def _ready(root, step, watcher, now):
    """A checkpoint written, seen once, then quiet past the watcher's settle time."""
    d = root / f"checkpoint-{step}"
    d.mkdir()
    (d / "w.bin").write_bytes(b"w" * step)
    watcher._scan()
    now[0] += 2


def _round(watcher):
    """One turn of the loop: a look at the dir, then the uploader's answer or the next request."""
    ckpts = watcher._scan()
    answer = watcher._uploader.poll()
    if answer is not None:
        watcher._answered(answer)
    elif not watcher._uploader.busy:
        watcher._next(ckpts)
    return ckpts


OK = {"ok": True, "subfolder": "x", "revision": "a" * 40}


def test_after_the_hubs_commit_quota_only_the_newest_ready_checkpoint_is_pushed(tmp_path):
    """The Hub answered 429 to a commit: once commits are allowed again, the newest ready
    checkpoint is pushed and the older ones are said skipped, not pushed one by one into the
    quota."""
    now = [100.0]
    watcher = Watcher(tmp_path, "me/run", uploader="thread", settle=1, clock=lambda: now[0])
    said = []
    watcher.log = said.append
    watcher._uploader = ScriptedUploader([{"ok": False, "quota": True, "wait": 30, "error": "429"}, OK])
    _ready(tmp_path, 1, watcher, now)
    _round(watcher)  # checkpoint-1 pushed: the Hub answers 429
    _round(watcher)
    assert any("commit quota is reached" in m for m in said)
    _ready(tmp_path, 2, watcher, now)
    _ready(tmp_path, 3, watcher, now)
    _round(watcher)  # still within the Hub's wait: nothing is sent
    assert len(watcher._uploader.requests) == 1
    now[0] += 40  # commits are allowed again
    _round(watcher)
    assert [r["step"] for r in watcher._uploader.requests] == [1, 3]
    assert watcher.report.skipped == ["checkpoint-1", "checkpoint-2"]


def test_no_prune_runs_in_the_grace_period_once_a_stop_began(tmp_path):
    """With keep_last, a prune follows the pushes while the training runs; once a stop has
    begun (SIGTERM, SIGINT, stop()) the grace period is for pushes only."""
    now = [100.0]
    watcher = Watcher(tmp_path, "me/run", uploader="thread", settle=1, keep_last=1, clock=lambda: now[0])
    watcher._uploader = ScriptedUploader([OK, OK, OK])
    _ready(tmp_path, 1, watcher, now)
    _round(watcher)  # push checkpoint-1
    _round(watcher)  # pushed: a prune is due
    watcher.request_stop(grace=30)
    for _ in range(3):
        ckpts = _round(watcher)
    assert [r["op"] for r in watcher._uploader.requests] == ["push"], watcher._uploader.requests
    assert watcher._finished(ckpts) is True and watcher.report.pruned == []
