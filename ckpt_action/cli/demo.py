"""The demo: the main job, end to end, on an embedded local Hub.

A training run pushes three checkpoints, a fourth push dies half-way (as a preempted
job would leave it), and a re-launched job asks for the latest complete checkpoint,
pulls it at its pinned SHA and checks it byte for byte. Then the two homes together: the
checkpoint goes into a Storage Bucket (pinned by its manifest's sha256), and a release
promotes it from there into the model repo, one commit, tagged.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The preempted push is faked by committing what one leaves (its first part, and a manifest
# saying it is incomplete) with the client we configure: no API call leaves that on purpose,
# so these two imports are let through the CLI's contract (pyproject.toml says so too).
from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, digest_files, scan_dir
from ckpt_action.client import Client
from ckpt_action.progress import client_bars_off, no_progress_lines
from ckpt_action.settings import Settings
from ckpt_action.stores.hub.transport import make_api

REPO = "demo/tiny-llm"
BUCKET = "hf://buckets/demo/ckpts/run-1"


def make_checkpoint(root: Path, step: int, seed: int = 0) -> Path:
    """A small fake Trainer checkpoint: weights, optimizer state, config, trainer state."""
    rng = random.Random(seed * 1_000_003 + step)  # noqa: S311 - reproducible fake weights
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.safetensors").write_bytes(rng.randbytes(1_500_000))
    (root / "optimizer.pt").write_bytes(rng.randbytes(700_000))
    (root / "config.json").write_text(json.dumps({"model_type": "tiny", "hidden_size": 64}, indent=2))
    (root / "trainer_state.json").write_text(json.dumps({"global_step": step, "loss": round(2.0 / (1 + step), 5)}))
    return root


def _tree_sha256(root: Path) -> str:
    digests = digest_files(scan_dir(root))
    return hashlib.sha256(json.dumps({p: d.sha256 for p, d in sorted(digests.items())}).encode()).hexdigest()


def run_demo(keep: Path | None = None, echo: Callable[[str], None] = print) -> dict[str, object]:
    from ckpt_action.cli.localhub import import_local_hub

    local_hub = import_local_hub("demo").LocalHub
    # The demo narrates its own steps: no progress lines of ours and no bars of the client's,
    # for its own calls only (the environment and the client's settings are left as found).
    with no_progress_lines(), client_bars_off():
        return _run(local_hub, keep, echo)


def _run(LocalHub: Any, keep: Path | None, echo: Callable[[str], None]) -> dict[str, object]:
    from huggingface_hub import CommitOperationAdd

    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="ckpt-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with LocalHub(work / "hub") as hub:
            echo(f"local Hub listening at {hub.url} (data in {work / 'hub'})")
            run = work / "run"
            client = Client(hub.url, timeout=30, retries=2)
            for step in (100, 200, 300):
                res = client.push(make_checkpoint(run / f"checkpoint-{step}", step), REPO, step=step)
                echo(f"push   checkpoint-{step:<4} -> {res.handle.revision}  ({res.uploaded_files} files)")
            last_push = res.handle.revision

            # A job preempted mid-push leaves files and a manifest marked incomplete.
            broken = make_checkpoint(run / "checkpoint-400", 400)
            files = digest_files(scan_dir(broken))
            marker = Manifest(files=files, step=400, complete=False)
            make_api(Settings(endpoint=hub.url)).create_commit(REPO, operations=[
                CommitOperationAdd("checkpoint-400/model.safetensors", str(broken / "model.safetensors")),
                CommitOperationAdd(f"checkpoint-400/{MANIFEST_NAME}", marker.to_json()),
            ], commit_message="Push checkpoint-400 (part 1)")
            echo("push   checkpoint-400  -> interrupted after part 1 (the job was preempted)")

            found = client.latest(REPO, warn=lambda _message: None)
            for name, why in found.skipped:
                echo(f"latest skipped {name}: {why}")
            assert found.handle is not None, "the demo pushed complete checkpoints; latest must find one"
            echo(f"latest -> {found.handle.subfolder} at {found.handle.revision}")
            if found.handle.revision != last_push:
                echo(f"         (not {last_push[:12]}, the SHA its push reported: the interrupted push of"
                     " checkpoint-400 moved the head, and latest pins the commit it read, which holds"
                     f" {found.handle.subfolder} unchanged)")

            dest = work / "resume" / found.handle.subfolder
            got = client.pull(found.handle, dest, found=found)
            same = _tree_sha256(dest) == _tree_sha256(run / found.handle.subfolder)
            echo(f"pull   -> {got.local_dir} ({got.files} files, {got.bytes} bytes, verified by {got.verified_by})")
            if not same:
                raise AssertionError("the pulled checkpoint differs from what was pushed")
            echo("verify -> pulled bytes are identical to the pushed checkpoint-300")

            # Training saves often into a bucket (no commit quota; prune frees storage at once);
            # a release goes into the model repo, pinned by a commit SHA.
            into = client.push(run / found.handle.subfolder, BUCKET, step=found.handle.step)
            echo(f"push   {found.handle.subfolder} -> {BUCKET} pinned {into.handle.revision}")
            released = client.promote(into.handle, "release", to_repo=REPO, tag="v1")
            echo(f"promote {BUCKET}/{found.handle.subfolder} -> {REPO}/release at {released.handle.revision},"
                 " tag v1 (one commit; the bytes are already in the Hub's storage)")
            outputs = got.handle.to_dict() | {"local_dir": str(got.local_dir), "found": True}
            echo("outputs of latest and pull (what a CI step reads): " + json.dumps(outputs))
            if keep is None:
                echo("(the demo's files are removed now; `ckpt-action demo --keep DIR` keeps the local Hub's data,"
                     " the pushed and the pulled checkpoints in DIR)")
            return outputs
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
