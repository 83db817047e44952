"""ckpt-action push --distributed: the CLI joins the torchrun job's process group."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import ENTRYPOINT, write_checkpoint
from tests.helpers.localhub_fixtures import TOKEN, entries, make_hub_env

REPO = "org/cli"


@pytest.mark.timeout(300)
def test_every_rank_of_a_torchrun_job_reports_the_one_commit_of_a_shared_dir(hub_server, hf_client, tmp_path):
    from tests.helpers.dist_helpers import standalone

    server = hub_server(token=TOKEN)
    # Both ranks see the same dir (a shared filesystem): each file goes up once.
    shared = write_checkpoint(tmp_path / "ckpt", {"model-a.bin": os.urandom(3000), "model-b.bin": os.urandom(3001),
                                             "config.json": b"{}\n"})
    env = make_hub_env(server.url, tmp_path / "hf_home", server.token)
    env.update(CKPT_DISTRIBUTED_TIMEOUT="30", CKPT_RETRY_DELAY="0.05")
    [(code, log)] = standalone(2, [str(ENTRYPOINT), "push", "--repo", REPO, "--local-dir", str(shared), "--step",
                                   "3", "--distributed", "--json"], env, tmp_path)
    assert code == 0, log
    docs = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert len(docs) == 2 and len({d["revision"] for d in docs}) == 1, log
    assert docs[0]["subfolder"] == "checkpoint-3" and docs[0]["commits"] == 1
    assert len(entries(server, "PUT", contains="/localhub-lfs/")) == 2


def test_without_torch_it_is_exit_2_naming_the_extra(cli, tmp_path):
    shadow = tmp_path / "no-torch"
    (shadow / "torch").mkdir(parents=True)
    (shadow / "torch" / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    write_checkpoint(tmp_path / "ckpt", {"a.bin": b"\0\1"})
    run = cli("push", "--repo", REPO, "--local-dir", str(tmp_path / "ckpt"), "--step", "1", "--distributed",
              "--endpoint", "http://127.0.0.1:9", PYTHONPATH=str(shadow))
    assert run.code == 2, run
    assert "--distributed needs torch: pip install 'ckpt-action[distributed]'" in run.stderr


def test_a_job_that_cannot_be_joined_fails_within_the_timeout_saying_where(cli, tmp_path):
    pytest.importorskip("torch", reason="joining a process group needs torch")
    from tests.helpers.dist_helpers import FAULT_TIMEOUT, free_port

    # Nothing listens at the port, so no live peer can be misjudged: the shortest of the
    # tests' bounds is enough to show the bound is kept.
    bound = f"{FAULT_TIMEOUT / 4:g}"
    write_checkpoint(tmp_path / "ckpt", {"a.bin": b"\0\1"})
    run = cli("push", "--repo", REPO, "--local-dir", str(tmp_path / "ckpt"), "--step", "1", "--distributed",
              "--endpoint", "http://127.0.0.1:9", RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
              MASTER_PORT=str(free_port()), CKPT_DISTRIBUTED_TIMEOUT=bound)
    assert run.code == 1, run
    assert "--distributed: rank 1 could not join the job's process group at 127.0.0.1:" in run.stderr
    assert f"within {bound} s (CKPT_DISTRIBUTED_TIMEOUT)" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.timeout(300)
def test_ranks_given_different_steps_each_exit_1_naming_the_rank_and_the_flag(hub_server, hf_client, tmp_path):
    import sys

    from tests.helpers.dist_helpers import standalone

    server = hub_server(token=TOKEN)
    shared = write_checkpoint(tmp_path / "ckpt", {"model.bin": os.urandom(3000), "config.json": b"{}\n"})
    env = make_hub_env(server.url, tmp_path / "hf_home", server.token)
    env.update(CKPT_DISTRIBUTED_TIMEOUT="30", CKPT_RETRY_DELAY="0.05")
    # Each rank its own step (7, 8), as a job script with a bug in its step arithmetic would.
    cmd = (f"{sys.executable} {ENTRYPOINT} push --repo {REPO} --local-dir {shared} --step $((7 + RANK))"
           " --distributed; echo \"rank $RANK exit $?\"")
    [(_code, log)] = standalone(2, ["--no-python", "sh", "-c", cmd], env, tmp_path)
    assert "rank 0 exit 1" in log and "rank 1 exit 1" in log, log
    assert log.count("rank 1 disagrees with rank 0 about --step: '8' vs '7'") == 2, log
    assert "Traceback" not in log
    assert not entries(server, "POST", contains="/preupload/")
    assert not entries(server, "POST", contains="/commit/")
