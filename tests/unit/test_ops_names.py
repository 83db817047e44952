"""Each operation has one name in ``ops/`` (issue 40: two functions named ``latest`` and two
named ``prune`` there), and prune's plan and execution live in one module."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

OPS = Path(__file__).resolve().parents[2] / "ckpt_action" / "ops"


def _defined() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for module in sorted(OPS.glob("*.py")):
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                where[node.name].append(module.stem)
    return where


def test_no_two_public_functions_or_classes_of_ops_share_a_name():
    twice = {name: modules for name, modules in _defined().items() if len(modules) > 1}
    assert not twice, f"one name each in ops/: {twice}"


def test_prunes_plan_commit_and_order_are_one_module():
    where = _defined()
    for name in ("PrunePlan", "plan_prune", "prune_commit", "prune", "PruneResult", "tagged_folders"):
        assert where.get(name) == ["prune"], (name, where.get(name))
