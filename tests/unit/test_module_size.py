"""Rooms stay small: a module of the package or of the local Hub over about 400 lines says
in its docstring why it is one module (the word "lines" and the reason), so a long module is
a choice someone wrote down, not drift."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [ROOT / "ckpt_action", ROOT / "packages" / "ckpt-localhub" / "ckpt_localhub"]
LIMIT = 420  # "about 400"


def long_modules_without_a_reason() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") <= LIMIT:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "lines" not in doc:
                found.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    return found


def test_every_module_over_about_400_lines_says_why_in_its_docstring():
    assert long_modules_without_a_reason() == []
