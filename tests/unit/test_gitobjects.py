"""Git and Hub object facts, checked against git itself where git has an opinion.

Both copies are held to git: the client's (``ckpt_action.checkpoint.gitobjects``) and the local
Hub's own (``ckpt_localhub.gitobjects``), so a bug in one cannot agree with itself on both sides."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIES = ["ckpt_action.checkpoint.gitobjects", "ckpt_localhub.gitobjects"]


@pytest.fixture(params=COPIES)
def go(request: pytest.FixtureRequest):
    """One copy of the git object code: every test below runs against each."""
    return importlib.import_module(request.param)


def test_default_attributes_are_the_hub_file(go):
    assert go.DEFAULT_GITATTRIBUTES.splitlines()[0] == b"*.7z filter=lfs diff=lfs merge=lfs -text"
    assert len(go.DEFAULT_GITATTRIBUTES.splitlines()) == len(go.HUB_LFS_PATTERNS) == 35
    assert go.DEFAULT_ATTRIBUTES.tracks_lfs("x/y.safetensors") and not go.DEFAULT_ATTRIBUTES.tracks_lfs("x/y.json")


@pytest.mark.parametrize(("path", "size", "sample", "lfs"), [
    ("config.json", 100, b'{"a": 1}', False),
    ("data.raw", 100, b"ab\x00cd", True),
    ("late-nul.raw", 1000, b"a" * 512 + b"\x00", False),  # only the first 512 bytes count
    ("big.txt", 10 * 1024 * 1024, b"text", True),
    ("almost.txt", 10 * 1024 * 1024 - 1, b"text", False),
    ("saved_model/README.txt", 5, b"text", True),
    ("empty.bin", 0, b"", False),
])
def test_is_lfs_with_the_default_attributes(go, path, size, sample, lfs):
    assert go.is_lfs(path, size, sample) is lfs


def test_is_lfs_uses_the_given_attributes(go):
    custom = go.GitAttributes.parse(b"*.dat filter=lfs\n*.bin -filter\n")
    assert go.is_lfs("x.dat", 3, b"abc", custom) and not go.is_lfs("x.dat", 3, b"abc")
    assert not go.is_lfs("w.bin", 3, b"abc", custom) and go.is_lfs("w.bin", 3, b"abc")


def _absolute_imports(path: Path) -> set[str]:
    """Top-level names a source file imports absolutely (relative imports stay in its package)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
    return found


LOCALHUB = ROOT / "packages" / "ckpt-localhub" / "ckpt_localhub"


def test_the_local_hub_imports_nothing_of_ckpt_action():
    # Its own git facts and file lock: a bug in the client's copy cannot agree with itself.
    assert (LOCALHUB / "gitobjects.py").is_file() and (LOCALHUB / "filelock.py").is_file()
    for path in sorted(LOCALHUB.rglob("*.py")):
        assert "ckpt_action" not in _absolute_imports(path), path.relative_to(ROOT)


def test_the_copies_agree_on_every_public_name():
    client, server = (importlib.import_module(name) for name in COPIES)
    public = {n for n in dir(client) if not n.startswith("_") and getattr(client, n).__class__.__module__ != "module"}
    assert {n for n in public if not hasattr(server, n)} == set()
