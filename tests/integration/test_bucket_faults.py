"""The fault matrix's bucket twin: push, latest and pull on ``hf://buckets/...`` against a
local Hub that fails once (500, 503, 429 with Retry-After, a reset mid-body) at one bucket
endpoint each uses. Every cell ends in success after bounded retries, with the complete
checkpoint (never a partial one, never "none found"), pinned to the manifest's sha256.

A read (latest, pull) is held to its own answer; a push is read back (latest, a pull at
the pin) once its faults are off. Retries back off from the tests' CKPT_RETRY_DELAY, hf_xet's
too (``tests/conftest.py``), so a cell waits for no second-long delay."""

from __future__ import annotations

import re
import time

import pytest

from tests.conftest import read_tree, write_checkpoint
from tests.helpers.chaos_helpers import ckpt, env_for
from tests.helpers.localhub_fixtures import TOKEN

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
    "latest": ["info", "tree", "manifest"],
    "pull": ["info", "tree", "manifest", "file-get"],
}
FAULTS: dict[str, dict[str, object]] = {
    "500": {"status": 500},
    "503": {"status": 503},
    "429": {"status": 429, "retry_after": 0},  # honoured (its wait: test_faults.test_retry_after_is_honoured)
    "reset": {"reset": 5},
}
CELLS = [(m, e, f) for m, eps in MODE_ENDPOINTS.items() for e in eps for f in FAULTS]


@pytest.mark.parametrize(("mode", "endpoint", "fault"), CELLS, ids=[f"{m}-{e}-{f}" for m, e, f in CELLS])
def test_bucket_fault_cell(mode, endpoint, fault, hub_server, xet_client, cli, tmp_path):
    hub = hub_server(token=TOKEN)
    env = env_for(hub, tmp_path, HF_TOKEN=TOKEN, CKPT_TIMEOUT="2")
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
    hits = [e for e in hub.log_entries()[start:]
            if e["method"] == method and re.search(pattern, e["path"].split("?")[0])]
    want = "reset" if fault == "reset" else int(fault)
    hub.set_faults([])
    assert any(e["status"] == want for e in hits), ("the fault never fired: the cell tests nothing", hits[:3])
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
