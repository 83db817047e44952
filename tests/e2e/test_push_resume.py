"""A push killed part-way and run again sends again no file whose bytes had all reached the
Hub, beyond the files that were in flight (``CKPT_UPLOAD_CONCURRENCY`` of them), on a model
repo over LFS and over Xet, and in a Storage Bucket (bounded batches, each one's Xet shard and
paths registered as it ends); and the checkpoint is still published by one commit (a repo) or
one manifest written last (a bucket), nothing of it visible before.

The kill comes at a point the local Hub's fault injection sets: the first ``registered``
registrations (an LFS PUT, a Xet shard) pass, the next is refused (503, forever), and the
push process is SIGKILLed as soon as the access log shows that refusal. The bytes that had
arrived and the bytes the re-run sends are read from the access log.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_checkpoint
from tests.helpers.chaos_helpers import env_for
from tests.helpers.localhub_fixtures import REPO_ROOT

FILES = 4
SIZE = 3 * 2**20
CONCURRENCY = 1
SUBFOLDER = "checkpoint-7"
# Xet frames each ~64 KiB chunk with a header, and a shard or an LFS answer is not a file's bytes.
SLACK = 64 * 1024
WAIT_S = 120  # a bound on a hang, never a pause: the loop below ends on the refusal it waits for

# Where each store registers a file, and which requests carry its bytes.
STORES: dict[str, dict[str, Any]] = {
    # Batches of 1 MiB: each 3 MiB file goes in a batch of its own (past CKPT_UPLOAD_BATCH_BYTES, as by default).
    "lfs": {"repo": "o/resume-lfs", "env": {"HF_HUB_DISABLE_XET": "1", "CKPT_UPLOAD_BATCH_BYTES": str(2**20)},
            "registers": ("PUT", "/localhub-lfs/"), "bytes": ("PUT", "/localhub-lfs/")},
    "xet": {"repo": "o/resume-xet", "env": {"CKPT_UPLOAD_BATCH_BYTES": str(2**20)},
            "registers": ("POST", "/v1/shards"), "bytes": ("POST", "/v1/xorbs/")},
    "bucket": {"repo": "hf://buckets/local-user/resume", "env": {"CKPT_UPLOAD_BATCH_BYTES": str(2**20)},
               "registers": ("POST", "/v1/shards"), "bytes": ("POST", "/v1/xorbs/")},
}
# A bucket also refused its very first shard: one batch for every file sent them all before it.
CASES = [(store, registered) for store in sorted(STORES) for registered in (1, 2)] + [("bucket", 0)]


def _matching(entries: list[dict[str, Any]], kind: tuple[str, str]) -> list[dict[str, Any]]:
    method, part = kind
    return [e for e in entries if e["method"] == method and part in e["path"]]


def _kill_at_the_refusal(proc: subprocess.Popen[str], hub: Any, kind: tuple[str, str]) -> None:
    """SIGKILL the push once the local Hub has refused (503) a request of ``kind``, its registration."""
    try:
        deadline = time.monotonic() + WAIT_S
        while not any(e["status"] == 503 for e in _matching(hub.log_entries(), kind)):
            assert proc.poll() is None, f"the push ended before the refusal: {proc.stderr.read()!r}"[-2000:]
            assert time.monotonic() < deadline, f"the push never reached the refused {kind[1]}"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


def _push(repo: str, src: Path) -> list[str]:
    return [sys.executable, "-m", "ckpt_action", "push", "--repo", repo, "--local-dir", str(src),
            "--subfolder", SUBFOLDER, "--step", "7", "--json"]


@pytest.mark.parametrize(("store", "registered"), CASES)
def test_rerun_after_kill_resends_only_files_in_flight(hub_server, tmp_path, store, registered):
    spec = STORES[store]
    rng = random.Random(f"{store}-{registered}")  # noqa: S311 - test bytes, not a secret
    files = {f"shard-{i}.bin": rng.randbytes(SIZE) for i in range(FILES)}
    src = write_checkpoint(tmp_path / "src", files)
    method, part = spec["registers"]
    path_re = "^" + part
    # Each request consumes one rule: the first ones pass (a 1 ms delay, a rule must act), then refusals.
    hub = hub_server(faults=[*({"method": method, "path": path_re, "delay_s": 0.001} for _ in range(registered)),
                             {"method": method, "path": path_re, "status": 503, "times": -1}])
    env = env_for(hub, tmp_path, CKPT_UPLOAD_CONCURRENCY=str(CONCURRENCY), **spec["env"])

    proc = subprocess.Popen(_push(spec["repo"], src), env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _kill_at_the_refusal(proc, hub, spec["registers"])

    before = hub.log_entries()
    arrived = sum(e["bytes_in"] for e in _matching(before, spec["bytes"]) if e["status"] == 200)
    missing = FILES * SIZE - min(arrived, FILES * SIZE)
    latest = subprocess.run([sys.executable, "-m", "ckpt_action", "latest", "--repo", spec["repo"], "--json"],
                            env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert latest.returncode == 0, latest.stderr[-2000:]
    assert json.loads(latest.stdout)["found"] is False, f"a checkpoint was visible after the kill: {latest.stdout}"

    hub.set_faults([])
    rerun = subprocess.run(_push(spec["repo"], src), env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                           check=False)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    resent = sum(e["bytes_in"] for e in _matching(hub.log_entries()[len(before):], spec["bytes"]))
    in_flight = CONCURRENCY * SIZE
    assert resent <= missing + in_flight + SLACK, (
        f"{store}: the re-run sent {resent} bytes; {missing} were missing and at most {in_flight} in flight"
        f" ({arrived} had arrived before the kill)")

    out = json.loads(rerun.stdout)
    if store == "bucket":
        _one_manifest_last(hub, spec["repo"], out, env)
        return
    from huggingface_hub import HfApi

    commits = HfApi(endpoint=hub.url).list_repo_commits(spec["repo"])
    pushes = [c for c in commits if c.title.startswith("Push ")]
    assert [c.commit_id for c in pushes] == [out["revision"]] == [commits[0].commit_id]


def _one_manifest_last(hub: Any, uri: str, out: dict[str, Any], env: dict[str, str]) -> None:
    """The bucket: no manifest was written before the re-run's last batch, which holds it
    alone, and latest finds the checkpoint at the pin the push answered."""
    batches = [e for e in hub.log_entries() if e["method"] == "POST" and e["path"].endswith("/batch")]
    assert len(batches) >= 2 and all(e["status"] == 200 for e in batches[len(batches) - 1:])
    latest = subprocess.run([sys.executable, "-m", "ckpt_action", "latest", "--repo", uri, "--json"], env=env,
                            cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert latest.returncode == 0, latest.stderr[-2000:]
    found = json.loads(latest.stdout)
    assert found["subfolder"] == SUBFOLDER and found["revision"] == out["revision"], (found, out)


RANK_FILES = 3


def test_each_rank_of_a_bucket_push_killed_part_way_resends_only_its_batch_in_flight(hub_server, tmp_path):
    """Two ranks (threads of one process, tests/helpers/ranks_bucket_push.py) push one
    checkpoint into a bucket, each its own files in batches of one file; the first shard
    passes, the next is refused and the process is SIGKILLed. Run again, each rank sends
    again at most its own batch in flight, and one manifest publishes the checkpoint."""
    pytest.importorskip("torch", reason="the ranks' store is torch.distributed's (the [distributed] extra)")
    from tests.helpers.localhub_fixtures import TOKEN

    uri = "hf://buckets/local-user/ranks-resume"
    rng = random.Random("ranks")  # noqa: S311 - test bytes, not a secret
    dirs = [write_checkpoint(tmp_path / f"rank-{r}", {f"model-{r}-{i}.bin": rng.randbytes(SIZE)
                                                      for i in range(RANK_FILES)}) for r in range(2)]
    hub = hub_server(token=TOKEN, faults=[{"method": "POST", "path": "^/v1/shards", "delay_s": 0.001},
                                          {"method": "POST", "path": "^/v1/shards", "status": 503, "times": -1}])
    env = env_for(hub, tmp_path, CKPT_UPLOAD_BATCH_BYTES=str(2**20), HF_TOKEN=TOKEN)
    cmd = [sys.executable, "-m", "tests.helpers.ranks_bucket_push", uri, hub.url, TOKEN, *map(str, dirs)]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _kill_at_the_refusal(proc, hub, ("POST", "/v1/shards"))

    before = hub.log_entries()
    total = 2 * RANK_FILES * SIZE
    arrived = sum(e["bytes_in"] for e in _matching(before, STORES["bucket"]["bytes"]) if e["status"] == 200)
    missing = total - min(arrived, total)
    hub.set_faults([])
    rerun = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-2000:]
    resent = sum(e["bytes_in"] for e in _matching(hub.log_entries()[len(before):], STORES["bucket"]["bytes"]))
    in_flight = 2 * SIZE  # one batch (one file) per rank
    assert resent <= missing + in_flight + SLACK, (
        f"the re-run sent {resent} bytes; {missing} were missing and at most {in_flight} in flight ({arrived} had"
        " arrived before the kill)")
    pins = set(rerun.stdout.split())
    assert len(pins) == 1
    _one_manifest_last(hub, uri, {"revision": pins.pop()}, env)
