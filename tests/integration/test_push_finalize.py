"""A push publishes its manifest only through the one finalize: a file the manifest lists
that the commit would not hold means no commit at all (not a commit found wrong afterwards)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

import ckpt_action as ckpt
from ckpt_action.errors import IntegrityError
from ckpt_action.ops import push as push_module
from tests.conftest import write_checkpoint

REPO = "org/finalize"


def _commits(hub: Any) -> list[Any]:
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.url)
    return [c for c in api.list_repo_commits(REPO) if c.title.startswith("Push")] if api.repo_exists(REPO) else []


def test_a_file_missing_at_finalize_means_no_commit(local_hub, tmp_path, monkeypatch):
    src = write_checkpoint(tmp_path / "out", {"a.bin": os.urandom(2000), "b.bin": os.urandom(3000)})
    add = push_module.LocalDir.add

    def misplaced(self: Any, subfolder: str, rel: str) -> Any:
        op = add(self, subfolder, rel)
        if rel != "b.bin":
            return op
        # A bug that sends b.bin somewhere else: the folder would not hold it.
        if hasattr(op, "path_in_repo"):
            op.path_in_repo = "elsewhere/b.bin"
            return op
        return dataclasses.replace(op, path="elsewhere/b.bin")

    monkeypatch.setattr(push_module.LocalDir, "add", misplaced)
    with pytest.raises(IntegrityError, match=r"b\.bin is missing; nothing was published"):
        ckpt.push(src, REPO, step=3, endpoint=local_hub.url)
    assert _commits(local_hub) == []
    assert ckpt.latest(REPO, endpoint=local_hub.url) is None
