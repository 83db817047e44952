"""Ranks of one job agreeing on one operation, over the process group's key-value store.

Why the store and not collectives: a gloo collective that one rank never joins blocks
the others for the group's timeout (30 minutes by default), then fails on each rank
with a different message that names no one. Here each rank posts its part under a key
of its own, every wait is bounded, and a rank that has not posted is judged by its
heartbeat: one that never joined, or whose heartbeat stopped for
``CKPT_DISTRIBUTED_TIMEOUT`` seconds, fails the operation. A slow upload is not a dead
rank: its heartbeat goes on.

The outcome is decided once, by compare-and-set on one key: the first failure recorded
there (or rank 0's claim that it commits) is what every rank sees, so every rank raises
the same error, naming the rank and the cause.

The values are JSON, each bounded in bytes by its reader: the store listens on the
network in a multi-node job, so whatever a key holds is data from outside, parsed, never
unpickled; the caller checks its shape (see :mod:`ckpt_action.ops.distpush`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

from ckpt_action.errors import DistributedError, one_line, unrendered

log = logging.getLogger(__name__)
T = TypeVar("T")

_COMMIT = "commit"
_ABORT = "abort:"
MAX_VALUE_BYTES = 1024 * 1024
"""Bytes of one value read from the store, unless its reader says otherwise."""
_MAX_MESSAGE = 2000
_POLL_MIN, _POLL_MAX = 0.02, 0.25
"""Seconds between two looks at the store while waiting: short first (the others are often
a moment behind), then longer, so hundreds of waiting ranks do not flood the store."""


class Store(Protocol):
    """What is used of ``torch.distributed.Store`` (TCPStore, PrefixStore, FileStore, HashStore)."""

    def set(self, key: str, value: bytes | str) -> None: ...
    def get(self, key: str) -> bytes: ...
    def check(self, keys: list[str]) -> bool: ...
    def add(self, key: str, amount: int) -> int: ...
    def compare_set(self, key: str, expected: str, desired: str) -> bytes: ...
    def delete_key(self, key: str) -> bool: ...


class Session:
    """One operation (a push) among ``world`` ranks: heartbeats, bounded gathers, one decision.

    Every rank opens a session for each operation in the same order; the n-th session of
    each rank is the same operation (each rank counts its own in the store).

    On every rank, over the job's store (a process group is needed, so this example is not run here)::

        with Session(store, rank, world, name="ckpt/0", timeout=300, what="push ckpt-5") as s:
            everyone = s.gather("scan", my_digests)
    """

    def __init__(self, store: Store, rank: int, world: int, *, name: str, timeout: float, what: str) -> None:
        self.store, self.rank, self.world = store, rank, world
        self.timeout, self.what = timeout, what
        seq = store.add(f"{name}/seq/{rank}", 1)
        self.prefix = f"{name}/{seq}"
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="ckpt-action heartbeat", daemon=True)

    def __enter__(self) -> Session:
        self.store.add(self._hb(self.rank), 1)  # joined: the others stop counting "never arrived"
        self._beat.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._stop.set()
        self._beat.join()
        if exc is not None and not isinstance(exc, DistributedError):
            # Not through run() (KeyboardInterrupt, SystemExit, a bug): still tell the others
            # at once, rather than after the timeout.
            self._record(f"rank {self.rank}: {type(exc).__name__}: {unrendered(exc)}",
                         int(getattr(exc, "exit_code", 1)))
        self.store.set(self._key("done", self.rank), b"1")
        if self.rank == 0:
            self._linger()

    def _linger(self) -> None:
        """Rank 0 may host the store (``init_process_group`` outside torchrun): before it goes
        on (and perhaps exits), let the others read the outcome. A rank that posts no
        "done" and whose heartbeat has stopped is not waited for."""
        stale = 3 * min(1.0, self.timeout / 5)
        seen: dict[int, tuple[int, float]] = {}
        while True:
            now = time.monotonic()
            waiting = [r for r in range(self.world) if not self.store.check([self._key("done", r)])]
            for r in waiting:
                beat = self.store.add(self._hb(r), 0)
                if r not in seen or seen[r][0] != beat:
                    seen[r] = (beat, now)
            if all(now - seen[r][1] > stale for r in waiting):
                return
            time.sleep(_POLL_MAX)

    # ------------------------------------------------------------------ keys

    def _key(self, phase: str, rank: int | None = None) -> str:
        return f"{self.prefix}/{phase}" + ("" if rank is None else f"/{rank}")

    def _hb(self, rank: int) -> str:
        return self._key("alive", rank)

    def _heartbeat(self) -> None:
        interval = min(1.0, self.timeout / 5)
        while not self._stop.wait(interval):
            try:
                self.store.add(self._hb(self.rank), 1)
            except Exception as exc:  # noqa: BLE001 - the store is gone (its host died): the waits say so
                log.debug("heartbeat stopped: %s", exc)
                return

    # ------------------------------------------------------------------ running a rank's part

    def run(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` on this rank; a failure becomes every rank's failure, naming this rank."""
        try:
            return fn()
        except DistributedError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever it is, every rank must hear of it
            self.fail(f"rank {self.rank}: {what}: {unrendered(exc)}", int(getattr(exc, "exit_code", 1)))

    def fail(self, message: str, exit_code: int = 1) -> NoReturn:
        """Record a failure (unless one is recorded already, or rank 0 is committing) and raise
        what was recorded."""
        raise self._error(self._record(message, exit_code), message)

    def _record(self, message: str, exit_code: int) -> bytes:
        doc = json.dumps({"message": message, "exit_code": exit_code})
        return self.store.compare_set(self._key("decision"), "", _ABORT + doc)

    def _error(self, decision: bytes, mine: str) -> DistributedError:
        text = decision.decode("utf-8", "replace")
        if text.startswith(_ABORT):
            message, code = _failure(text[len(_ABORT):])
            return DistributedError(f"{self.what} failed, nothing was committed: {message}", code)
        # Rank 0 claimed the commit before this rank gave up on it.
        return DistributedError(f"{self.what}: {mine}, while rank 0 was committing: the outcome is unknown (the"
                                " commit may have landed): check with latest before pushing again")

    def claim_commit(self) -> None:
        """Rank 0: decide that the commit is made; raises if a failure was recorded first."""
        decided = self.store.compare_set(self._key("decision"), "", _COMMIT)
        if decided.decode("utf-8", "replace") != _COMMIT:
            raise self._error(decided, "")

    def failure(self, doc: object) -> DistributedError:
        """The error another rank posted (``{"message": ..., "exit_code": 1|2}``), checked."""
        message, code = _failure(doc)
        return DistributedError(message, code)

    def failed_commit(self, exc: BaseException) -> DistributedError:
        """Rank 0's commit failed after the claim: the error every rank raises."""
        return DistributedError(f"{self.what} failed on rank {self.rank}: committing: {unrendered(exc)}",
                                int(getattr(exc, "exit_code", 1)))

    # ------------------------------------------------------------------ exchanging values

    def gather(self, phase: str, value: object, *, root: int | None = None,
               limit: int = MAX_VALUE_BYTES) -> list[Any] | None:
        """Post this rank's ``value`` (JSON) and return every rank's, in rank order (on ``root``
        only, when given: the others get None and go on at once). A value above ``limit``
        bytes, or not JSON, fails the operation naming the rank whose key held it."""
        self.store.set(self._key(phase, self.rank), _encode(value))
        if root is not None and root != self.rank:
            return None
        keys = {r: self._key(phase, r) for r in range(self.world)}
        self._await(keys)
        return [self._read(keys[r], r, phase, limit) for r in range(self.world)]

    def drop(self, phase: str) -> None:
        """Delete every rank's value of ``phase`` (the only reader, once it has read them)."""
        for r in range(self.world):
            self.store.delete_key(self._key(phase, r))

    def post(self, phase: str, value: object) -> None:
        self.store.set(self._key(phase), _encode(value))

    def fetch(self, phase: str, sender: int, *, limit: int = MAX_VALUE_BYTES) -> Any:
        """The value ``sender`` posts for ``phase`` (JSON), waiting (bounded) for it."""
        key = self._key(phase)
        self._await({sender: key})
        return self._read(key, sender, phase, limit)

    def _read(self, key: str, rank: int, phase: str, limit: int) -> Any:
        raw = self.store.get(key)
        if len(raw) > limit:
            self.fail(f"rank {rank}'s {phase} in the job's store is {len(raw)} bytes, above the {limit} it may be")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; nesting, a RecursionError
            self.fail(f"rank {rank}'s {phase} in the job's store is not ckpt-action's (not JSON: {one_line(exc, 80)})")

    def reject(self, rank: int, phase: str, why: str) -> NoReturn:
        """Fail the operation over a value of the wrong shape (a caller's check)."""
        self.fail(f"rank {rank}'s {phase} in the job's store is not ckpt-action's: {why}")

    def _await(self, keys: dict[int, str]) -> None:
        seen: dict[int, tuple[int, float]] = {}
        poll = _POLL_MIN
        while True:
            decision = self._decision()
            if decision is not None and decision.decode("utf-8", "replace").startswith(_ABORT):
                raise self._error(decision, "")
            missing = [r for r, key in keys.items() if not self.store.check([key])]
            if not missing:
                return
            now = time.monotonic()
            for r in missing:
                beat = self.store.add(self._hb(r), 0)
                if r not in seen or seen[r][0] != beat:
                    seen[r] = (beat, now)
                elif now - seen[r][1] > self.timeout:
                    self.fail(self._silent(r, beat))
            time.sleep(poll)
            poll = min(_POLL_MAX, poll * 1.5)

    def _decision(self) -> bytes | None:
        key = self._key("decision")
        return self.store.get(key) if self.store.check([key]) else None

    def _silent(self, rank: int, beat: int) -> str:
        bound = f"{self.timeout:g} s (CKPT_DISTRIBUTED_TIMEOUT)"
        if beat == 0:
            return (f"rank {rank} did not join within {bound}: it failed or stopped before calling push"
                    " (see its own log)")
        return f"rank {rank} stopped responding (no sign of life for {bound}): it died or hangs"



def _encode(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def _failure(doc: str | object) -> tuple[str, int]:
    """A recorded failure's (message, exit code) from its JSON (or parsed) form; what the
    store holds, checked."""
    parsed = doc
    if isinstance(doc, str):
        try:
            parsed = json.loads(doc)
        except (ValueError, RecursionError):
            parsed = None
    if (isinstance(parsed, dict) and isinstance(parsed.get("message"), str)
            and parsed.get("exit_code") in (1, 2)):
        return one_line(parsed["message"], _MAX_MESSAGE), int(parsed["exit_code"])
    return "a failure was recorded in the job's store that is not ckpt-action's", 1
