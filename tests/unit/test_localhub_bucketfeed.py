"""The local Hub's bucket change feed keeps a bounded number of bytes, per batch and per bucket
(issue 40: it was bounded by count only, about 14 MiB per batch and 13 GiB per bucket)."""

from __future__ import annotations

import pytest

from ckpt_localhub import bucketfeed
from ckpt_localhub.bucketfeed import BadCursor, ChangeFeed


def _changes(n: int, path_len: int = 1000) -> list[dict]:
    return [{"path": f"{i:06d}/" + "p" * path_len, "op": "add", "size": 1, "xetHash": "0" * 64}
            for i in range(n)]


def _cursor(events) -> str:
    return next(data for name, data in events if name == "ready")["cursor"]


def test_a_bucket_keeps_at_most_keep_bytes_and_an_older_cursor_resets(monkeypatch):
    monkeypatch.setattr(bucketfeed, "KEEP_BYTES", 1024 * 1024)
    feed = ChangeFeed()
    start = _cursor(feed.read("me/b", None, None, hold_s=0))
    feed.record("me/b", _changes(10))
    first = f"{feed.epoch}.1"
    for _ in range(200):  # 200 batches of about 11 KB: twice the bound, a fifth of KEEP
        feed.record("me/b", _changes(10))
    assert 0 < feed.kept_bytes("me/b") <= bucketfeed.KEEP_BYTES
    for cursor in (start, first):  # their next batches are gone: re-list
        assert [name for name, _ in feed.read("me/b", cursor, None, hold_s=0)] == ["reset"]
    recent = f"{feed.epoch}.199"
    assert [name for name, _ in feed.read("me/b", recent, None, hold_s=0)] == ["changes", "changes", "ready",
                                                                              "reconnect"]
    assert feed.kept_bytes("other/b") == 0
    feed.forget("me/b")
    assert feed.kept_bytes("me/b") == 0


def test_a_batch_past_batch_bytes_is_not_kept_and_a_follower_is_told_to_re_list(monkeypatch):
    monkeypatch.setattr(bucketfeed, "BATCH_BYTES", 64 * 1024)
    feed = ChangeFeed()
    feed.record("me/b", _changes(2))
    before = f"{feed.epoch}.1"
    feed.record("me/b", _changes(200))  # about 220 KB of changes: past the bound
    assert feed.kept_bytes("me/b") < bucketfeed.BATCH_BYTES
    assert [name for name, _ in feed.read("me/b", before, None, hold_s=0)] == ["reset"]
    after = f"{feed.epoch}.2"
    assert [name for name, _ in feed.read("me/b", after, None, hold_s=0)] == ["ready", "reconnect"]
    feed.record("me/b", _changes(1))
    assert [name for name, _ in feed.read("me/b", after, None, hold_s=0)] == ["changes", "ready", "reconnect"]


@pytest.mark.parametrize("cursor", ["\u00b2", "1.\u00b2", "1.\u0663", "1." + "9" * 5000, "1", "1.", ".1", "1.1.1",
                                    "1.-1", "g.1", "1. 1"])
def test_a_malformed_cursor_is_refused(cursor):
    feed = ChangeFeed()
    with pytest.raises(BadCursor):
        feed.read("me/b", cursor.replace("1.", f"{feed.epoch}.", 1) if cursor.startswith("1.") else cursor,
                  None, hold_s=0)


def test_a_cursor_ahead_of_the_feed_is_refused():
    feed = ChangeFeed()
    feed.record("me/b", _changes(1))
    assert [n for n, _ in feed.read("me/b", f"{feed.epoch}.1", None, hold_s=0)] == ["ready", "reconnect"]
    with pytest.raises(BadCursor, match="ahead"):
        feed.read("me/b", f"{feed.epoch}.2", None, hold_s=0)
