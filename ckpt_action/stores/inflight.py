"""Files sent a few at a time, each registered on the Hub as soon as its own upload ends.

One upload session for a whole checkpoint registers nothing until its end: hf_xet
registers the xorbs it sent (their shard) when the session closes, and a bucket's paths
come with the batch request after it. A push killed before that end leaves bytes on the
Hub that nothing can find, and a re-run sends them all again. Sent in bounded batches, one
session each, every batch whose upload ended is registered (LFS objects the batch API then
skips, a shard that Xet's deduplication then finds, bucket paths the listing then shows)
while the others are still going, so a re-run sends again at most what was in flight. None
of it is visible as a checkpoint: the one commit (a repo) or manifest (a bucket) that
publishes it still comes after every file, alone and last.

Files go in batches (:func:`upload_batches`: files together up to ``CKPT_UPLOAD_BATCH_BYTES``,
512 MiB, a bigger one alone), one batch per session, one at a time by default: each batch's
LFS objects or Xet shard (a bucket: its shard and paths) are registered when it ends. A batch
rather than a file per session because the client sends the files of one session in parallel:
a session per file, one at a time, made a push never cut off take 1.2x (Xet) to 1.5x (LFS)
as long. A re-run sends again at most the batches in flight: ``CKPT_UPLOAD_CONCURRENCY``
times the batch size, or the biggest file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def each_file(items: Sequence[T], send: Callable[[T], R], *, concurrency: int) -> list[R]:
    """``send(item)`` for every item, ``concurrency`` at once, answers in the items' order.

    After the first failure no new item starts; the ones in flight finish (each is a
    whole upload the client retries itself), then that failure is raised.
    """
    if concurrency <= 1 or len(items) <= 1:
        return [send(item) for item in items]
    # Submitted one at a time as others end, so a failure stops the items not yet started.
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="ckpt-upload") as pool:
        pending: dict[Future[R], int] = {}
        answers: dict[int, R] = {}
        queue = iter(enumerate(items))
        failed: BaseException | None = None
        while True:
            while failed is None and len(pending) < concurrency:
                nxt = next(queue, None)
                if nxt is None:
                    break
                pending[pool.submit(send, nxt[1])] = nxt[0]
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                index = pending.pop(future)
                exc = future.exception()
                if exc is not None:
                    failed = failed or exc
                else:
                    answers[index] = future.result()
        if failed is not None:
            raise failed
    return [answers[i] for i in range(len(items))]


def upload_batches(sizes: list[tuple[str, int]], limit: int) -> list[list[str]]:
    """The files (name, size), in order, as batches of at most ``limit`` bytes each, or of
    one file bigger than that.

    >>> upload_batches([("a", 3), ("b", 3), ("c", 9), ("d", 1), ("e", 1)], 8)
    [['a', 'b'], ['c'], ['d', 'e']]
    """
    out: list[list[str]] = []
    batch: list[str] = []
    total = 0
    for rel, size in sizes:
        if batch and total + size > limit:
            out.append(batch)
            batch, total = [], 0
        batch.append(rel)
        total += size
    if batch:
        out.append(batch)
    return out
