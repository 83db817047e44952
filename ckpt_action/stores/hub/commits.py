"""Commits pinned to a head: the one write primitive of push, promote and prune.

A writer hands over a planning function. Given a head (the branch's commit SHA, None
while the branch does not exist), it answers the next commit to make there, or None
when that head already holds what the writer wants. Every commit names that head as
its parent, so the Hub refuses it (412) if anything landed in between. After a 412,
and after an ambiguous failure (a 5xx, a timeout, a dropped connection: the commit may
have landed), the head is read again and the writer plans again from what is really
there, so nothing is ever committed twice and two writers never mix.

Each attempt carries a random id in its description. A commit that landed behind an
error is found by that id in the branch's history and counted, at the cost of one
history read, only when such an error happened.

The bounds are the same for every writer:

- ambiguous failures: ``Settings.retries`` (``--retries``), each after the usual backoff
  or the Hub's ``Retry-After``;
- conflicts (412, or a failure the writer can fix by planning again): MAX_CONFLICTS,
  after short jittered sleeps so that racing writers spread out;
- commits answered OK: ``max_commits`` (push: one per batch plus a margin).
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckpt_action.errors import CkptError, RemoteError
from ckpt_action.handle import commit_id
from ckpt_action.progress import Ticker, bytes_read_since_now
from ckpt_action.stores.hub.deadline import stall
from ckpt_action.stores.hub.failures import is_transient
from ckpt_action.stores.hub.transport import retry_budget, retry_wait
from ckpt_action.stores.writes import Write, WriteOutcome

if TYPE_CHECKING:
    from ckpt_action.stores.hub.repo import RemoteRepo

log = logging.getLogger(__name__)

MAX_CONFLICTS = 40
"""412s (someone committed since the head was read) one write may meet before it gives up."""
HISTORY_LIMIT = 200
"""Commits read back, at most, to find one that landed behind an error."""
_ID_PREFIX = "ckpt-action write "


@dataclass
class _Attempt:
    plan: Write
    write_id: str
    parent: str | None


class _Budget:
    """Counts conflicts and ambiguous failures against their bounds, and sleeps between tries."""

    def __init__(self, remote: RemoteRepo, what: str) -> None:
        self.remote, self.what = remote, what
        self.conflicts = self.failures = 0

    def conflict(self, exc: BaseException | None = None) -> None:
        if self.conflicts >= MAX_CONFLICTS:
            why = "" if exc is None else f" ({type(exc).__name__})"
            raise RemoteError(f"{self.what}: the branch kept moving{why} after {MAX_CONFLICTS} re-plans:"
                              " try again later")
        self.conflicts += 1
        spread = random.uniform(0.05, 0.3) * min(self.conflicts, 10)  # noqa: S311 - jitter, not a secret
        time.sleep(min(self.remote.settings.retry_max_delay, spread))

    def failure(self, exc: BaseException) -> None:
        settings = self.remote.settings
        # A failed preupload or LFS upload was already retried by the client: one more round.
        if self.failures >= retry_budget(settings, exc):
            raise self.remote.error(exc, self.what) from exc
        log.warning("%s: the commit failed (%s); reading the head again before retrying", self.what,
                    type(exc).__name__)
        time.sleep(retry_wait(settings, exc, self.failures, self.what))
        self.failures += 1


def _as_given(op: Any) -> Any:
    return op


def commit(remote: RemoteRepo, plan: Callable[[str | None], Write | None], *, what: str,
           branch: str = "main", head: str | None = None, max_commits: int = 1,
           replan_on: Callable[[BaseException], bool] | None = None,
           on_landed: Callable[[str, Write], None] | None = None,
           operations: Callable[[Any], Any] = _as_given) -> WriteOutcome:
    """Commit what ``plan(head)`` asks for, each commit pinned to the head it was planned
    at, until it answers None or a final commit lands; after a 412 or an ambiguous
    failure, read the head again and re-plan. The bounds are in this module.

    The one write primitive: push, promote and prune all commit through it. It sits above
    :class:`~ckpt_action.stores.hub.repo.RemoteRepo` (which only reads), so reads never import writes.

    ``head``: the branch's head if the caller just read it (else it is read first).
    ``max_commits``: commits answered OK before the write is given up.
    ``replan_on``: a failure the writer can fix by planning again (push: a local file
    changed while it was sent); it counts as a conflict.
    ``on_landed(oid, plan)``: told of each commit answered OK as it lands, so a caller whose
    later planning fails still knows which commit of its own exists.
    ``operations``: turns each of a write's operations into huggingface_hub's
    ``CommitOperation*`` (:class:`~ckpt_action.stores.repo.RepoStore` turns the store-neutral
    :class:`~ckpt_action.stores.writes.Put`, ``Delete``, ``Copy``); default: they are already.

    >>> from huggingface_hub import CommitOperationAdd
    >>> from ckpt_action.stores.hub.repo import RemoteRepo
    >>> remote = RemoteRepo(settings, "org/run")
    >>> def plan(head):  # one file, unless the head already has it
    ...     if remote.files(head, "notes").get("a.txt"):
    ...         return None
    ...     return Write([CommitOperationAdd("notes/a.txt", b"hi")], "Add a note", final=True)
    >>> out = commit(remote, plan, what="adding a note")
    >>> len(out.pin), len(out.landed), commit(remote, plan, what="adding a note").landed
    (40, 1, [])
    """
    from huggingface_hub.errors import HfHubHTTPError

    budget = _Budget(remote, what)
    ref = None if branch == "main" else branch  # a missing main is a new repo's state, not an error
    if head is None:
        head = remote.resolve(ref)
    landed: list[Write] = []
    unsure: list[_Attempt] = []
    made = 0
    while True:
        wanted = plan(head)
        if wanted is None:
            return WriteOutcome(head, landed + _found(remote, head, unsure), None)
        if made >= max_commits:
            raise RemoteError(f"{what}: still not done after {made} commits: try again later")
        attempt = _Attempt(wanted, secrets.token_hex(8), head)
        sent = [operations(op) for op in wanted.operations]
        description = "\n\n".join(p for p in (wanted.description, _ID_PREFIX + attempt.write_id) if p)
        try:
            with (Ticker(wanted.progress, wanted.upload_bytes, bytes_read_since_now()) if wanted.progress
                  else nullcontext()), stall(remote.settings.timeout):
                if wanted.prepare is not None:
                    wanted.prepare()
                info = remote.api.create_commit(remote.repo, operations=sent,
                                                commit_message=wanted.title, commit_description=description,
                                                parent_commit=head, revision=branch)
        except CkptError:
            raise
        except Exception as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if isinstance(exc, HfHubHTTPError) and status == 412:
                budget.conflict()
            elif is_transient(exc):
                unsure.append(attempt)
                budget.failure(exc)
            elif replan_on is not None and replan_on(exc):
                budget.conflict(exc)
            else:
                raise remote.error(exc, what) from exc
            head = remote.resolve(ref)
            continue
        oid = commit_id(info.oid, what)
        made += 1
        landed.append(wanted)
        head = oid
        if on_landed is not None:
            on_landed(oid, wanted)
        if wanted.final:
            return WriteOutcome(head, landed + _found(remote, head, unsure), wanted)


def _found(remote: RemoteRepo, head: str | None, unsure: list[_Attempt]) -> list[Write]:
    """The attempts that failed ambiguously yet are on the branch below ``head``.

    Once a later commit of ours landed (or the planner found the head right), an earlier
    attempt's fate is settled: it is in the history since its parent, or never will be.
    The history is linear, so reading back to the oldest attempt's parent is enough.
    """
    if not unsure or head is None:
        return []
    try:
        history = remote.history(head, until=unsure[0].parent, limit=HISTORY_LIMIT)
    except CkptError as exc:
        log.warning("could not read the history to count a commit that may have landed behind an error: %s", exc)
        return []
    return [a.plan for a in unsure if any(_ID_PREFIX + a.write_id in text for _oid, text in history)]
