"""Helpers shared by the fault, hostile, concurrency, big-push and secrets tests.

They seed a local Hub through the real (in-process) huggingface_hub client, read back
what landed, and check the CLI's failure contract: one ``error:`` line, no traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, digest_files, scan_dir
from tests.conftest import clean_env, write_checkpoint

FAST = {"CKPT_RETRY_DELAY": "0.05", "CKPT_RETRY_MAX_DELAY": "0.3", "CKPT_RETRIES": "3"}


def ckpt(step: int, big: int = 200_000, salt: bytes = b"") -> dict[str, bytes]:
    """A small checkpoint: one LFS file (by extension), two regular files."""
    seed = hashlib.sha256(b"%d" % step + salt).digest()
    return {
        "model.safetensors": (seed * (big // len(seed) + 1))[:big],
        "config.json": json.dumps({"step": step, "salt": salt.hex()}).encode(),
        "nested/trainer_state.json": json.dumps({"global_step": step}).encode(),
    }


def env_for(hub: Any, tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(tmp_path, HF_ENDPOINT=hub.url, **{**FAST, **extra})


def seed(hub_url: str, repo: str, subfolder: str, files: dict[str, bytes], tmp: Path, *, step: int | None = None,
         complete: bool = True, token: str | None = None) -> str:
    """Commit ``files`` + a manifest to ``repo/subfolder`` with the in-process client; returns the SHA.

    Needs the ``hf_client`` fixture (plain LFS, cache under tmp).
    """
    from huggingface_hub import CommitOperationAdd, HfApi

    src = write_checkpoint(tmp / f"seed-{repo.replace('/', '_')}-{subfolder.replace('/', '_')}", files)
    api = HfApi(endpoint=hub_url, token=token)
    api.create_repo(repo, exist_ok=True)
    manifest = Manifest(files=digest_files(scan_dir(src)), step=step, complete=complete)
    ops = [CommitOperationAdd(f"{subfolder}/{rel}", str(src / rel)) for rel in files]
    ops.append(CommitOperationAdd(f"{subfolder}/{MANIFEST_NAME}", manifest.to_json()))
    return str(api.create_commit(repo, operations=ops, commit_message=f"seed {subfolder}").oid)


def head_of(hub_url: str, repo: str, token: str | None = None) -> str:
    from huggingface_hub import HfApi

    refs = HfApi(endpoint=hub_url, token=token).list_repo_refs(repo)
    return next(str(b.target_commit) for b in refs.branches if b.name == "main")


def commit_ids(hub_url: str, repo: str, token: str | None = None) -> list[str]:
    from huggingface_hub import HfApi

    return [c.commit_id for c in HfApi(endpoint=hub_url, token=token).list_repo_commits(repo)]


def remote_checkpoint(hub_url: str, repo: str, subfolder: str, revision: str, cache: Path,
                      token: str | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest dict, {relpath: bytes}) of ``repo/subfolder`` at ``revision``, read with the client."""
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi(endpoint=hub_url, token=token)
    prefix = subfolder + "/"
    paths = [p for p in api.list_repo_files(repo, revision=revision) if p.startswith(prefix)]
    files = {}
    for p in paths:
        local = hf_hub_download(repo, p, revision=revision, endpoint=hub_url, token=token, cache_dir=str(cache))
        files[p[len(prefix):]] = Path(local).read_bytes()
    manifest = json.loads(files.pop(MANIFEST_NAME)) if MANIFEST_NAME in files else {}
    return manifest, files


def assert_complete(manifest: dict[str, Any], files: dict[str, bytes], expected: dict[str, bytes]) -> None:
    """The remote checkpoint is exactly ``expected`` and its manifest says so."""
    assert manifest.get("complete") is True, manifest
    assert files == expected, sorted(files)
    assert {p: d["sha256"] for p, d in manifest["files"].items()} == {
        p: hashlib.sha256(b).hexdigest() for p, b in expected.items()}


def reports_nothing(run) -> bool:
    """Whether a failed run's stdout holds no result: nothing, or with ``--json`` only the
    error's own object (``error``, ``exit_code``, ``option``: tests/integration/test_json_errors.py)."""
    if run.stdout == "":
        return True
    lines = run.stdout.splitlines()
    return len(lines) == 1 and set(json.loads(lines[0])) == {"error", "exit_code", "option"}


def one_line_error(stderr: str) -> str:
    """The single ``error:`` line of a failed run (warnings may precede it); no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], stderr
    return errors[0]


def listing(root: Path) -> set[str]:
    """Every path under root (files, dirs, symlinks), relative."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out
