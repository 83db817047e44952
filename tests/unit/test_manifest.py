"""The manifest's hashes and the git tree id latest checks folders against."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from ckpt_action.checkpoint.manifest import (
    MANIFEST_NAME,
    FileDigest,
    Manifest,
    digest_files,
    folder_tree_oid,
    lfs_pointer,
    predict_lfs,
    scan_dir,
)
from tests.conftest import write_checkpoint


def git(cwd, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_folder_tree_oid_is_what_git_computes(tmp_path):
    files = {
        "model.safetensors": b"\x00weights" * 1000,
        "config.json": b'{"hidden": 64}\n',
        "tokenizer/vocab.txt": b"a\nb\nc\n",
        "tokenizer/merges.txt": b"#v\n",
        "tokenizer/special/map.json": b"{}",
        "rng_state.pth": b"rng",
        "notes.md": b"plain text",
    }
    src = write_checkpoint(tmp_path / "src", files)
    digests = digest_files(scan_dir(src))
    manifest = Manifest(files=digests, step=3).to_json()
    # The same folder in a real git repo, LFS files as their pointers, as the Hub stores them.
    repo = tmp_path / "git"
    folder = repo / "checkpoint-3"
    for rel, data in files.items():
        d = digests[rel]
        assert d.sha256 is not None
        blob = lfs_pointer(d.sha256, d.size) if d.lfs else data
        write_checkpoint(folder, {rel: blob})
    (folder / MANIFEST_NAME).write_bytes(manifest)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    tree = git(repo, "write-tree")
    expected = git(repo, "rev-parse", f"{tree}:checkpoint-3")
    assert folder_tree_oid(digests, manifest) == expected
    assert {p for p, d in digests.items() if d.lfs} == {"model.safetensors", "rng_state.pth"}


def test_folder_tree_oid_changes_with_any_file_and_needs_full_digests(tmp_path):
    digests = {"a.bin": FileDigest(3, hashlib.sha256(b"abc").hexdigest(), None, True),
               "b.txt": FileDigest(2, hashlib.sha256(b"hi").hexdigest(),
                                   hashlib.sha1(b"blob 2\x00hi", usedforsecurity=False).hexdigest(), False)}
    base = folder_tree_oid(digests, b"{}")
    assert base is not None and len(base) == 40
    assert folder_tree_oid(digests, b"{ }") != base
    changed = dict(digests, **{"b.txt": FileDigest(2, "0" * 64, "1" * 40, False)})
    assert folder_tree_oid(changed, b"{}") != base
    assert folder_tree_oid({"x": FileDigest(1, "0" * 64, None, None)}, b"{}") is None, "old manifests: no fast path"


@pytest.mark.parametrize(("path", "size", "sample", "lfs"), [
    ("model.safetensors", 10, b"text", True),
    ("sub/optimizer.pt", 10, b"text", True),
    ("config.json", 100, b'{"a": 1}', False),
    ("data.raw", 100, b"ab\x00cd", True),
    ("big.txt", 10 * 1024 * 1024, b"text", True),
    ("events.out.tfevents.123", 5, b"t", True),
])
def test_predict_lfs(path, size, sample, lfs):
    assert predict_lfs(path, size, sample) is lfs


def test_manifest_round_trips_and_rejects_garbage():
    m = Manifest(files={"a": FileDigest(1, "0" * 64, "1" * 40, False)}, step=7, source={"repo": "o/r"})
    back = Manifest.from_json(m.to_json())
    assert back.content_key() == m.content_key() and back.files["a"].lfs is False
    from ckpt_action.errors import IntegrityError

    for bad in (b"not json", b'{"format": "other"}', b'{"format": "ckpt-action/manifest/v1", "files": 3}'):
        with pytest.raises(IntegrityError):
            Manifest.from_json(bad)


def test_latest_checks_a_complete_folder_in_three_requests(hub_server, hf_client, cli, tmp_path):
    from tests.conftest import clean_env

    hub = hub_server()
    env = clean_env(tmp_path, HF_ENDPOINT=hub.url)
    for step in (1, 2):
        src = write_checkpoint(tmp_path / f"c{step}", {"model.safetensors": bytes([step]) * 5000,
                                                      "nested/config.json": b"{}"})
        assert cli("push", "--repo", "o/r", "--local-dir", str(src), "--step", str(step), env=env).code == 0
    start = len(hub.log_entries())
    run = cli("latest", "--repo", "o/r", "--json", env=env)
    assert run.code == 0 and run.json["subfolder"] == "checkpoint-2" and run.json["verified"] is True
    paths = [e["path"] for e in hub.log_entries()[start:]]
    assert len(paths) == 3, paths
    assert paths[0].endswith("/refs") and "/tree/" in paths[1] and paths[2].endswith("/ckpt-manifest.json")
