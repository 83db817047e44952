"""The ranks' agreement (ops/coordination.py) and the owners of shared paths (ops/distpush.py),
with ranks as threads over one in-memory store: the bounds and the one decision, fast."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the store is torch.distributed's (the [distributed] extra)")

from ckpt_action.checkpoint.manifest import FileDigest  # noqa: E402
from ckpt_action.errors import DistributedError, InputError, param  # noqa: E402
from ckpt_action.ops.coordination import Session  # noqa: E402
from ckpt_action.ops.distpush import assign  # noqa: E402
from tests.conftest import FAULT_MATRIX_TIMEOUT  # noqa: E402


def _ranks(world: int, body: Any, timeout: float = 1.0) -> list[Any]:
    """Run ``body(session)`` on ``world`` threads; each one's result or exception."""
    store = torch.distributed.HashStore()
    out: list[Any] = [None] * world

    def one(rank: int) -> None:
        try:
            with Session(store, rank, world, name="t", timeout=timeout, what="push x") as session:
                out[rank] = body(session)
        except Exception as exc:  # the test compares what each rank raised
            out[rank] = exc

    threads = [threading.Thread(target=one, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def test_a_slow_rank_that_shows_signs_of_life_is_waited_for() -> None:
    timeout = FAULT_MATRIX_TIMEOUT  # a heartbeat every fifth of it: late by that much only on a loaded machine

    def body(session: Session) -> Any:
        if session.rank == 1:
            time.sleep(3 * timeout)  # three times the timeout, heartbeats going on
        return session.gather("scan", session.rank * 10)

    assert _ranks(2, body, timeout=timeout) == [[0, 10], [0, 10]]


def test_a_rank_that_never_joins_fails_every_other_rank_naming_it() -> None:
    store = torch.distributed.HashStore()
    started = time.monotonic()
    with pytest.raises(DistributedError, match=r"rank 1 did not join within 0.5 s \(CKPT_DISTRIBUTED_TIMEOUT\)"), \
            Session(store, 0, 2, name="t", timeout=0.5, what="push x") as session:
        session.gather("scan", 0)
    assert time.monotonic() - started < 30


def test_one_ranks_failure_is_every_ranks_error_and_no_commit_can_be_claimed() -> None:
    def body(session: Session) -> Any:
        if session.rank == 2:
            session.run("hashing", lambda: open("/nonexistent/x"))
        session.gather("scan", 0)
        session.claim_commit()
        return "committed"

    got = _ranks(3, body)
    assert all(isinstance(e, DistributedError) for e in got), got
    assert len({str(e) for e in got}) == 1
    assert "push x failed, nothing was committed: rank 2: hashing: [Errno 2]" in str(got[0])


def test_a_ranks_error_names_its_parameter_as_the_door_showing_every_ranks_error_spells_it() -> None:
    def body(session: Session) -> Any:
        if session.rank == 1:
            def bad() -> None:
                raise InputError(f"{param('local_dir')} has x.bin, which cannot be read", param="local_dir")
            session.run("checking the local dir", bad)
        return session.gather("scan", 0)

    got = _ranks(2, body)
    assert all(isinstance(e, DistributedError) for e in got), got
    assert all(e.exit_code == 2 for e in got)
    assert "rank 1: checking the local dir: local_dir= has x.bin" in str(got[0])
    assert "rank 1: checking the local dir: --local-dir has x.bin" in got[0].render("cli")
    assert "input 'local-dir' has x.bin" in got[1].render("action")


def test_shared_paths_must_agree_and_are_uploaded_by_one_rank_each() -> None:
    big, small = FileDigest(100, "a" * 64), FileDigest(10, "b" * 64)
    merged, owners, problem = assign([{"s0": big, "cfg": small}, {"s1": big, "cfg": small}, {"cfg": small}])
    assert problem is None and set(merged) == {"s0", "s1", "cfg"}
    assert owners == {"s0": 0, "s1": 1, "cfg": 2}  # the rank with the fewest bytes so far
    _merged, _owners, problem = assign([{"cfg": small}, {"cfg": FileDigest(10, "c" * 64)}])
    assert problem is not None and problem.startswith("cfg differs between ranks 0 and 1")


class _RunsCode:
    """Unpickled, it runs ``touch <marker>``: what a process reaching the job's store could plant."""

    def __init__(self, marker: Any) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        # exec, not os.system: the unit layer forbids starting a process, and running code
        # in the unpickling process is the point.
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("phase", ["ready", "result"])
def test_a_pickle_planted_where_a_rank_reads_is_refused_not_run(tmp_path, phase) -> None:
    import pickle

    marker = tmp_path / "ran"
    store = torch.distributed.HashStore()
    with pytest.raises(DistributedError, match=rf"rank 0's {phase} in the job's store is not ckpt-action's"
                                               r" \(not JSON"), \
            Session(store, 1, 2, name="t", timeout=5.0, what="push x") as session:
        store.set(session._key(phase), pickle.dumps(_RunsCode(marker)))
        session.fetch(phase, 0)
    assert not marker.exists()


def test_a_pickle_planted_in_a_gathered_value_is_refused_not_run(tmp_path) -> None:
    import pickle

    marker = tmp_path / "ran"
    store = torch.distributed.HashStore()
    # Rank 0 lingers at the end for rank 1, which never joins, three heartbeats (of a fifth of
    # the timeout each): a short timeout keeps that short.
    with pytest.raises(DistributedError, match=r"rank 1's upload in the job's store is not ckpt-action's"), \
            Session(store, 0, 2, name="t", timeout=0.5, what="push x") as session:
        store.set(session._key("upload", 1), pickle.dumps(_RunsCode(marker)))
        session.gather("upload", {}, root=0)
    assert not marker.exists()


def test_a_value_nested_too_deep_to_parse_is_refused() -> None:
    store = torch.distributed.HashStore()
    with pytest.raises(DistributedError, match=r"rank 0's ready in the job's store is not ckpt-action's \(not JSON"), \
            Session(store, 1, 2, name="t", timeout=5.0, what="push x") as session:
        store.set(session._key("ready"), "[" * 200_000)
        session.fetch("ready", 0)


def test_a_value_above_its_bound_is_refused_before_it_is_parsed() -> None:
    store = torch.distributed.HashStore()
    with pytest.raises(DistributedError, match=r"rank 0's ready in the job's store is 2000002 bytes, above the"
                                               r" 1000 it may be"), \
            Session(store, 1, 2, name="t", timeout=5.0, what="push x") as session:
        store.set(session._key("ready"), '"' + "a" * 2_000_000 + '"')
        session.fetch("ready", 0, limit=1000)


def test_values_of_the_wrong_shape_are_refused_naming_the_rank() -> None:
    from ckpt_action.ops import distpush

    good = {"size": 1, "sha256": "a" * 64}
    me = {"store": "http://hub/org/run", "folder": "x", "step": None}
    cases: list[tuple[Any, str]] = [
        (lambda s: distpush._scan(s, 1, {"../escape": good}), "rank 1's scan .*unusable path '../escape'"),
        (lambda s: distpush._scan(s, 1, {"a.bin": {"size": -1, "sha256": "a" * 64}}), "rank 1's scan .*size"),
        (lambda s: distpush._scan(s, 1, {"a.bin": {"size": 1, "git_oid": "b" * 40}}), "without its sha256"),
        # A rank may name only the files it was given to upload, inline bytes only as agreed.
        (lambda s: distpush._shipped(s, 1, {"identity": me, "files": {"other/../x": None}},
                                     {"a.bin": FileDigest(1, "a" * 64)}), "does not name exactly the 1 file"),
        (lambda s: distpush._shipped(s, 1, {"identity": me, "files": {"a.bin": "eA=="}},
                                     {"a.bin": FileDigest(1, "a" * 64)}),
         "inline bytes of 'a.bin' are not the ones it hashed"),
        # Which checkpoint it wrote goes with its files, for the one finalize to hold to rank 0's.
        (lambda s: distpush._shipped(s, 1, {"a.bin": None}, {"a.bin": FileDigest(1, "a" * 64)}),
         "not a report of the checkpoint it wrote and its files"),
        (lambda s: distpush._result(s, {"ok": ["main", 1, 1, 0]}), "rank 0's result .*not a commit's SHA"),
        (lambda s: distpush._result(s, ["anything"]), "rank 0's result .*not a commit's SHA"),
    ]
    for check, message in cases:
        store = torch.distributed.HashStore()
        with pytest.raises(DistributedError, match=message), \
                Session(store, 0, 1, name="t", timeout=5.0, what="push x") as session:
            check(session)


@pytest.mark.parametrize("planted", [b'abort:{"message": ["x"], "exit_code": 99}', b"abort:\xff\xfe"])
def test_a_planted_failure_of_the_wrong_shape_reads_as_not_ckpt_actions(planted) -> None:
    store = torch.distributed.HashStore()
    with pytest.raises(DistributedError, match="a failure was recorded in the job's store that is not"
                                               " ckpt-action's") as raised, \
            Session(store, 0, 1, name="t", timeout=5.0, what="push x") as session:
        store.set(session._key("decision"), planted)
        session.gather("scan", 0)
    assert raised.value.exit_code == 1


def test_a_rank_failing_after_rank_0_claimed_the_commit_says_the_outcome_is_unknown() -> None:
    """Rank 0 has claimed the commit (it may land) when rank 1 fails: rank 1 never says
    "nothing was committed"; it says the outcome is unknown and how to check it."""
    claimed = threading.Event()

    def body(session: Session) -> Any:
        if session.rank == 0:
            session.claim_commit()
            claimed.set()
            return "committing"
        assert claimed.wait(30)
        session.run("uploading", lambda: open("/nonexistent/x"))
        return "never"

    got = _ranks(2, body)
    assert got[0] == "committing"
    assert isinstance(got[1], DistributedError), got
    message = str(got[1])
    assert "nothing was committed" not in message, message
    assert "the outcome is unknown" in message and "check with latest" in message, message
    assert "rank 1: uploading" in message, message
