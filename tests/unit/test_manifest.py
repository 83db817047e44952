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




def test_a_files_xet_hash_is_recorded_and_checked_as_data_from_outside():
    """A bucket's manifest names each file's Xet hash, which readers compare with the
    listing's; an older manifest without it stays readable, and a malformed one is refused
    as any other field a hostile server could serve."""
    import json

    from ckpt_action.checkpoint.manifest import RemoteFile
    from ckpt_action.errors import UnreadableManifest

    xet = "ab" * 32
    m = Manifest(files={"w.bin": FileDigest(5, "0" * 64, xet=xet), "old.bin": FileDigest(3, "1" * 64)}, step=1)
    doc = json.loads(m.to_json())
    assert doc["files"]["w.bin"]["xet"] == xet and "xet" not in doc["files"]["old.bin"]
    back = Manifest.from_json(m.to_json())
    assert back.files["w.bin"].xet == xet and back.files["old.bin"].xet is None
    # the listing's Xet hash is compared when both sides have one, with the size
    other = "cd" * 32
    listed = {"w.bin": RemoteFile(5, None, None, xet), "old.bin": RemoteFile(3, None, None, other)}
    assert _mismatches(back, listed) == []
    (problem,) = _mismatches(back, {"w.bin": RemoteFile(5, None, None, other),
                                    "old.bin": RemoteFile(3, None, None)})
    assert problem.startswith("w.bin was overwritten") and "Xet hash" in problem
    for bad in ("AB" * 32, "ab" * 31, "ab" * 33, 7, "", "ab" * 31 + "zz"):
        doc["files"]["w.bin"]["xet"] = bad
        with pytest.raises(UnreadableManifest, match=r"the xet of 'w\.bin' is not 64 lowercase hex"):
            Manifest.from_json(json.dumps(doc).encode())


def _mismatches(manifest, files):
    from ckpt_action.checkpoint.verdict import judge_folder

    return list(judge_folder(manifest, files, bucket=True).problems)
