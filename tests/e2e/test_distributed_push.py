"""push(distributed=True): ranks launched by torchrun on this machine, against a local Hub.

Each test is one small push (a few KB per rank); the ranks record what they got in
files the test reads (see tests/helpers/dist_push_script.py). A torchrun job costs seconds
(torch imported by the launcher and by every rank), a push a fraction of one, so the
tests share jobs: one job makes their pushes one after the other, each into its own repo
with its own dir, its own settings and its own proxy on one local Hub (``shared_launch``):
one job of two ranks on one node, one of two nodes of two ranks each. A push in which a
rank dies or never calls push comes last in its job. The tests run on one worker
(``xdist_group``) so each job runs once.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_checkpoint
from tests.helpers.commit_proxy import COMMIT, CommitProxy
from tests.helpers.dist_helpers import FAULT_TIMEOUT, PUSH_SCRIPT, results, standalone, two_nodes
from tests.helpers.localhub_fixtures import TOKEN, InProcessHub, entries, make_hub_env

REPO = "org/dist"
WAIT = f"{FAULT_TIMEOUT:g}"
"""CKPT_DISTRIBUTED_TIMEOUT of the pushes that wait out a dead or absent rank."""


def _env(server: Any, tmp_path: Path, out: Path, **extra: str) -> dict[str, str]:
    env = make_hub_env(server.url, tmp_path / "hf_home", server.token)
    env.update(REPO=REPO, STEP="5", OUT_DIR=str(out), CKPT_RETRY_DELAY="0.05", CKPT_RETRY_MAX_DELAY="0.5",
               CKPT_TIMEOUT="20", CKPT_DISTRIBUTED_TIMEOUT="20")
    env.update(extra)
    return env


def _commits(server: Any, repo: str = REPO) -> list[Any]:
    from huggingface_hub import HfApi

    return HfApi(endpoint=server.url, token=TOKEN).list_repo_commits(repo)


def _shards(root: Path, ranks: range, common: bytes, config: bytes) -> dict[int, Path]:
    dirs = {}
    for rank in ranks:
        dirs[rank] = write_checkpoint(root / f"rank-{rank}", {
            f"model-{rank:05d}.bin": os.urandom(4096 + rank), "common.bin": common, "config.json": config})
    return dirs


@dataclass
class Setup:
    """What a scenario's ``prepare`` gets: its own dir, the launch's Hub, and a place for
    what its test reads after the job (a proxy), kept open until the module's tests are done."""

    here: Path
    hub: Any
    stack: ExitStack
    kept: dict[str, Any] = field(default_factory=dict)

    def proxy(self) -> CommitProxy:
        """A reverse proxy in front of the Hub, for this scenario's ranks to talk through."""
        self.kept["proxy"] = self.stack.enter_context(CommitProxy(self.hub.url))
        return self.kept["proxy"]


@dataclass
class Ran:
    hub: Any
    launches: list[tuple[int, str]]
    """(exit code, output) of each torchrun launch."""
    base: Path
    setups: dict[str, Setup]

    def out(self, name: str, world: int) -> dict[int, dict[str, Any]]:
        """What each rank recorded of scenario ``name``."""
        return results([self.base / name / "out"], world)

    def log(self) -> str:
        return "\n---\n".join(log for _, log in self.launches)


class Launch:
    """One torchrun job whose pushes several tests share: ``nodes`` launches of ``nproc``
    ranks each. Each test's scenario (its dir of rank folders, its repo, its out dir) is made by
    ``prepare(setup)``, which returns the scenario's own settings (``GROUP_RANKS``, ``ENV``...;
    see the script), if any. ``last``: ranks (all of node 0's) whose record of that scenario
    ends the job (torchrun's agent of a node that lost a rank waits for it otherwise)."""

    def __init__(self, nodes: int, nproc: int, scenarios: dict[str, Callable[[Setup], dict[str, Any] | None]],
                 last: tuple[str, set[int]] | None = None) -> None:
        self.nodes, self.nproc, self.scenarios, self.last = nodes, nproc, scenarios, last

    def run(self, base: Path, stack: ExitStack) -> Ran:
        server = InProcessHub(base / "hub", token=TOKEN)
        stack.callback(server.stop)
        plan, setups = [], {}
        for name, prepare in self.scenarios.items():
            setups[name] = setup = Setup(base / name, server, stack)
            own = prepare(setup) or {}
            (base / name / "out").mkdir()
            plan.append({"LOCAL_DIR": str(base / name / "node" / "rank-{rank}"), "REPO": f"org/{name}",
                         "OUT_DIR": str(base / name / "out"), **own})
        env = _env(server, base, base / "unused", SCENARIOS=json.dumps(plan))
        if self.nodes == 1:
            launches = standalone(self.nproc, [str(PUSH_SCRIPT)], env, base)
        else:
            done = None
            if self.last is not None:
                name, ranks = self.last
                world = self.nodes * self.nproc

                def done() -> bool:
                    return ranks <= set(results([base / name / "out"], world))
            launches = two_nodes([str(PUSH_SCRIPT)], [env] * self.nodes, base, nproc=self.nproc, done=done)
        return Ran(server, launches, base, setups)


def _four_ranks(setup: Setup) -> None:
    _shards(setup.here / "node", range(4), os.urandom(3000), b'{"layers": 2}\n')


def _group(setup: Setup) -> dict[str, str]:
    _shards(setup.here / "node", range(4), b"same", b"{}\n")
    return {"GROUP_RANKS": "2,3"}


def _no_shared_filesystem(setup: Setup) -> dict[str, str]:
    # Each node's ranks have their dirs under the node's own root, which no rank of the
    # other node is told of.
    common = os.urandom(2000)
    for node in range(2):
        _shards(setup.here / f"node{node}", range(2 * node, 2 * node + 2), common, b"{}\n")
    return {"LOCAL_DIR": str(setup.here / "node{node}" / "rank-{rank}")}


def _killed_mid_upload(setup: Setup) -> dict[str, Any]:
    pids = setup.here / "pids"
    pids.mkdir(parents=True)

    def kill_rank_3() -> None:
        os.kill(int((pids / "rank-3.pid").read_text()), signal.SIGKILL)

    # Only rank 3 talks through the proxy: its first upload request is its last.
    proxy = setup.proxy()
    proxy.before("POST", r"/preupload/", kill_rank_3)
    _shards(setup.here / "node", range(4), b"same", b"{}\n")
    return {"PID_DIR": str(pids), "PROXY_RANK_3": proxy.url, "ENV": {"CKPT_DISTRIBUTED_TIMEOUT": WAIT}}


def _different_bytes(setup: Setup) -> None:
    dirs = _shards(setup.here / "node", range(2), b"same", b"{}\n")
    (dirs[1] / "common.bin").write_bytes(b"other")


def _unreadable(setup: Setup) -> None:
    dirs = _shards(setup.here / "node", range(2), b"same", b"{}\n")
    (dirs[1] / "optimizer.pt").symlink_to(setup.here / "gone")


def _big_file(setup: Setup) -> None:
    from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT

    node = setup.here / "node"
    write_checkpoint(node / "rank-0", {"model-00000.bin": os.urandom(GIT_OID_LIMIT + 1), "config.json": b"{}"})
    write_checkpoint(node / "rank-1", {"model-00001.bin": b"small", "config.json": b"{}"})


def _upload_refused(setup: Setup) -> dict[str, str]:
    _shards(setup.here / "node", range(2), b"same", b"{}\n")
    # Only rank 1 talks through the proxy, which refuses every LFS upload.
    proxy = setup.proxy()
    proxy.fail("PUT", r"/localhub-lfs/", status=403, times=-1)
    return {"PROXY_RANK_1": proxy.url}


def _commit_landed_behind_500(setup: Setup) -> dict[str, Any]:
    _shards(setup.here / "node", range(2), b"same", b"{}\n")
    proxy = setup.proxy()
    proxy.after("POST", COMMIT, status=500)
    return {"ENV": {"HF_ENDPOINT": proxy.url}}


def _raises_before_push(setup: Setup) -> dict[str, Any]:
    _shards(setup.here / "node", range(2), b"same", b"{}\n")
    return {"RAISE_RANK": "1", "ENV": {"CKPT_DISTRIBUTED_TIMEOUT": WAIT}}


TWO_NODES = Launch(2, 2, {"four": _four_ranks, "group": _group, "nodes": _no_shared_filesystem,
                          "killed": _killed_mid_upload}, last=("killed", {0, 1}))
TWO_RANKS = Launch(1, 2, {"differ": _different_bytes, "unreadable": _unreadable, "big": _big_file,
                          "refused": _upload_refused, "landed": _commit_landed_behind_500,
                          "raises": _raises_before_push})


@pytest.fixture(scope="module")
def shared_launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Launch], Ran]]:
    """``shared_launch(LAUNCH)``: the job, run once for the module."""
    done: dict[int, Ran] = {}
    with ExitStack() as stack:

        def get(launch: Launch) -> Ran:
            if id(launch) not in done:
                done[id(launch)] = launch.run(tmp_path_factory.mktemp("launch"), stack)
            return done[id(launch)]

        yield get


SHARED = pytest.mark.xdist_group("dist-push-shared")  # one worker: each shared launch runs once


@SHARED
@pytest.mark.timeout(300)
def test_four_ranks_make_one_commit_holding_every_ranks_files(shared_launch, hf_client, tmp_path):
    import hashlib

    import ckpt_action as ckpt

    ran = shared_launch(TWO_NODES)
    server, repo, here = ran.hub, "org/four", ran.base / "four"
    got = ran.out("four", 4)
    assert sorted(got) == [0, 1, 2, 3], ran.log()
    handles = {tuple(r.get("handle", ())) for r in got.values()}
    assert len(handles) == 1, got
    [(name, subfolder, sha, step)] = handles
    assert (name, subfolder, step) == (repo, "checkpoint-5", 5)
    assert _commits(server, repo)[0].commit_id == sha
    assert len([c for c in _commits(server, repo) if c.title.startswith("Push")]) == 1
    found = ckpt.latest(repo, endpoint=server.url, token=TOKEN)
    assert found is not None and found.revision == sha
    pulled = ckpt.pull(found, tmp_path / "pulled", endpoint=server.url, token=TOKEN)
    names = sorted(p.name for p in pulled.iterdir() if not p.name.startswith("."))
    assert names == ["ckpt-manifest.json", "common.bin", "config.json", *[f"model-{r:05d}.bin" for r in range(4)]]
    common = (here / "node" / "rank-0" / "common.bin").read_bytes()
    assert (pulled / "common.bin").read_bytes() == common
    # Every rank holds common.bin: its bytes went up once, not four times (the uploads of this
    # scenario's files: the other pushes of the launch went to the same Hub).
    oids = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (here / "node").glob("rank-*/*")}
    uploads = [e for e in entries(server, "PUT", contains="/localhub-lfs/")
               if e["path"].split("/localhub-lfs/", 1)[1][:64] in oids]
    assert len(uploads) == 5, uploads


@SHARED
@pytest.mark.timeout(300)
def test_two_nodes_without_a_shared_filesystem(shared_launch, hf_client):
    import ckpt_action as ckpt

    ran = shared_launch(TWO_NODES)
    server, repo = ran.hub, "org/nodes"
    got = ran.out("nodes", 4)
    assert len({tuple(r.get("handle", ())) for r in got.values()}) == 1 and len(got) == 4, (got, ran.log())
    found = ckpt.latest(repo, endpoint=server.url, token=TOKEN)
    assert found is not None and found.revision == got[0]["handle"][2]
    [info] = ckpt.list_checkpoints(repo, endpoint=server.url, token=TOKEN)
    assert (info.subfolder, info.status, info.files) == ("checkpoint-5", "complete", 6)


def _no_checkpoint(server: Any, repo: str = REPO) -> None:
    import ckpt_action as ckpt

    assert ckpt.latest(repo, endpoint=server.url, token=TOKEN) is None


def _same_error(got: dict[int, dict[str, Any]], ranks: int) -> dict[str, Any]:
    assert sorted(got) == list(range(ranks)), got
    errors = {(r["error"], r["message"], r["exit_code"]) for r in got.values()}
    assert len(errors) == 1, got
    return got[0]


@SHARED
@pytest.mark.timeout(300)
def test_a_path_with_different_bytes_on_two_ranks_fails_every_rank_naming_them(shared_launch, hf_client):
    ran = shared_launch(TWO_RANKS)
    error = _same_error(ran.out("differ", 2), 2)
    assert error["error"] == "DistributedError"
    assert "common.bin differs between ranks 0 and 1" in error["message"]
    assert "nothing was committed" in error["message"]
    _no_checkpoint(ran.hub, "org/differ")


@SHARED
@pytest.mark.timeout(300)
def test_a_file_one_rank_cannot_read_fails_every_rank_with_its_exit_code(shared_launch, hf_client):
    ran = shared_launch(TWO_RANKS)
    error = _same_error(ran.out("unreadable", 2), 2)
    assert "rank 1: checking the local dir" in error["message"] and "dangling symlink optimizer.pt" in error["message"]
    assert error["exit_code"] == 2
    _no_checkpoint(ran.hub, "org/unreadable")


@SHARED
@pytest.mark.timeout(300)
def test_a_rank_that_raises_before_push_fails_the_others_within_the_timeout(shared_launch, hf_client):
    ran = shared_launch(TWO_RANKS)
    got = ran.out("raises", 2)
    assert got[1]["message"] == "the training step failed", (got, ran.log())
    assert got[0]["error"] == "DistributedError"
    assert f"rank 1 did not join within {WAIT} s (CKPT_DISTRIBUTED_TIMEOUT)" in got[0]["message"]
    # Bounded by the setting (the wait, then rank 0's linger of three heartbeats, on a loaded
    # machine), not by the process group's 30 minutes; and not cut short of it.
    assert FAULT_TIMEOUT <= got[0]["seconds"] < 8 * FAULT_TIMEOUT, got
    _no_checkpoint(ran.hub, "org/raises")


@SHARED
@pytest.mark.timeout(300)
def test_a_rank_killed_mid_upload_means_no_commit_and_the_others_name_it(shared_launch, hf_client):
    ran = shared_launch(TWO_NODES)
    got = ran.out("killed", 4)
    assert 3 not in got, (got, ran.log())
    node0 = {(got[r]["error"], got[r]["message"]) for r in (0, 1)}
    assert len(node0) == 1, got
    [(kind, message)] = node0
    assert kind == "DistributedError" and "nothing was committed" in message
    assert "rank 3 stopped responding" in message or "rank 2 stopped responding" in message
    assert not [c for c in _commits(ran.hub, "org/killed") if c.title.startswith("Push")]
    _no_checkpoint(ran.hub, "org/killed")


@SHARED
@pytest.mark.timeout(300)
def test_a_commit_answered_500_after_it_landed_is_one_commit_and_one_handle(shared_launch, hf_client):
    ran = shared_launch(TWO_RANKS)
    proxy = ran.setups["landed"].kept["proxy"]
    assert [c.status for c in proxy.commits()] == [500]
    got = ran.out("landed", 2)
    assert len({tuple(r.get("handle", ())) for r in got.values()}) == 1 and "handle" in got[0], got
    pushes = [c for c in _commits(ran.hub, "org/landed") if c.title.startswith("Push")]
    assert len(pushes) == 1 and pushes[0].commit_id == got[0]["handle"][2]


@SHARED
@pytest.mark.timeout(300)
def test_an_upload_refused_on_one_rank_fails_every_rank_naming_it(shared_launch, hf_client):
    ran = shared_launch(TWO_RANKS)
    error = _same_error(ran.out("refused", 2), 2)
    assert "nothing was committed: rank 1: uploading" in error["message"], error
    assert not [c for c in _commits(ran.hub, "org/refused") if c.title.startswith("Push")]


def test_outside_a_process_group_distributed_true_pushes_alone(local_hub, tmp_path):
    import ckpt_action as ckpt

    write_checkpoint(tmp_path / "ckpt", {"a.bin": b"\0\1", "config.json": b"{}\n"})
    h = ckpt.push(tmp_path / "ckpt", "org/alone", step=1, distributed=True, endpoint=local_hub.url)
    assert ckpt.latest("org/alone", endpoint=local_hub.url) == h
    with pytest.raises(ckpt.InputError, match="group= goes with distributed=True"):
        ckpt.push(tmp_path / "ckpt", "org/alone", step=2, group=object(), endpoint=local_hub.url)


@SHARED
@pytest.mark.timeout(300)
def test_group_limits_the_push_to_its_ranks(shared_launch, hf_client, tmp_path):
    import ckpt_action as ckpt

    ran = shared_launch(TWO_NODES)
    server = ran.hub
    got = ran.out("group", 4)
    assert got[0]["skipped"] and got[1]["skipped"], got
    assert got[2]["handle"] == got[3]["handle"], got
    pulled = ckpt.pull(ckpt.latest("org/group", endpoint=server.url, token=TOKEN), tmp_path / "pulled",
                       endpoint=server.url, token=TOKEN)
    assert sorted(p.name for p in pulled.glob("model-*")) == ["model-00002.bin", "model-00003.bin"]


@SHARED
@pytest.mark.timeout(300)
def test_a_file_above_the_git_id_limit_is_in_the_distributed_commit(shared_launch, hf_client, tmp_path):
    # Push reads a big file once on the Xet path by letting its upload hash it; the ranks of a
    # distributed push must agree on every digest before anything is uploaded, so they hash
    # big files up front: none may be left out of the manifest.
    import ckpt_action as ckpt

    ran = shared_launch(TWO_RANKS)
    server = ran.hub
    big = (ran.base / "big" / "node" / "rank-0" / "model-00000.bin").read_bytes()
    [(code, log)] = ran.launches
    assert code == 0, log
    found = ckpt.latest("org/big", endpoint=server.url, token=TOKEN)
    assert found is not None, log
    pulled = ckpt.pull(found, tmp_path / "pulled", endpoint=server.url, token=TOKEN)
    assert (pulled / "model-00000.bin").read_bytes() == big
    assert (pulled / "model-00001.bin").read_bytes() == b"small"
