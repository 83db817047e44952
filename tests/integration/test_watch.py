"""`Watcher` against a local Hub: each complete checkpoint pushed once in step order, a half-written
one never, the newest first when stopping, the commit quota coalesced and never a failure.

Uploads run on a thread here (``uploader="thread"``: the integration layer starts no process);
tests/e2e/test_watch_command.py runs the command with its upload process and a training child.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import ckpt_action as ckpt
from ckpt_action.watch.watcher import Watcher

REPO = "me/watched"
SETTLE = 0.3
"""The watchers' quiet period here; stopping, one waits for a checkpoint not complete until it
has been quiet for STALLED (then it is a save that died)."""
STALLED = 4 * SETTLE
QUOTA = [{"method": "POST", "path": "/commit/", "commit_quota": 2}]


def plain(root: Path, step: int, payload: bytes = b"w") -> Path:
    d = root / f"checkpoint-{step}"
    d.mkdir(parents=True)
    (d / "weights.bin").write_bytes(payload * (100 + step))
    return d


def trainer_like(root: Path, step: int, *, finished: bool = True) -> Path:
    """What the Trainer leaves: the files, trainer_state.json last (none when it died half-way)."""
    d = root / f"checkpoint-{step}"
    d.mkdir(parents=True)
    (d / "model.safetensors").write_bytes(b"m" * (200 + step))
    (d / "training_args.bin").write_bytes(b"a")
    if finished:
        (d / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return d


def watcher(root: Path, url: str, **kwargs) -> Watcher:
    kwargs.setdefault("settle", SETTLE)
    return Watcher(root, REPO, endpoint=url, poll=0.05, uploader="thread", **kwargs)


def on_hub(url: str) -> list[str]:
    return sorted(c.subfolder for c in ckpt.list_checkpoints(REPO, endpoint=url) if c.status == "complete")


def wait_for(cond, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_each_complete_checkpoint_is_pushed_once_in_step_order_and_a_half_written_one_never(local_hub, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    trainer_like(out, 10)
    w = watcher(out, local_hub.url, stalled_after=STALLED).start()
    try:
        wait_for(lambda: len(w.report.pushed) == 1)
        trainer_like(out, 20, finished=False)  # killed before trainer_state.json
        trainer_like(out, 30)
        wait_for(lambda: len(w.report.pushed) == 2)
    finally:  # stopping, the watch waits while checkpoint-20 stays quiet past settle, not complete
        report = w.stop(grace=5)
    assert [(n, s) for n, s, _ in report.pushed] == [("checkpoint-10", "checkpoint-10"),
                                                      ("checkpoint-30", "checkpoint-30")]
    assert report.framework == "trainer" and report.incomplete == ["checkpoint-20"]
    assert report.ok and report.exit_code() == 0
    assert on_hub(local_hub.url) == ["checkpoint-10", "checkpoint-30"]
    found = ckpt.latest(REPO, endpoint=local_hub.url)
    assert found is not None and found.revision == report.pushed[-1][2]


def test_stopping_pushes_the_newest_complete_checkpoint_first(local_hub, tmp_path):
    out = tmp_path / "out"
    for step in (1, 2, 3):
        trainer_like(out, step)
    w = watcher(out, local_hub.url)
    w.request_stop(grace=60)  # the preemption notice came before the first look
    w.start()
    report = w.stop()
    assert [n for n, _, _ in report.pushed] == ["checkpoint-3", "checkpoint-2", "checkpoint-1"]


def test_a_folder_that_changes_while_pushed_is_pushed_again(local_hub, tmp_path, monkeypatch):
    out = tmp_path / "out"
    d = plain(out, 5)
    w = watcher(out, local_hub.url, log=print)
    from ckpt_action.watch import uploader

    real = uploader.handle
    calls = []

    def rewrite_during_push(request):
        answer = real(request)
        if not calls:
            (d / "weights.bin").write_bytes(b"changed" * 50)  # the trainer wrote again meanwhile
        calls.append(request)
        return answer

    monkeypatch.setattr(uploader, "handle", rewrite_during_push)
    w.start()
    wait_for(lambda: len(w.report.pushed) == 1)
    report = w.stop(grace=5)
    assert len(calls) == 2
    pulled = ckpt.pull(ckpt.latest(REPO, endpoint=local_hub.url), tmp_path / "back", endpoint=local_hub.url)
    assert (Path(pulled) / "weights.bin").read_bytes() == b"changed" * 50
    assert report.ok


def test_the_hub_commit_quota_coalesces_to_the_newest_and_never_fails(hub_server, hf_client, tmp_path):
    server = hub_server(faults=QUOTA)
    out = tmp_path / "out"
    for step in (1, 2):
        plain(out, step)
    said: list[str] = []
    w = watcher(out, server.url, log=said.append).start()
    wait_for(lambda: len(w.report.pushed) == 2)
    for step in (3, 4, 5):  # the hour's 2 commits are used: the Hub answers 429
        plain(out, step)
    wait_for(lambda: any("commit quota is reached" in m for m in said))
    report = w.stop(grace=2)
    assert [n for n, _, _ in report.pushed] == ["checkpoint-1", "checkpoint-2"]
    assert not report.failed, report.failed
    assert all(why.startswith("commit quota") for why in report.left.values()), report.left
    assert report.ok and report.exit_code() == 0
    assert on_hub(server.url) == ["checkpoint-1", "checkpoint-2"]


def test_past_the_hourly_budget_only_the_newest_is_pushed_and_the_others_said_skipped(local_hub, tmp_path):
    out = tmp_path / "out"
    for step in (1, 2, 3, 4):
        plain(out, step)
    w = watcher(out, local_hub.url, commits_per_hour=1).start()
    wait_for(lambda: len(w.report.pushed) == 1)
    report = w.stop(grace=1)
    assert [n for n, _, _ in report.pushed] == ["checkpoint-4"]
    assert report.skipped == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    assert report.exit_code() == 0


def test_the_local_hub_answers_its_commit_quota_with_the_hubs_words(hub_server, hf_client, tmp_path):
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    server = hub_server(faults=QUOTA)
    api = HfApi(endpoint=server.url)
    api.create_repo(REPO)
    for i in range(2):
        api.create_commit(REPO, [CommitOperationAdd(f"f{i}", b"x")], commit_message=f"c{i}")
    other = "me/other"
    api.create_repo(other)
    api.create_commit(other, [CommitOperationAdd("f", b"x")], commit_message="another repo's quota")
    with pytest.raises(HfHubHTTPError) as caught:
        api.create_commit(REPO, [CommitOperationAdd("f9", b"x")], commit_message="one too many")
    assert caught.value.response.status_code == 429
    assert "exceeded our hourly quotas for action: commit" in str(caught.value)
    assert 3500 <= int(caught.value.response.headers["Retry-After"]) <= 3600


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"pattern": r"checkpoint-\d+"}, "needs exactly one capture group"),
    ({"pattern": r"(a)-(\d+)"}, "needs exactly one capture group"),
    ({"grace": "soon"}, "grace= must be a number"),
    ({"format": "keras"}, "format= must be one of"),
])
def test_bad_arguments_are_refused_naming_them(tmp_path, kwargs, words):
    with pytest.raises(ckpt.InputError) as caught:
        Watcher(tmp_path, REPO, uploader="thread", **kwargs)
    assert words in caught.value.render("api")


def test_a_local_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(ckpt.InputError, match="is a file"):
        Watcher(f, REPO)


def test_keep_last_prunes_the_hub_as_pushes_land(local_hub, tmp_path):
    out = tmp_path / "out"
    w = watcher(out, local_hub.url, keep_last=2).start()
    try:
        for step in (1, 2, 3):
            plain(out, step)
            wait_for(lambda step=step: len(w.report.pushed) == step)
        wait_for(lambda: w.report.pruned == ["checkpoint-1"])
    finally:
        report = w.stop(grace=5)
    assert on_hub(local_hub.url) == ["checkpoint-2", "checkpoint-3"]
    assert report.pruned == ["checkpoint-1"]


def test_keep_last_prunes_after_the_last_push_too_when_the_training_has_exited(local_hub, tmp_path):
    """The training saved its last checkpoints and exited (the usual end, and the watch guide's
    example): what it left is pushed, then pruned to keep_last, not left one (or more) over."""
    out = tmp_path / "out"
    for step in (1, 2, 3):
        trainer_like(out, step)
    w = watcher(out, local_hub.url, keep_last=2)
    report = w.run([sys.executable, "-c", "pass"])  # gone before the first push lands
    assert report.command_status == 0 and [n for n, _s, _r in report.pushed] == [f"checkpoint-{s}" for s in (1, 2, 3)]
    assert report.pruned == ["checkpoint-1"]
    assert on_hub(local_hub.url) == ["checkpoint-2", "checkpoint-3"]


def test_a_watcher_block_that_ends_normally_pushes_everything_then_prunes(local_hub, tmp_path):
    """A script's ``with Watcher(...)`` around its training: when the block ends, what is left
    is pushed (no grace period cuts it) and then pruned to keep_last, as for a command that
    exited by itself."""
    out = tmp_path / "out"
    with watcher(out, local_hub.url, keep_last=2, grace=0) as w:
        for step in (1, 2, 3):
            trainer_like(out, step)
    report = w.report
    assert [n for n, _s, _r in report.pushed] == [f"checkpoint-{s}" for s in (1, 2, 3)], report
    assert report.pruned == ["checkpoint-1"] and not report.left
    assert on_hub(local_hub.url) == ["checkpoint-2", "checkpoint-3"]


def test_finish_past_its_timeout_stops_as_a_grace_period_does(hub_server, hf_client, tmp_path):
    """finish(timeout=) bounds the whole: a push still in flight then is cut short and said so."""
    out = tmp_path / "out"
    hub = hub_server()
    hub.set_faults([{"method": "POST", "path": "/commit/", "delay_s": 5}])
    try:
        w = watcher(out, hub.url).start()
        trainer_like(out, 1)
        wait_for(lambda: w._inflight is not None)
        t0 = time.monotonic()
        report = w.finish(timeout=0.2)
        assert time.monotonic() - t0 < 4, "finish waited for the slow commit"
    finally:
        hub.set_faults([])
    assert report.pushed == [] and "checkpoint-1" in report.left, report


def with_eval(root: Path, step: int, eval_loss: float) -> Path:
    """A Trainer-like checkpoint whose trainer_state.json logged an evaluation at its step."""
    folder = trainer_like(root, step, finished=False)
    state = {"global_step": step, "log_history": [{"step": step, "eval_loss": eval_loss}]}
    (folder / "trainer_state.json").write_text(json.dumps(state))  # last, as the Trainer writes it
    return folder


def test_watch_records_the_eval_metrics_and_prunes_by_keep_best_and_keep_every(local_hub, tmp_path):
    out = tmp_path / "out"
    w = watcher(out, local_hub.url, keep_last=1, keep_every=4, keep_best="eval_loss:min").start()
    try:
        for step, loss in ((1, 0.5), (2, 0.1), (3, 0.4), (4, 0.9), (5, 0.3)):
            with_eval(out, step, loss)
            wait_for(lambda step=step: len(w.report.pushed) == step)
        wait_for(lambda: sorted(w.report.pruned) == ["checkpoint-1", "checkpoint-3"])
    finally:
        w.stop(grace=5)
    infos = {c.subfolder: c for c in ckpt.list_checkpoints(REPO, endpoint=local_hub.url)}
    assert sorted(infos) == ["checkpoint-2", "checkpoint-4", "checkpoint-5"]
    assert infos["checkpoint-2"].metrics == {"eval_loss": 0.1}


def test_watch_refuses_a_bad_keep_best_before_anything_starts(tmp_path):
    with pytest.raises(ckpt.InputError, match="keep_best"):
        Watcher(tmp_path / "out", REPO, keep_best="eval_loss:sideways")


def test_a_checkpoint_linked_out_of_the_dir_is_refused_naming_it_and_nothing_of_it_leaves(local_hub, tmp_path):
    """``out/checkpoint-3 -> ../secret``: the watch never follows it; the secret's id_rsa
    never reaches the Hub, and the warning names the link."""
    secret = trainer_like(tmp_path / "secret", 3).parent / "checkpoint-3"
    (secret / "id_rsa").write_text("PRIVATE KEY")
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoint-3").symlink_to(secret)
    trainer_like(out, 4)
    said: list[str] = []
    w = watcher(out, local_hub.url, log=said.append).start()
    try:
        wait_for(lambda: len(w.report.pushed) == 1)
    finally:
        report = w.stop(grace=5)
    assert [n for n, _s, _r in report.pushed] == ["checkpoint-4"]
    assert "checkpoint-3" in report.refused and not report.ok and report.exit_code() == 1
    assert any("checkpoint-3 is a link to" in m and "outside" in m for m in said), said
    assert on_hub(local_hub.url) == ["checkpoint-4"]


def test_two_dirs_for_one_step_are_refused_naming_both_not_each_reported_pushed(local_hub, tmp_path):
    out = tmp_path / "out"
    for name in ("checkpoint_5", "checkpoint-5", "checkpoint-05"):
        d = out / name
        d.mkdir(parents=True)
        (d / "weights.bin").write_bytes(name.encode())
    plain(out, 6)
    said: list[str] = []
    w = watcher(out, local_hub.url, log=said.append).start()
    try:
        wait_for(lambda: len(w.report.pushed) == 1)
    finally:
        report = w.stop(grace=5)
    assert [n for n, _s, _r in report.pushed] == ["checkpoint-6"]
    assert sorted(report.refused) == ["checkpoint-05", "checkpoint-5", "checkpoint_5"]
    assert any("checkpoint-05, checkpoint-5, checkpoint_5 are all step 5" in m for m in said), said
    assert on_hub(local_hub.url) == ["checkpoint-6"]


def test_a_stop_says_the_seconds_left_then_which_checkpoint_is_durable_at_which_pin(local_hub, tmp_path, monkeypatch):
    """Issue 42's "durable before the deadline, shown": the signal and the seconds left
    (CKPT_PREEMPT_DEADLINE replacing the grace), then per checkpoint "durable at SHA" before
    the watch ends."""
    import re

    monkeypatch.setenv("CKPT_PREEMPT_DEADLINE", "90")
    out = tmp_path / "out"
    plain(out, 1)
    said: list[str] = []
    w = watcher(out, local_hub.url, log=said.append, grace=5).start()
    wait_for(lambda: len(w.report.pushed) == 1)
    plain(out, 2)  # saved just before the notice
    w.request_stop(signal_name="SIGTERM")
    report = w.stop()
    assert any(re.fullmatch(r"SIGTERM: \d+\.\d s left until the deadline \(CKPT_PREEMPT_DEADLINE\): pushing the newest"
                            r" complete checkpoint first", m) for m in said), said
    assert [n for n, _, _ in report.pushed] == ["checkpoint-1", "checkpoint-2"]
    first, second = report.pushed[0][2], report.pushed[1][2]
    assert said[-2:] == [f"checkpoint-1 durable at {first}", f"checkpoint-2 durable at {second}"], said


def test_a_garbage_preempt_deadline_stops_the_watch_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_PREEMPT_DEADLINE", "tomorrow")
    with pytest.raises(ckpt.InputError, match=r"^CKPT_PREEMPT_DEADLINE='tomorrow' is not a deadline"):
        Watcher(tmp_path, REPO)
