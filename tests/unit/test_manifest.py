"""The manifest's hashes and the git tree id latest checks folders against."""

from __future__ import annotations

import hashlib

import pytest

from ckpt_action.checkpoint.manifest import (
    FileDigest,
    Manifest,
    folder_tree_oid,
    predict_lfs,
)


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


