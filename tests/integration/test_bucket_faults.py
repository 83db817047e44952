"""The fault matrix's bucket twin: push, latest and pull on ``hf://buckets/...`` against a
local Hub that fails once (500, 503, 429 with Retry-After, 429 with the Hub's RateLimit
headers and no Retry-After, a reset mid-body, an answer slower than the client's timeout) at one
bucket endpoint each uses. Every cell ends in success after bounded retries, with the complete
checkpoint (never a partial one, never "none found"), pinned to the manifest's sha256.

A read (latest, pull) is held to its own answer; a push is read back (latest, a pull at
the pin) once its faults are off. Retries back off from the tests' CKPT_RETRY_DELAY, hf_xet's
too (``tests/conftest.py``), so a cell waits for no second-long delay but the rate limit's
window (1 s, the smallest the header can announce). The slow answers and the client's timeout
derive from the repo matrix's one setting (``FAULT_MATRIX_TIMEOUT``, test_faults.TIMEOUT)."""

from __future__ import annotations

import re
import time

import pytest

from tests.conftest import read_tree, write_checkpoint
from tests.helpers.chaos_helpers import ckpt, env_for
from tests.helpers.localhub_fixtures import TOKEN
from tests.integration.test_faults import SETTLE, SLOW, TIMEOUT

BUCKET = "local-user/ckpts"
URI = f"hf://buckets/{BUCKET}"
BOUND = 30.0
ENDPOINTS = {
    "info": ("GET", rf"^/api/buckets/{BUCKET}$"),
    "tree": ("GET", rf"^/api/buckets/{BUCKET}/tree"),
    "paths-info": ("POST", rf"^/api/buckets/{BUCKET}/paths-info$"),
    "batch": ("POST", rf"^/api/buckets/{BUCKET}/batch$"),
    "xet-token": ("GET", rf"^/api/buckets/{BUCKET}/xet-write-token"),
    "xorb": ("POST", r"/v1/xorbs/default/"),
    "shard": ("POST", r"/v1/shards$"),
    "manifest": ("GET", rf"^/buckets/{BUCKET}/resolve/.*ckpt-manifest\.json$"),
    "file-get": ("GET", rf"^/buckets/{BUCKET}/resolve/.*model\.safetensors$"),
}
MODE_ENDPOINTS = {
    "push": ["info", "tree", "paths-info", "batch", "xet-token", "xorb", "shard"],
    "latest": ["tree", "manifest"],
    "pull": ["tree", "manifest", "file-get"],
}
FAULTS: dict[str, dict[str, object]] = {
    "500": {"status": 500},
    "503": {"status": 503},
    "429": {"status": 429, "retry_after": 0},  # honoured (its wait: test_faults.test_retry_after_is_honoured)
    "ratelimit": {"ratelimit_reset": 1},  # 429 with RateLimit/RateLimit-Policy, no Retry-After: wait the window
    "reset": {"reset": 5},
    "slow": {"delay_s": SLOW},
}
CELLS = [(m, e, f) for m, eps in MODE_ENDPOINTS.items() for e in eps for f in FAULTS]


def _fired(entries: list[dict], endpoint: str, fault: str) -> bool:
    method, pattern = ENDPOINTS[endpoint]
    hits = [e for e in entries if e["method"] == method and re.search(pattern, e["path"].split("?")[0])]
    if fault == "slow":
        return any(e["ms"] >= SLOW * 1000 for e in hits)
    want = {"reset": "reset", "ratelimit": 429}.get(fault) or int(fault)
    return any(e["status"] == want for e in hits)


@pytest.mark.parametrize(("mode", "endpoint", "fault"), CELLS, ids=[f"{m}-{e}-{f}" for m, e, f in CELLS])
def test_bucket_fault_cell(mode, endpoint, fault, hub_server, xet_client, cli, tmp_path):
    hub = hub_server(token=TOKEN)
    # A slow answer is one the client gives up on (CKPT_TIMEOUT) and the Hub still carries out
    # later; a push whose manifest batch went unanswered waits CKPT_REQUEST_DEADLINE for that.
    slow = {"CKPT_TIMEOUT": str(TIMEOUT), "CKPT_REQUEST_DEADLINE": str(SLOW + TIMEOUT)} if fault == "slow" else {}
    # A 429 of the Xet storage reaches us without its headers (hf_xet keeps them): the backoff
    # has to outlast the 1 s window there. And huggingface_hub waits out a batch's 429 itself,
    # which must not look like an answer that never came (a call as long as CKPT_TIMEOUT).
    limited = {"CKPT_RETRY_DELAY": "0.4", "CKPT_RETRY_MAX_DELAY": "1", "CKPT_TIMEOUT": "10"}
    if fault != "ratelimit":
        limited = {}
    env = env_for(hub, tmp_path, HF_TOKEN=TOKEN, **{"CKPT_TIMEOUT": "2", **slow, **limited})
    v1, v2 = ckpt(1), ckpt(1, salt=b"v2")
    seeded = cli("push", "--repo", URI, "--local-dir", str(write_checkpoint(tmp_path / "v1", v1)), "--step", "1",
                 "--json", env=env)
    assert seeded.code == 0, seeded.stderr
    method, pattern = ENDPOINTS[endpoint]
    hub.set_faults([{"method": method, "path": pattern, "times": 1, **FAULTS[fault]}])
    start = len(hub.log_entries())
    t0 = time.monotonic()
    dest = tmp_path / "dest"
    if mode == "push":
        run = cli("push", "--repo", URI, "--local-dir", str(write_checkpoint(tmp_path / "v2", v2)), "--step", "1",
                  "--json", env=env)
    elif mode == "latest":
        run = cli("latest", "--repo", URI, "--json", env=env)
    else:
        run = cli("pull", "--repo", URI, "--subfolder", "checkpoint-1", "--local-dir", str(dest), "--json", env=env)
    elapsed = time.monotonic() - t0
    # A slow request is logged once the server finishes it (and, for a write, lands it): wait for that.
    deadline = time.monotonic() + SLOW + SETTLE
    while not (fired := _fired(hub.log_entries()[start:], endpoint, fault)) and time.monotonic() < deadline:
        time.sleep(0.1)
    hub.set_faults([])
    assert fired, "the fault never fired: the cell tests nothing"
    assert elapsed < BOUND
    assert run.code == 0, f"{mode} {endpoint} {fault}: exit {run.code}: {run.stderr}"
    assert "Traceback" not in run.stderr
    if mode == "latest":
        assert run.json["found"] is True and run.json["subfolder"] == "checkpoint-1", run.stdout
        assert run.json["revision"] == seeded.json["revision"]
        return
    if mode == "pull":
        pulled = read_tree(dest)
        pulled.pop("ckpt-manifest.json")
        assert pulled == v1 and run.json["revision"] == seeded.json["revision"]
        return
    found = cli("latest", "--repo", URI, "--json", env=env)
    assert found.code == 0 and found.json["subfolder"] == "checkpoint-1", found.stderr
    assert found.json["revision"] == run.json["revision"] != seeded.json["revision"]
    check = cli("pull", "--repo", URI, "--subfolder", "checkpoint-1", "--revision", found.json["revision"],
                "--local-dir", str(tmp_path / "check"), env=env)
    assert check.code == 0, check.stderr
    got = read_tree(tmp_path / "check")
    got.pop("ckpt-manifest.json")
    assert got == v2
