"""The store a name opens, and the repo store as the store interface (no request is made)."""

from __future__ import annotations

import pytest

from ckpt_action.errors import InputError
from ckpt_action.settings import Settings
from ckpt_action.stores import RepoStore, Store, open_store


def test_a_plain_repo_id_opens_the_repo_store_pinned_by_commit() -> None:
    store: Store = open_store(Settings("http://127.0.0.1:9"), "org/run")
    assert isinstance(store, RepoStore) and store.kind == "repo" and store.name == "org/run"
    assert store.pin_of("a" * 40, "checkpoint-8", b"{}") == "a" * 40
    identity = store.identity("checkpoint-8", 8)
    assert (identity.store, identity.folder, identity.step) == ("http://127.0.0.1:9/org/run", "checkpoint-8", 8)


def test_a_bucket_uri_is_refused_until_the_bucket_store_exists() -> None:
    with pytest.raises(InputError, match="hf://buckets/org/ckpts: Storage Buckets"):
        open_store(Settings("http://127.0.0.1:9"), "hf://buckets/org/ckpts")
