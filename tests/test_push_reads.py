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
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env, write_checkpoint

REPO_ROOT = Path(__file__).resolve().parent.parent
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
