"""The store a name opens, and the repo store as the store interface (no request is made)."""

from __future__ import annotations

import hashlib

import pytest

from ckpt_action.errors import InputError
from ckpt_action.settings import Settings
from ckpt_action.stores import LIVE, BucketStore, RepoStore, Store, open_store


def test_a_plain_repo_id_opens_the_repo_store_pinned_by_commit() -> None:
    store: Store = open_store(Settings("http://127.0.0.1:9"), "org/run")
    assert isinstance(store, RepoStore) and store.kind == "repo" and store.name == "org/run"
    assert store.pin_of("a" * 40, "checkpoint-8", b"{}") == "a" * 40
    identity = store.identity("checkpoint-8", 8)
    assert (identity.store, identity.folder, identity.step) == ("http://127.0.0.1:9/org/run", "checkpoint-8", 8)


def test_a_bucket_uri_opens_the_bucket_store_pinned_by_its_manifests() -> None:
    store: Store = open_store(Settings("http://127.0.0.1:9"), "hf://buckets/org/ckpts/run-7")
    assert isinstance(store, BucketStore) and store.kind == "bucket" and store.name == "hf://buckets/org/ckpts/run-7"
    assert (store.bucket_id, store.prefix) == ("org/ckpts", "run-7")
    assert store.pin_of(LIVE, "checkpoint-8", b"{}") == "sha256:" + hashlib.sha256(b"{}").hexdigest()
    with pytest.raises(InputError, match="a bucket has no branches, tags or commits"):
        store.resolve("main")


