"""Git and Hub object facts, checked against git itself where git has an opinion.

Both copies are held to git: the client's (``ckpt_action.checkpoint.gitobjects``) and the local
Hub's own (``ckpt_localhub.gitobjects``), so a bug in one cannot agree with itself on both sides."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIES = ["ckpt_action.checkpoint.gitobjects", "ckpt_localhub.gitobjects"]


@pytest.fixture(params=COPIES)
def go(request: pytest.FixtureRequest):
    """One copy of the git object code: every test below runs against each."""
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
