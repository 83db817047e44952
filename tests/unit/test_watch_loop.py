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
