"""Which checkpoint folders a store's recursive listing holds (what :meth:`~.base.Store.catalog`
answers for ``list``): one rule for a model repo and a bucket."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import TypeVar

from ckpt_action.checkpoint.manifest import MANIFEST_NAME
from ckpt_action.handle import step_of
from ckpt_action.stores.hub.repo import folder_problem, skip_name

T = TypeVar("T")


def group_checkpoints(files: Iterable[tuple[str, T]]) -> dict[str, dict[str, T]]:
    """The checkpoint folders of a recursive listing's files (each path from the store's root,
    with what the store says of it): every top-level folder named with a step that holds a
    file, and every folder holding a manifest, each with its files (paths relative to it; a
    file belongs to the deepest such folder above it). A folder name that is not usable is
    skipped with a warning.

    >>> grouped = group_checkpoints([("checkpoint-2/a.bin", 1), ("runs/x/ckpt-manifest.json", 2), ("README.md", 3)])
    >>> sorted(grouped.items())
    [('checkpoint-2', {'a.bin': 1}), ('runs/x', {'ckpt-manifest.json': 2})]
    """
    listed = list(files)
    candidates = {top for path, _item in listed if "/" in path and step_of(top := path.split("/", 1)[0]) is not None}
    candidates |= {posixpath.dirname(path) for path, _item in listed
                   if posixpath.basename(path) == MANIFEST_NAME and posixpath.dirname(path)}
    roots: set[str] = set()
    for root in sorted(candidates):
        why = folder_problem(root)
        if why is None:
            roots.add(root)
        else:
            skip_name(root, why)
    grouped: dict[str, dict[str, T]] = {root: {} for root in roots}
    for path, item in listed:
        if (owner := owner_of(path, roots)) is not None:
            grouped[owner][path[len(owner) + 1:]] = item
    return grouped


def owner_of(path: str, roots: Iterable[str]) -> str | None:
    """The checkpoint folder a listed path belongs to: the deepest root above it."""
    return max((r for r in roots if path.startswith(r + "/")), key=len, default=None)
