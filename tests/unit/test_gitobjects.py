"""Git and Hub object facts, checked against git itself where git has an opinion."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckpt_action.checkpoint import gitobjects
from ckpt_action.checkpoint.gitobjects import (
    DEFAULT_ATTRIBUTES,
    DEFAULT_GITATTRIBUTES,
    GitAttributes,
    is_lfs,
)

ROOT = Path(__file__).resolve().parents[2]


# Paths whose LFS fate under a .gitattributes is decided by git's pattern rules.


def test_default_attributes_are_the_hub_file():
    assert DEFAULT_GITATTRIBUTES.splitlines()[0] == b"*.7z filter=lfs diff=lfs merge=lfs -text"
    assert len(DEFAULT_GITATTRIBUTES.splitlines()) == len(gitobjects.HUB_LFS_PATTERNS) == 35
    assert DEFAULT_ATTRIBUTES.tracks_lfs("x/y.safetensors") and not DEFAULT_ATTRIBUTES.tracks_lfs("x/y.json")


@pytest.mark.parametrize(("path", "size", "sample", "lfs"), [
    ("config.json", 100, b'{"a": 1}', False),
    ("data.raw", 100, b"ab\x00cd", True),
    ("late-nul.raw", 1000, b"a" * 512 + b"\x00", False),  # only the first 512 bytes count
    ("big.txt", 10 * 1024 * 1024, b"text", True),
    ("almost.txt", 10 * 1024 * 1024 - 1, b"text", False),
    ("saved_model/README.txt", 5, b"text", True),
    ("empty.bin", 0, b"", False),
])
def test_is_lfs_with_the_default_attributes(path, size, sample, lfs):
    assert is_lfs(path, size, sample) is lfs


def test_is_lfs_uses_the_given_attributes():
    custom = GitAttributes.parse(b"*.dat filter=lfs\n*.bin -filter\n")
    assert is_lfs("x.dat", 3, b"abc", custom) and not is_lfs("x.dat", 3, b"abc")
    assert not is_lfs("w.bin", 3, b"abc", custom) and is_lfs("w.bin", 3, b"abc")


def _ckpt_imports(path: Path) -> set[str]:
    """Modules of ckpt_action a source file imports, as dotted names."""
    import ast

    package = "ckpt_action." + ".".join(path.relative_to(ROOT / "ckpt_action").with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rstrip(".").split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join([*base, *(node.module.split(".") if node.module else [])]))
            elif node.module and node.module.startswith("ckpt_action"):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ckpt_action")}
    return found


def test_the_local_hub_takes_only_git_facts_from_the_core():
    # The git/LFS facts and the one file lock, neither of which imports anything of ckpt-action.
    shared = {"ckpt_action.checkpoint.gitobjects", "ckpt_action.filelock"}
    for module in shared:
        assert _ckpt_imports(ROOT / (module.replace(".", "/") + ".py")) == set(), module
    for path in sorted((ROOT / "ckpt_action/localhub").rglob("*.py")):
        outside = {m for m in _ckpt_imports(path) if not m.startswith("ckpt_action.localhub")}
        assert outside <= shared, f"{path.name} imports {outside}"
