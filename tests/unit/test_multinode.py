"""resume_from_hub in a job of many processes (integrations/multinode.py): rank 0's answer and
each node's pull outcome travel as JSON through the job's store, never as pickles, with ranks
as threads over one in-memory store."""

from __future__ import annotations

import json
import pickle
import threading
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the store is torch.distributed's (the [distributed] extra)")

from ckpt_action.errors import CkptError, NoCheckpointError  # noqa: E402
from ckpt_action.handle import CheckpointHandle  # noqa: E402
from ckpt_action.integrations.multinode import exchange  # noqa: E402

HANDLE = CheckpointHandle("org/run", "checkpoint-8", "a" * 40, 8, "http://127.0.0.1:1")


def _ranks(world: int, store: Any, find: Any, fetch: Any) -> list[Any]:
    out: list[Any] = [None] * world

    def one(rank: int) -> None:
        try:
            out[rank] = exchange(store, rank, world, rank % 2 == 0, find, fetch, timeout=10.0)
        except Exception as exc:  # the test compares what each rank raised
            out[rank] = exc

    threads = [threading.Thread(target=one, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_rank_zeros_handle_reaches_every_rank_and_each_nodes_first_rank_fetches_it() -> None:
    fetched: list[CheckpointHandle] = []
    got = _ranks(4, torch.distributed.HashStore(), lambda: HANDLE, fetched.append)
    assert got == [HANDLE] * 4
    assert fetched == [HANDLE, HANDLE]  # ranks 0 and 2: each node's local rank 0


def test_rank_zeros_error_is_every_ranks_error_of_the_same_kind() -> None:
    def find() -> None:
        raise NoCheckpointError("org/run holds no complete checkpoint")

    got = _ranks(3, torch.distributed.HashStore(), find, lambda h: None)
    assert all(type(e) is NoCheckpointError and e.exit_code == 3 for e in got), got
    assert {str(e) for e in got} == {"org/run holds no complete checkpoint"}


def test_a_nodes_failed_pull_fails_every_rank_naming_it() -> None:
    def fetch(handle: CheckpointHandle) -> None:
        raise CkptError("disk full")

    got = _ranks(2, torch.distributed.HashStore(), lambda: HANDLE, fetch)
    assert all(isinstance(e, CkptError) and "resuming from the Hub failed: rank 0: disk full" in str(e)
               for e in got), got


class _RunsCode:
    def __init__(self, marker: Any) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        # exec, not os.system: the unit layer forbids starting a process, and running code
        # in the unpickling process is the point.
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("key", ["found", "fetched/0"])
def test_a_pickle_planted_where_a_rank_reads_is_refused_not_run(tmp_path, key) -> None:
    marker = tmp_path / "ran"
    store = torch.distributed.HashStore()
    if key != "found":  # rank 0's answer as it sends it: the planted value is what comes next
        store.set("ckpt-action/resume/1/found", json.dumps({"ok": {**HANDLE.to_dict(), "endpoint": HANDLE.endpoint}}))
    store.set(f"ckpt-action/resume/1/{key}", pickle.dumps(_RunsCode(marker)))
    with pytest.raises(CkptError, match="in the job's store is not ckpt-action's"):
        exchange(store, 1, 2, True, lambda: HANDLE, lambda h: None, timeout=10.0)
    assert not marker.exists()


@pytest.mark.parametrize("planted", [b'{"ok": {"repo": "org/run"}}', b'{"ok": {"repo": "org/run", "subfolder": "c",'
                                     b' "revision": "main", "step": 1, "endpoint": "http://x"}}', b"[" * 100_000])
def test_an_answer_of_the_wrong_shape_is_refused(planted) -> None:
    store = torch.distributed.HashStore()
    store.set("ckpt-action/resume/1/found", planted)
    with pytest.raises(CkptError, match="rank 0's answer in the job's store is not ckpt-action's"):
        exchange(store, 1, 2, True, lambda: HANDLE, lambda h: None, timeout=10.0)
