"""``python -m bench --quick`` runs, passes its own deterministic checks, and writes its JSON.

The bench asserts counts and bytes itself (exit 1 on a failed check); this test runs it
in a subprocess, as .ci/run does, and pins the numbers the issue cares about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.fixtures import SMALL_FILES
from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(420)
def test_bench_quick(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "CKPT_", "WANDB_"))}
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["quick"] is True
    assert doc["failed_checks"] == []
    s = doc["sections"]
    assert set(s) == {str(n) for n in range(1, 17)}
    latest = s["1"]["data"]
    assert latest["latest_requests"] == 2  # the top-level tree at main, the winner's manifest (names the commit)
    assert latest["latest_request_budget"] == 2
    assert latest["process_requests"]["ckpt-action latest"] == latest["latest_requests"]
    assert latest["process_telemetry_requests"]["ckpt-action latest"] == 0
    # every file and folder listed, 1000 a page (more than one), then repo_info
    assert latest["call_requests"]["seed baseline"] == latest["baseline_expected_requests"] >= 3
    repush = s["3"]["data"]["ckpt_action_push"]
    assert repush["commits"] == 0 and repush["lfs_bytes"] == 0
    promote = s["4"]["data"]["promote"]
    assert promote["lfs_bytes"] == 0 and promote["commits"] == 1
    transfer = s["2"]["data"]
    assert set(transfer["lfs_bytes_uploaded"].values()) == {transfer["bytes"] - sum(map(len, SMALL_FILES.values()))}
    assert all(not mods for mods in s["5"]["data"]["wandb_modules"].values())
    repull = s["7"]["data"]
    assert repull["file_bytes"]["first"] == repull["bytes"]
    assert repull["file_bytes"]["repull"] == 0
    assert repull["file_bytes"]["next"] == repull["changed_bytes"]
    assert repull["file_bytes"]["weights_only"] == repull["weights_bytes"]
    xet = s["9"]["data"]
    assert xet["n1_payload_bytes"]["hf lfs"] == xet["n1_payload_bytes"]["ckpt-action lfs"] == xet["file_bytes"]
    for tool in ("hf", "ckpt-action"):
        assert xet["n1_bytes_sent"][f"{tool} xet"] < xet["file_bytes"] * (xet["changed_fraction"] + 0.1)
    runs = {f"{tool} {path}" for tool in ("hf", "ckpt-action") for path in ("xet", "lfs")}
    assert set(xet["push_reads_per_byte"]) == set(xet["push_rchar"]) == runs
    assert all(len(counts) == xet["repetitions"] and min(counts) > 0 for counts in xet["push_rchar"].values())
    assert xet["checkpoint_bytes"] > xet["file_bytes"] > GIT_OID_LIMIT  # the one-read path, even in quick mode
    reads = s["11"]["data"]["reads_per_byte"]  # each kept byte hashed once, not three times
    assert 1.0 <= reads["mtime_changed"] < 1.5 and 1.0 <= reads["record_not_vouched"] < 1.5
    ranks = s["10"]["data"]
    if "ranks" in ranks:  # torch installed: four ranks pushed one checkpoint
        assert ranks["commits"] == 1
        assert [r["bytes"] >= ranks["shard_bytes"] for r in ranks["ranks"]] == [True] * 4
    bucket = s["12"]["data"]
    assert bucket["latest_requests"] == 5  # one page, the torn newest's manifest, manifest + redirect + listing
    assert all(bucket[k] > 0 for k in ("push_s", "sync_up_s", "cp_up_s", "pull_s", "sync_down_s", "cp_down_s"))
    # promote into a repo receives the checkpoint (verified as it streams) and sends only the commit
    assert bucket["size"] <= bucket["promote_bytes_out"] and bucket["promote_bytes_in"] < 64 * 1024
    steptime = s["13"]["data"]
    if not s["13"]["skipped"]:  # needs the transformers extra
        assert set(steptime["slowdown"]) == {"none", "callback", "watch"}
        assert all(len(lags) == 2 for lags in steptime["save_to_pinned_seconds"].values())  # 8 steps, every 4
    resume = s["14"]["data"]
    assert resume["subfolder"] in ("checkpoint-500", "checkpoint-501")  # 501: section 7 pushed it first
    assert len(resume["resume_seconds"]) == len(resume["curl_seconds"]) == resume["repetitions"]
    from_bucket = resume["bucket"]  # the same resume from a bucket holding only that checkpoint
    assert from_bucket["subfolder"] == "checkpoint-500"
    assert len(from_bucket["resume_seconds"]) == len(from_bucket["curl_seconds"]) == resume["repetitions"]
    killed = s["16"]["data"]  # a push killed at 50% of its bytes and run again, beside hf doing the same
    runs = killed["resume"]["runs"]
    assert set(runs) == {f"{tool} {store}" for tool in ("ckpt-action", "hf") for store in ("lfs", "xet", "bucket")}
    for store, bound in killed["resume"]["in_flight_bound"].items():
        assert runs[f"ckpt-action {store}"]["50%"]["beyond_missing"] <= bound + 256 * 1024
    preempt = killed["preempt"]
    assert preempt["signals"] == 3 and len(preempt["trials"]) == 3


# The bench started with a package unimportable (None in sys.modules fails its import as a
# missing one does), as `python -m bench` runs it.
_BENCH_WITHOUT = "import runpy, sys\nsys.modules[sys.argv.pop()] = None\nrunpy.run_module('bench', run_name='__main__')"


@pytest.mark.parametrize(("blocked", "said"), [
    ("ckpt_localhub", "pip install -e ./packages/ckpt-localhub"),
    ("lz4", "pip install -e '.[dev]' -e ./packages/ckpt-localhub"),
])
def test_the_bench_without_the_local_hub_says_what_to_install(blocked: str, said: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _BENCH_WITHOUT, "--quick", "--out", str(tmp_path), blocked],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert f"'{blocked}'" in lines[0] or "local Hub" in lines[0], lines[0]
