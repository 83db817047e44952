"""The change feed of Storage Buckets: what ``GET /api/buckets/{id}/events`` replays and follows.

Every batch that changes a bucket is recorded here as one ``changes`` event (``{cursor,
changes: [{path, op: add|update|delete, size, xetHash, mtime, uploadedAt}]}``), kept in memory
per bucket, with a cursor ``<epoch>.<seq>`` where the epoch is this server's run: a cursor of
another run, or older than what is kept, answers ``reset`` and the client re-lists, as the Hub
answers a resume point older than its replay buffer. What is kept is bounded by bytes as well
as by count: per bucket the last ``KEEP`` batches and at most ``KEEP_BYTES`` (their changes as
JSON), the oldest dropped first; a batch whose changes alone pass ``BATCH_BYTES`` is not kept
at all (a resume point before it answers ``reset``; a follower waiting on the feed is told
``reset`` at once), so a bucket's history never holds more than ``KEEP_BYTES``.
A cursor that is not ``<hex epoch>.<ASCII digits>``, or that names a batch this run has not
recorded yet (ahead of the feed), is refused (:class:`BadCursor`, a 400): taking it would
skip every change until the feed caught up with it.

The Hub's feed is one long stream with pings; here an answer is a whole body, so a session
replays what came after the resume point (``cursor=`` or ``since=<ISO8601>``), says ``ready``,
waits up to ``HOLD_S`` for a change (sent at once), then ends with ``reconnect`` and the
cursor to resume from; huggingface_hub's follower reconnects a second later. A change is
therefore seen within about ``HOLD_S`` + 1 s, and a session holds a connection at most
``HOLD_S``.

Example:

    >>> feed = ChangeFeed()
    >>> feed.record("me/b", [{"path": "a", "op": "add"}])
    >>> session = feed.read("me/b", cursor=None, since_ms=0, hold_s=0)
    >>> [name for name, _ in session]
    ['changes', 'ready', 'reconnect']
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections import deque
from typing import Any

KEEP = 1000
KEEP_BYTES = 64 * 1024 * 1024
BATCH_BYTES = 8 * 1024 * 1024
HOLD_S = 2.0

_CURSOR = re.compile(r"([0-9a-f]{1,32})\.([0-9]{1,19})")

Event = tuple[str, dict[str, Any]]
Batch = tuple[int, int, list[dict[str, Any]], int]
"""A kept batch: its sequence number, when (ms), its changes, their size as JSON."""


class BadCursor(ValueError):
    """A resume point that is malformed, or ahead of the feed."""


class ChangeFeed:
    def __init__(self) -> None:
        self.epoch = secrets.token_hex(4)
        self._cond = threading.Condition()
        self._seq = 0
        self._batches: dict[str, deque[Batch]] = {}
        self._bytes: dict[str, int] = {}
        """Per bucket, the bytes its kept batches hold (their changes as JSON)."""
        self._dropped: dict[str, int] = {}
        """Per bucket, the last sequence number no longer kept."""
        self._dropped_ms: dict[str, int] = {}
        """Per bucket, when the last batch no longer kept was recorded."""
        self.last_change_ms: dict[str, int] = {}

    def _cursor(self, seq: int) -> str:
        return f"{self.epoch}.{seq}"

    def record(self, bucket_id: str, changes: list[dict[str, Any]]) -> None:
        if not changes:
            return
        key = bucket_id.lower()
        size = len(json.dumps(changes))
        with self._cond:
            self._seq += 1
            now = int(time.time() * 1000)
            kept = self._batches.setdefault(key, deque())
            if size > BATCH_BYTES:
                # Too large to keep: every resume point before it is now unknown (``reset``).
                kept.clear()
                self._bytes[key] = 0
                self._dropped[key] = self._seq
                self._dropped_ms[key] = now
            else:
                kept.append((self._seq, now, changes, size))
                self._bytes[key] = self._bytes.get(key, 0) + size
                while len(kept) > KEEP or self._bytes[key] > KEEP_BYTES:
                    seq, ms, _, dropped = kept.popleft()
                    self._bytes[key] -= dropped
                    self._dropped[key], self._dropped_ms[key] = seq, ms
            self.last_change_ms[key] = now
            self._cond.notify_all()

    def kept_bytes(self, bucket_id: str) -> int:
        """What the feed holds for this bucket (its kept batches' changes as JSON)."""
        with self._cond:
            return self._bytes.get(bucket_id.lower(), 0)

    def forget(self, bucket_id: str) -> None:
        """A deleted or moved bucket: its history goes (a resume point in it then answers ``reset``)."""
        key = bucket_id.lower()
        with self._cond:
            if key in self._batches:
                self._dropped[key] = self._seq
                del self._batches[key]
                self._bytes.pop(key, None)
                self._dropped_ms[key] = int(time.time() * 1000)

    def read(self, bucket_id: str, cursor: str | None, since_ms: int | None, hold_s: float = HOLD_S) -> list[Event]:
        """One session's events; ``cursor`` resumes strictly after a batch, ``since_ms`` replays the
        batches recorded at or after that instant, neither follows only what comes next.
        :class:`BadCursor` for a malformed cursor, or one ahead of the feed."""
        key = bucket_id.lower()
        reset: list[Event] = [("reset", {"reason": "resume point unknown to this server"})]
        with self._cond:
            if cursor is not None:
                match = _CURSOR.fullmatch(cursor)
                if match is None:
                    raise BadCursor("cursor must be <epoch>.<sequence number> as the feed sent it")
                epoch, number = match[1], int(match[2])
                if epoch != self.epoch or number < self._dropped.get(key, 0):
                    return reset
                if number > self._seq:
                    raise BadCursor(f"cursor {cursor} is ahead of this feed "
                                    f"(its last batch is {self._cursor(self._seq)})")
                after = number
            elif since_ms is not None:
                after = min((s for s, ms, _, _ in self._batches.get(key, ()) if ms >= since_ms),
                            default=self._seq + 1) - 1
                if since_ms <= self._dropped_ms.get(key, -1):
                    return reset  # changes since then are no longer all kept
            else:
                after = self._seq
            events: list[Event] = [("changes", {"cursor": self._cursor(s), "changes": c})
                                   for s, _, c, _ in self._batches.get(key, ()) if s > after]
            last = max(after, self._seq if not events else int(events[-1][1]["cursor"].split(".")[1]))
            events.append(("ready", {"cursor": self._cursor(last)}))
            deadline = time.monotonic() + hold_s
            while True:
                if self._dropped.get(key, 0) > last:
                    return [*events, *reset]  # a change too large to keep, or dropped unsent: re-list
                live = [(s, c) for s, _, c, _ in self._batches.get(key, ()) if s > last]
                left = deadline - time.monotonic()
                if live or left <= 0:
                    break
                self._cond.wait(left)
            for s, c in live:
                events.append(("changes", {"cursor": self._cursor(s), "changes": c}))
                last = s
            events.append(("reconnect", {"cursor": self._cursor(last)}))
        return events
