"""CONTRIBUTING.md's map stays true: every module it names exists, every module is named."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_map_names_every_module_and_only_modules_that_exist() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    named = set(re.findall(r"`((?:ckpt_action|action)/[\w/]+\.(?:py|sh))`", text))
    for path in named:
        assert (ROOT / path).is_file(), f"CONTRIBUTING.md names {path}, which does not exist"
    localhub = re.search(r"\| local Hub \| `packages/ckpt-localhub/ckpt_localhub/` \| (.*) \|", text)
    assert localhub, "the local Hub row"
    local_names = set(re.findall(r"`(\w+)`", localhub.group(1)))
    for module in sorted(ROOT.glob("ckpt_action/**/*.py")):
        rel = module.relative_to(ROOT).as_posix()
        if module.name != "__init__.py" or rel == "ckpt_action/__init__.py":
            assert rel in named, f"{rel} is not on the map"
    # The local Hub, its own distribution: every module of its package by name.
    for module in sorted(ROOT.glob("packages/ckpt-localhub/ckpt_localhub/**/*.py")):
        rel = module.relative_to(ROOT).as_posix()
        assert module.stem in local_names or module.stem.startswith("__"), f"{rel} is not on the map"
