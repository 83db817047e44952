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



def _listing_one_file(xet: object) -> BucketStore:
    """A bucket store whose listing holds one file with this Xet hash (no request is made)."""
    from huggingface_hub import BucketFile

    class Api:
        def list_bucket_tree(self, bucket_id: str, prefix: str | None, recursive: bool) -> list[BucketFile]:
            return [BucketFile(type="file", path="checkpoint-1/w.bin", size=3, xetHash=xet)]

    return BucketStore(Settings("http://127.0.0.1:9"), "hf://buckets/org/ckpts", api=Api())  # type: ignore[arg-type]


@pytest.mark.parametrize("xet", ["\x1b[31m" + "a" * 59, "A" * 64, "a" * 63, 7])
def test_a_bucket_listing_with_a_malformed_xet_hash_is_refused(xet: object) -> None:
    """The listing's Xet hash is compared with the manifest's and may end up in a message:
    data from outside, checked like the listed size."""
    from ckpt_action.errors import IntegrityError

    with pytest.raises(IntegrityError, match="with a malformed Xet hash"):
        _listing_one_file(xet).files(LIVE, "checkpoint-1")
    assert _listing_one_file("a" * 64).files(LIVE, "checkpoint-1")["w.bin"].xet == "a" * 64
