"""The bucket release path with the CLI as processes against a local Hub process: train into a
bucket, a second push killed (SIGKILL) once its files reached the Hub and before its manifest,
``latest`` takes the last complete checkpoint, ``promote --to-repo --tag --signing-key`` makes
the release, and ``pull --revision TAG --verify-key`` hands over exactly the pushed bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ENTRYPOINT, clean_env, read_tree, write_checkpoint

TOKEN = "bucket-pipeline-token"
BUCKET = "local-user/ckpts"
URI = f"hf://buckets/{BUCKET}"
BATCH = rf"^/api/buckets/{BUCKET}/batch$"


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private, public = tmp_path / "release.pem", tmp_path / "release.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def _payload(root: Path) -> dict[str, bytes]:
    """The checkpoint's own files: what the push was given (the manifest, signature and provenance aside)."""
    added = ("ckpt-manifest.json", "model.sig", "ckpt-provenance.json")
    return {k: v for k, v in read_tree(root).items() if k not in added}


def _batches(hub) -> list[dict]:
    return [e for e in hub.log_entries() if e["method"] == "POST" and e["path"] == f"/api/buckets/{BUCKET}/batch"]


def test_preempted_bucket_push_then_signed_release_pulled_verified(hub_process, cli_process, tmp_path):
    # The Hub lets the first three batches through (checkpoint-100's files and manifest,
    # checkpoint-200's files) and answers 503, slowly, to the rest: the second push is alive,
    # retrying its manifest, when it is killed.
    hub = hub_process(token=TOKEN, faults=[
        {"method": "POST", "path": BATCH, "delay_s": 0.01, "times": 3},
        {"method": "POST", "path": BATCH, "status": 503, "delay_s": 0.5, "times": -1}])
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url, HF_TOKEN=TOKEN, HF_XET_CACHE=str(tmp_path / "xet"),
                    CKPT_RETRY_DELAY="0.5", CKPT_RETRY_MAX_DELAY="2")
    done = write_checkpoint(tmp_path / "ck100", {"model.bin": os.urandom(300_000), "trainer_state.json":
                                                 b'{"global_step": 100}', "sub/opt.pt": os.urandom(70_000)})
    cut = write_checkpoint(tmp_path / "ck200", {"model.bin": os.urandom(300_000), "trainer_state.json":
                                                b'{"global_step": 200}', "sub/opt.pt": os.urandom(70_000)})

    first = cli_process("push", "--repo", URI, "--local-dir", str(done), "--step", "100", "--json", env=env)
    assert first.code == 0, first.stderr
    pin = first.json["revision"]
    assert pin.startswith("sha256:") and len(_batches(hub)) == 2

    second = subprocess.Popen([sys.executable, str(ENTRYPOINT), "push", "--repo", URI, "--local-dir", str(cut),
                               "--step", "200"], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not any(e["status"] == 200 for e in _batches(hub)[2:]):  # its files are in the bucket
        assert second.poll() is None, second.communicate()
        assert time.monotonic() < deadline, "the second push never sent its files"
        time.sleep(0.02)
    second.send_signal(signal.SIGKILL)
    second.communicate(timeout=30)
    assert second.returncode == -signal.SIGKILL
    hub.set_faults([])

    listed = cli_process("list", "--repo", URI, "--json", env=env)
    assert listed.code == 0, listed.stderr
    rows = {r["subfolder"]: r for r in listed.json["checkpoints"]}
    assert rows["checkpoint-200"]["complete"] is False and rows["checkpoint-100"]["complete"] is True

    latest = cli_process("latest", "--repo", URI, "--json", env=env)
    assert latest.code == 0, latest.stderr
    assert (latest.json["subfolder"], latest.json["revision"]) == ("checkpoint-100", pin)
    resumed = cli_process("pull", "--repo", URI, "--latest", "--local-dir", str(tmp_path / "resume"), "--json",
                          env=env)
    assert resumed.code == 0, resumed.stderr
    assert _payload(tmp_path / "resume") == read_tree(done)

    from huggingface_hub import HfApi

    HfApi(endpoint=hub.url, token=TOKEN).create_repo("local-user/model", private=True)
    private, public = _keys(tmp_path)
    promoted = cli_process("promote", "--repo", URI, "--subfolder", "checkpoint-100", "--revision", pin,
                           "--to-repo", "local-user/model", "--to", "release", "--tag", "v1",
                           "--signing-key", str(private), "--json", env=env)
    assert promoted.code == 0, promoted.stderr
    assert promoted.json["tag"] == "v1" and len(promoted.json["revision"]) == 40

    pulled = cli_process("pull", "--repo", "local-user/model", "--subfolder", "release", "--revision", "v1",
                         "--verify-key", str(public), "--local-dir", str(tmp_path / "deploy"), "--json", env=env)
    assert pulled.code == 0, pulled.stderr
    assert pulled.json["revision"] == promoted.json["revision"] and pulled.json["signature_verified"] is True
    assert _payload(tmp_path / "deploy") == read_tree(done)  # byte-identical to what was pushed
    manifest = json.loads((tmp_path / "deploy" / "ckpt-manifest.json").read_bytes())
    assert manifest["source"]["revision"] == pin
