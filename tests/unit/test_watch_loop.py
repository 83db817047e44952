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
