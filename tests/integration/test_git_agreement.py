"""The git facts the core computes without git (object ids, LFS tracking, ignore rules), held
to what git itself answers: each test runs the real ``git`` on the same files (the rules
alone, without git: tests/unit/test_gitobjects.py and tests/unit/test_manifest.py)."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
from pathlib import Path

import pytest

from ckpt_action.checkpoint.gitobjects import lfs_pointer
from ckpt_action.checkpoint.manifest import MANIFEST_NAME, Manifest, digest_files, folder_tree_oid, scan_dir
from tests.conftest import write_checkpoint

COPIES = ["ckpt_action.checkpoint.gitobjects", "ckpt_localhub.gitobjects"]


@pytest.fixture(params=COPIES)
def go(request: pytest.FixtureRequest):
    """One copy of the git object code (the client's and the local Hub's): each runs every test."""
    return importlib.import_module(request.param)


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          input=stdin).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


# Paths whose LFS fate under a .gitattributes is decided by git's pattern rules.
PATHS = [
    "model.safetensors", "sub/dir/model.safetensors", "saved_model/README.txt", "saved_model/a/b/c.txt",
    "x/saved_model/README.txt", "saved_model", "events.out.tfevents.1.host", "deep/run/events.out.tfevents.2",
    "a.tar.gz", "a.tar", "archive.lfs.json", "config.json", "README.md", "dir.bin/config.json",
    "data/x.dat", "x.dat", "data/sub/y.dat", "logs/a/b/trace.log", "trace.log", "Model.BIN", "model.bin",
    "[x].txt", "n1.txt", "n12.txt", "one/two", "one/three/two", "odd name.txt", "sub/odd name.txt",
]
CUSTOM = (
    "*.dat filter=lfs diff=lfs merge=lfs -text\n"
    "data/sub/*.dat -filter\n"
    "/logs/**/*.log filter=lfs\n"
    "model.bin !filter\n"
    "n?.txt filter=lfs\n"
    "\\[x\\].txt filter=lfs\n"
    "one/**/two filter=lfs\n"
    "[attr]big filter=lfs diff=lfs merge=lfs -text\n"
    "config.json big\n"
    '"odd name.txt" filter=lfs\n'
    "!negated.bin -filter\n"
)


def _git_lfs_paths(repo: Path, attributes: bytes, paths: list[str]) -> set[str]:
    (repo / ".gitattributes").write_bytes(attributes)
    out = git(repo, "check-attr", "--stdin", "-z", "filter", stdin="\0".join(paths) + "\0")
    fields = out.split("\0")
    return {fields[i] for i in range(0, len(fields) - 2, 3) if fields[i + 2] == "lfs"}


@pytest.mark.parametrize("custom", [b"", CUSTOM.encode()], ids=["hub-default", "hub-default-plus-custom"])
def test_lfs_tracking_agrees_with_git_check_attr(go, repo, custom):
    attributes = go.DEFAULT_GITATTRIBUTES + custom
    expected = _git_lfs_paths(repo, attributes, PATHS)
    parsed = go.GitAttributes.parse(attributes)
    got = {p for p in PATHS if parsed.tracks_lfs(p)}
    assert got == expected
    assert "saved_model/README.txt" in got  # the case that drifted between the manifest and the local Hub


def test_object_ids_are_gits(go, repo):
    data = b"hello\x00world" * 100
    (repo / "f").write_bytes(data)
    assert go.blob_oid(data) == git(repo, "hash-object", "f").strip()
    incremental = go.blob_hasher(len(data))
    for i in range(0, len(data), 7):
        incremental.update(data[i:i + 7])
    assert incremental.hexdigest() == go.blob_oid(data)
    sha = hashlib.sha256(data).hexdigest()
    assert go.lfs_pointer(sha, len(data)).startswith(b"version https://git-lfs.github.com/spec/v1\noid sha256:")
    assert go.lfs_pointer_oid(sha, len(data)) == go.blob_oid(go.lfs_pointer(sha, len(data)))
    # Sorting: a file "a.b", a directory "a" (sorted as "a/") and a file "a-c".
    (repo / "a").mkdir()
    (repo / "a" / "x").write_bytes(b"x")
    (repo / "a.b").write_bytes(b"ab")
    (repo / "a-c").write_bytes(b"ac")
    (repo / "f").unlink()
    git(repo, "add", "-A")
    expected = git(repo, "write-tree").strip()
    inner = go.tree_oid([go.TreeItem("x", go.blob_oid(b"x"))])
    assert go.tree_oid([go.TreeItem("a.b", go.blob_oid(b"ab")), go.TreeItem("a", inner, is_dir=True),
                     go.TreeItem("a-c", go.blob_oid(b"ac"))]) == expected
    assert go.tree_oid([]) == go.EMPTY_TREE_OID


GITIGNORE = "nested/*\n*.log\n!keep.log\nbuild/\n/top.txt\n# comment\n\\#literal\n"
IGNORE_PATHS = ["nested/file.bin", "nested/deeper/x", "a/nested/file.bin", "x.log", "sub/keep.log", "keep.log",
                "build/out.o", "src/build/out.o", "top.txt", "sub/top.txt", "#literal", "ok.txt"]


def test_gitignore_agrees_with_git_check_ignore(go, repo):
    (repo / ".gitignore").write_text(GITIGNORE)
    proc = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=repo, capture_output=True,
                          text=True, input="\n".join(IGNORE_PATHS) + "\n")
    expected = set(proc.stdout.split())
    rules = go.GitIgnore.parse(GITIGNORE)
    assert {p for p in IGNORE_PATHS if rules.ignores(p)} == expected
    assert "nested/file.bin" in expected and "sub/keep.log" not in expected




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
    tree = git(repo, "write-tree").strip()
    expected = git(repo, "rev-parse", f"{tree}:checkpoint-3").strip()
    assert folder_tree_oid(digests, manifest) == expected
    assert {p for p, d in digests.items() if d.lfs} == {"model.safetensors", "rng_state.pth"}
