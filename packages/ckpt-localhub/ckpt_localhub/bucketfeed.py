"""The change feed of Storage Buckets: what ``GET /api/buckets/{id}/events`` replays and follows.

Every batch that changes a bucket is recorded here as one ``changes`` event (``{cursor,
changes: [{path, op: add|update|delete, size, xetHash, mtime, uploadedAt}]}``), kept in memory
per bucket (the last ``KEEP`` batches), with a cursor ``<epoch>.<seq>`` where the epoch is this
server's run: a cursor of another run, or older than what is kept, answers ``reset`` and the
client re-lists, as the Hub answers a resume point older than its replay buffer.

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

import secrets
import threading
import time
from collections import deque
from typing import Any

KEEP = 1000
HOLD_S = 2.0

Event = tuple[str, dict[str, Any]]


class ChangeFeed:
    def __init__(self) -> None:
        self.epoch = secrets.token_hex(4)
        self._cond = threading.Condition()
        self._seq = 0
        self._batches: dict[str, deque[tuple[int, int, list[dict[str, Any]]]]] = {}
        self._dropped: dict[str, int] = {}
        """Per bucket, the last sequence number no longer kept."""
        self.last_change_ms: dict[str, int] = {}

    def _cursor(self, seq: int) -> str:
        return f"{self.epoch}.{seq}"

    def record(self, bucket_id: str, changes: list[dict[str, Any]]) -> None:
        if not changes:
            return
        key = bucket_id.lower()
        with self._cond:
            self._seq += 1
            now = int(time.time() * 1000)
            kept = self._batches.setdefault(key, deque())
            kept.append((self._seq, now, changes))
            if len(kept) > KEEP:
                self._dropped[key] = kept.popleft()[0]
            self.last_change_ms[key] = now
            self._cond.notify_all()

    def forget(self, bucket_id: str) -> None:
        """A deleted or moved bucket: its history goes (a resume point in it then answers ``reset``)."""
        key = bucket_id.lower()
        with self._cond:
            if key in self._batches:
                self._dropped[key] = self._seq
                del self._batches[key]

    def read(self, bucket_id: str, cursor: str | None, since_ms: int | None, hold_s: float = HOLD_S) -> list[Event]:
        """One session's events; ``cursor`` resumes strictly after a batch, ``since_ms`` replays the
        batches recorded at or after that instant, neither follows only what comes next."""
        key = bucket_id.lower()
        with self._cond:
            if cursor is not None:
                epoch, _, number = cursor.partition(".")
                if epoch != self.epoch or not number.isdigit() or int(number) < self._dropped.get(key, 0):
                    return [("reset", {"reason": "resume point unknown to this server"})]
                after = int(number)
            elif since_ms is not None:
                after = min((s for s, ms, _ in self._batches.get(key, ()) if ms >= since_ms), default=self._seq + 1) - 1
            else:
                after = self._seq
            events: list[Event] = [("changes", {"cursor": self._cursor(s), "changes": c})
                                   for s, _, c in self._batches.get(key, ()) if s > after]
            last = max(after, self._seq if not events else int(events[-1][1]["cursor"].split(".")[1]))
            events.append(("ready", {"cursor": self._cursor(last)}))
            deadline = time.monotonic() + hold_s
            while True:
                live = [(s, c) for s, _, c in self._batches.get(key, ()) if s > last]
                left = deadline - time.monotonic()
                if live or left <= 0:
                    break
                self._cond.wait(left)
            for s, c in live:
                events.append(("changes", {"cursor": self._cursor(s), "changes": c}))
                last = s
            events.append(("reconnect", {"cursor": self._cursor(last)}))
        return events
