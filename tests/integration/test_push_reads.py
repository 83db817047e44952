"""How many times a push reads each byte of the checkpoint, counted from /proc/self/io.

On the Xet path hf_xet hashes a big file while it chunks it, and push takes that sha256
for its manifest: one read. Plain LFS needs the sha256 before the upload starts (the
batch call names it), so two. A re-push of unchanged files reads them once, to find them
unchanged, and uploads nothing. The counts come from the push process itself (hf_xet's
Rust threads included), run under ``bench.readcount``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_action.checkpoint.manifest import GIT_OID_LIMIT
from tests.conftest import clean_env, write_checkpoint
from tests.helpers.chaos_helpers import (
    assert_complete,
    ckpt,
    commit_ids,
    env_for,
    one_line_error,
    remote_checkpoint,
    reports_nothing,
    seed,
)
from tests.integration.test_faults import ENDPOINTS, LFS_ONLY

REPO_ROOT = Path(__file__).resolve().parents[2]
BIG = 32 * 2**20
"""Above the manifest's GIT_OID_LIMIT, so the big file takes the one-read path."""
SLACK = 8 * 2**20
"""What a push reads besides the checkpoint (modules imported on first use, certificates)."""


def _push(env: dict[str, str], src: Path, out: Path) -> tuple[dict[str, int], dict]:
    proc = subprocess.run([sys.executable, "-m", "bench.readcount", str(out), str(REPO_ROOT / "entrypoint.py"),
                           "push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "c1", "--json"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), json.loads(proc.stdout)


@pytest.mark.process("counts the bytes a push's process reads (bench.readcount)")
@pytest.mark.parametrize(("path", "reads"), [("xet", 1), ("lfs", 2)])
def test_push_reads_each_byte_once_on_xet_twice_on_lfs(hub_server, tmp_path, path, reads):
    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    if path == "lfs":
        env["HF_HUB_DISABLE_XET"] = "1"
    files = {"model.safetensors": os.urandom(BIG), "config.json": b'{"step": 1}', "notes.txt": b"small\n" * 100}
    src = write_checkpoint(tmp_path / "c", files)
    size = sum(map(len, files.values()))
    io, pushed = _push(env, src, tmp_path / "io.json")
    assert pushed["uploaded_files"] == len(files)
    assert io["rchar"] <= (reads + 0.1) * size + SLACK, f"{io['rchar'] / size:.2f} reads of each byte"
    uploads = [e for e in hub.log_entries() if e["listener"] == "cas" or "/lfs/" in e["path"]]
    assert uploads, "the big file went through neither CAS nor LFS"

    start = len(hub.log_entries())
    io, again = _push(env, src, tmp_path / "io-again.json")
    assert again["commits"] == 0 and again["uploaded_files"] == 0
    assert io["rchar"] <= 1.1 * size + SLACK, f"a no-op re-push read {io['rchar'] / size:.2f}x the checkpoint"
    later = hub.log_entries()[start:]
    assert not [e for e in later if e["method"] in ("POST", "PUT") and (e["listener"] == "cas" or "/lfs/" in e["path"])]


# The one-read path uploads big files before the commit (preupload_lfs_files): the faults
# of the matrix (tests/integration/test_faults.py, whose files are small) must meet it there too.
ONE_READ_FAULTS = [("preupload", {"status": 503}), ("xet-token", {"status": 500}), ("xorb", {"reset": 5}),
                   ("shard", {"status": 429, "retry_after": 1}), ("lfs-batch", {"status": 500}),
                   ("lfs-put", {"reset": 5})]


@pytest.mark.parametrize(("endpoint", "fault"), ONE_READ_FAULTS, ids=[e for e, _f in ONE_READ_FAULTS])
def test_a_big_file_uploaded_before_the_commit_survives_one_fault(hub_server, hf_client, cli, tmp_path, endpoint,
                                                                   fault):
    hub = hub_server()
    files = {"model.safetensors": os.urandom(GIT_OID_LIMIT + 1), "config.json": b'{"step": 1}'}
    src = write_checkpoint(tmp_path / "c", files)
    method, pattern = ENDPOINTS[endpoint]
    env = env_for(hub, tmp_path, CKPT_TIMEOUT="5")
    if endpoint in LFS_ONLY:
        env["HF_HUB_DISABLE_XET"] = "1"
    hub.set_faults([{"method": method, "path": pattern, "times": 1, **fault}])
    start = len(hub.log_entries())
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "c1", "--step", "1", "--json",
              env=env)
    hub.set_faults([])
    assert run.code == 0, run.stderr
    hits = [e for e in hub.log_entries()[start:] if e["method"] == method and re.search(pattern, e["path"])]
    assert any(e["status"] != 200 for e in hits), "the fault never fired: the cell tests nothing"
    manifest, got = remote_checkpoint(hub.url, "o/r", "c1", run.json["revision"], hf_client)
    assert_complete(manifest, got, files)
    assert run.json["commits"] == 1


def test_a_persistent_upload_fault_gives_up_cleanly_with_nothing_committed(hub_server, hf_client, cli, tmp_path):
    hub = hub_server()
    seed(hub.url, "o/r", "checkpoint-1", ckpt(1), tmp_path, step=1)
    before = commit_ids(hub.url, "o/r")
    src = write_checkpoint(tmp_path / "c", {"model.safetensors": os.urandom(GIT_OID_LIMIT + 1)})
    # preupload, not a CAS route: hf_xet retries a failing xorb upload itself for minutes.
    method, pattern = ENDPOINTS["preupload"]
    hub.set_faults([{"method": method, "path": pattern, "times": -1, "status": 503}])
    run = cli("push", "--repo", "o/r", "--local-dir", str(src), "--subfolder", "c2", "--json",
              env=env_for(hub, tmp_path, CKPT_TIMEOUT="5", CKPT_RETRIES="0"))
    hub.set_faults([])
    assert run.code == 1 and reports_nothing(run)
    assert "uploading c2" in one_line_error(run.stderr)
    assert commit_ids(hub.url, "o/r") == before


def test_the_promises_page_names_the_size_above_which_a_file_is_read_once():
    readme = (REPO_ROOT / "docs" / "concepts" / "promises.md").read_text()
    assert f"A file above {GIT_OID_LIMIT >> 20} MiB that the" in readme
