"""push(distributed=True): ranks launched by torchrun on this machine, against a local Hub.

Each test is one small job (a few KB per rank); the ranks record what they got in
files the test reads (see tests/helpers/dist_push_script.py). The tests whose pushes need
nothing of the launch but their own dir and repo share one: one torchrun job makes their
pushes one after the other, each into its own repo on one local Hub (``shared_launch``);
those tests run on one worker (``xdist_group``) so the job runs once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_checkpoint
from tests.helpers.dist_helpers import PUSH_SCRIPT, results, standalone, two_nodes
from tests.helpers.localhub_fixtures import TOKEN, InProcessHub, entries, make_hub_env

REPO = "org/dist"


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


class Launch:
    """One torchrun job of ``nproc`` ranks whose pushes several tests share: each test's
    scenario (its dir of rank folders, its repo, its out dir) is made by ``prepare(base)``, which
    returns the scenario's own settings (``GROUP_RANKS``), if any."""

    def __init__(self, nproc: int, scenarios: dict[str, Callable[[Path], dict[str, str] | None]]) -> None:
        self.nproc, self.scenarios = nproc, scenarios

    def run(self, base: Path) -> tuple[Any, int, str]:
        server = InProcessHub(base / "hub", token=TOKEN)
        plan = []
        for name, prepare in self.scenarios.items():
            own = prepare(base / name) or {}
            (base / name / "out").mkdir()
            plan.append({"LOCAL_DIR": str(base / name / "node" / "rank-{rank}"), "REPO": f"org/{name}",
                         "OUT_DIR": str(base / name / "out"), **own})
        env = _env(server, base, base / "unused", SCENARIOS=json.dumps(plan))
        try:
            [(code, log)] = standalone(self.nproc, [str(PUSH_SCRIPT)], env, base)
        except BaseException:
            server.stop()
            raise
        return server, code, log


def _four_ranks(base: Path) -> None:
    _shards(base / "node", range(4), os.urandom(3000), b'{"layers": 2}\n')


def _group(base: Path) -> dict[str, str]:
    _shards(base / "node", range(4), b"same", b"{}\n")
    return {"GROUP_RANKS": "2,3"}


def _different_bytes(base: Path) -> None:
    dirs = _shards(base / "node", range(2), b"same", b"{}\n")
    (dirs[1] / "common.bin").write_bytes(b"other")


def _unreadable(base: Path) -> None:
    dirs = _shards(base / "node", range(2), b"same", b"{}\n")
    (dirs[1] / "optimizer.pt").symlink_to(base / "gone")


def _big_file(base: Path) -> None:
    from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT

    write_checkpoint(base / "node" / "rank-0", {"model-00000.bin": os.urandom(GIT_OID_LIMIT + 1), "config.json": b"{}"})
    write_checkpoint(base / "node" / "rank-1", {"model-00001.bin": b"small", "config.json": b"{}"})


FOUR_RANKS = Launch(4, {"four": _four_ranks, "group": _group})
TWO_RANKS = Launch(2, {"differ": _different_bytes, "unreadable": _unreadable, "big": _big_file})


@pytest.fixture(scope="module")
def shared_launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Launch], tuple[Any, int, str, Path]]]:
    """``shared_launch(LAUNCH)``: the job run once for the module; (Hub, exit code, log, its base dir)."""
    done: dict[int, tuple[Any, int, str, Path]] = {}

    def get(launch: Launch) -> tuple[Any, int, str, Path]:
        if id(launch) not in done:
            base = tmp_path_factory.mktemp("launch")
            done[id(launch)] = (*launch.run(base), base)
        return done[id(launch)]

    yield get
    for server, *_ in done.values():
        server.stop()


SHARED = pytest.mark.xdist_group("dist-push-shared")  # one worker: each shared launch runs once


@SHARED
@pytest.mark.timeout(300)
def test_four_ranks_make_one_commit_holding_every_ranks_files(shared_launch, hf_client, tmp_path):
    import hashlib

    import ckpt_action as ckpt

    server, code, log, base = shared_launch(FOUR_RANKS)
    repo, here = "org/four", base / "four"
    got = results([here / "out"], 4)
    assert code == 0, log
    assert sorted(got) == [0, 1, 2, 3], log
    handles = {tuple(r["handle"]) for r in got.values()}
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


@pytest.mark.timeout(300)
def test_two_nodes_without_a_shared_filesystem(hub_server, hf_client, tmp_path):
    import ckpt_action as ckpt

    server = hub_server(token=TOKEN)
    common = os.urandom(2000)
    envs, outs = [], []
    for node in range(2):
        base = tmp_path / f"node{node}"
        _shards(base, range(2 * node, 2 * node + 2), common, b"{}\n")
        outs.append(base / "out")
        outs[-1].mkdir()
        envs.append(_env(server, tmp_path, outs[-1], LOCAL_DIR=str(base / "rank-{rank}")))
    launches = two_nodes([str(PUSH_SCRIPT)], envs, tmp_path)
    got = results(outs, 4)
    assert [code for code, _ in launches] == [0, 0], launches
    assert len({tuple(r["handle"]) for r in got.values()}) == 1 and len(got) == 4, got
    found = ckpt.latest(REPO, endpoint=server.url, token=TOKEN)
    assert found is not None and found.revision == got[0]["handle"][2]
    [info] = ckpt.list_checkpoints(REPO, endpoint=server.url, token=TOKEN)
    assert (info.subfolder, info.status, info.files) == ("checkpoint-5", "complete", 6)


# The bound the fault tests wait out for a dead or absent rank: short, yet long enough that
# a live rank's heartbeat (every second) is never missed on a loaded machine.
SILENCE = "8"


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
    server, _code, _log, base = shared_launch(TWO_RANKS)
    error = _same_error(results([base / "differ" / "out"], 2), 2)
    assert error["error"] == "DistributedError"
    assert "common.bin differs between ranks 0 and 1" in error["message"]
    assert "nothing was committed" in error["message"]
    _no_checkpoint(server, "org/differ")


@SHARED
@pytest.mark.timeout(300)
def test_a_file_one_rank_cannot_read_fails_every_rank_with_its_exit_code(shared_launch, hf_client):
    server, _code, _log, base = shared_launch(TWO_RANKS)
    error = _same_error(results([base / "unreadable" / "out"], 2), 2)
    assert "rank 1: checking the local dir" in error["message"] and "dangling symlink optimizer.pt" in error["message"]
    assert error["exit_code"] == 2
    _no_checkpoint(server, "org/unreadable")


@pytest.mark.timeout(300)
def test_a_rank_that_raises_before_push_fails_the_others_within_the_timeout(hub_server, hf_client, tmp_path):
    server = hub_server(token=TOKEN)
    _shards(tmp_path / "node", range(2), b"same", b"{}\n")
    out = tmp_path / "out"
    out.mkdir()
    env = _env(server, tmp_path, out, LOCAL_DIR=str(tmp_path / "node" / "rank-{rank}"), RAISE_RANK="1",
               CKPT_DISTRIBUTED_TIMEOUT=SILENCE)
    standalone(2, [str(PUSH_SCRIPT)], env, tmp_path)
    got = results([out], 2)
    assert got[1]["message"] == "the training step failed"
    assert got[0]["error"] == "DistributedError"
    assert f"rank 1 did not join within {SILENCE} s (CKPT_DISTRIBUTED_TIMEOUT)" in got[0]["message"]
    assert got[0]["seconds"] < 60  # bounded by the setting, not by the process group's 30 minutes
    _no_checkpoint(server)


@pytest.mark.timeout(300)
def test_a_rank_killed_mid_upload_means_no_commit_and_the_others_name_it(hub_server, hf_client, tmp_path):
    import signal

    from tests.helpers.commit_proxy import CommitProxy

    server = hub_server(token=TOKEN)
    pids = tmp_path / "pids"
    pids.mkdir()

    def kill_rank_3() -> None:
        os.kill(int((pids / "rank-3.pid").read_text()), signal.SIGKILL)

    with CommitProxy(server.url) as proxy:
        # Only rank 3 talks through the proxy: its first upload request is its last.
        proxy.before("POST", r"/preupload/", kill_rank_3)
        envs, outs = [], []
        for node in range(2):
            base = tmp_path / f"node{node}"
            _shards(base, range(2 * node, 2 * node + 2), b"same", b"{}\n")
            outs.append(base / "out")
            outs[-1].mkdir()
            envs.append(_env(server, tmp_path, outs[-1], LOCAL_DIR=str(base / "rank-{rank}"), PID_DIR=str(pids),
                             PROXY_RANK_3=proxy.url, CKPT_DISTRIBUTED_TIMEOUT=SILENCE))
        two_nodes([str(PUSH_SCRIPT)], envs, tmp_path, done=lambda: {0, 1} <= set(results(outs, 4)))
    got = results(outs, 4)
    assert 3 not in got
    node0 = {(got[r]["error"], got[r]["message"]) for r in (0, 1)}
    assert len(node0) == 1, got
    [(kind, message)] = node0
    assert kind == "DistributedError" and "nothing was committed" in message
    assert "rank 3 stopped responding" in message or "rank 2 stopped responding" in message
    assert not [c for c in _commits(server) if c.title.startswith("Push")]
    _no_checkpoint(server)


@pytest.mark.timeout(300)
def test_a_commit_answered_500_after_it_landed_is_one_commit_and_one_handle(hub_server, hf_client, tmp_path):
    from tests.helpers.commit_proxy import COMMIT, CommitProxy

    server = hub_server(token=TOKEN)
    _shards(tmp_path / "node", range(2), b"same", b"{}\n")
    out = tmp_path / "out"
    out.mkdir()
    with CommitProxy(server.url) as proxy:
        proxy.after("POST", COMMIT, status=500)
        env = _env(server, tmp_path, out, LOCAL_DIR=str(tmp_path / "node" / "rank-{rank}"), HF_ENDPOINT=proxy.url)
        standalone(2, [str(PUSH_SCRIPT)], env, tmp_path)
        assert [c.status for c in proxy.commits()] == [500]
    got = results([out], 2)
    assert len({tuple(r.get("handle", ())) for r in got.values()}) == 1 and "handle" in got[0], got
    pushes = [c for c in _commits(server) if c.title.startswith("Push")]
    assert len(pushes) == 1 and pushes[0].commit_id == got[0]["handle"][2]


@pytest.mark.timeout(300)
def test_an_upload_refused_on_one_rank_fails_every_rank_naming_it(hub_server, hf_client, tmp_path):
    from tests.helpers.commit_proxy import CommitProxy

    server = hub_server(token=TOKEN)
    _shards(tmp_path / "node", range(2), b"same", b"{}\n")
    out = tmp_path / "out"
    out.mkdir()
    with CommitProxy(server.url) as proxy:
        # Only rank 1 talks through the proxy, which refuses every LFS upload.
        proxy.fail("PUT", r"/localhub-lfs/", status=403, times=-1)
        env = _env(server, tmp_path, out, LOCAL_DIR=str(tmp_path / "node" / "rank-{rank}"), PROXY_RANK_1=proxy.url)
        standalone(2, [str(PUSH_SCRIPT)], env, tmp_path)
    error = _same_error(results([out], 2), 2)
    assert "nothing was committed: rank 1: uploading" in error["message"], error
    assert not [c for c in _commits(server) if c.title.startswith("Push")]


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

    server, _code, _log, base = shared_launch(FOUR_RANKS)
    got = results([base / "group" / "out"], 4)
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

    server, code, log, base = shared_launch(TWO_RANKS)
    big = (base / "big" / "node" / "rank-0" / "model-00000.bin").read_bytes()
    assert code == 0, log
    found = ckpt.latest("org/big", endpoint=server.url, token=TOKEN)
    assert found is not None, log
    pulled = ckpt.pull(found, tmp_path / "pulled", endpoint=server.url, token=TOKEN)
    assert (pulled / "model-00000.bin").read_bytes() == big
    assert (pulled / "model-00001.bin").read_bytes() == b"small"
