"""Docstring examples either run or are plain code blocks: a ``+SKIP`` doctest always
reports "skipped" and proves nothing, so none may come back."""

from __future__ import annotations

from tests.conftest import ROOT


def test_no_doctest_is_skipped():
    marker = "doctest: +" + "SKIP"  # split, so this file does not hold the marker itself
    found = [f"{path.relative_to(ROOT)}:{n}" for base in ("ckpt_action", "tests", "bench", "scripts")
             for path in sorted((ROOT / base).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if marker in line]
    assert not found, found
