"""Bucket names: ``hf://buckets/ORG/NAME[/prefix]`` wherever a repo is named, checked as data."""

from __future__ import annotations

import pytest

from ckpt_action import names
from ckpt_action.errors import InputError, IntegrityError
from ckpt_action.handle import CheckpointHandle

PIN = "sha256:" + "ab" * 32


def test_a_bucket_uri_is_a_repo_and_parses_with_its_prefix():
    assert names.repo_id("hf://buckets/org/ckpts") == "hf://buckets/org/ckpts"
    assert names.repo_id("hf://buckets/org/ckpts/run-7/") == "hf://buckets/org/ckpts/run-7"
    assert names.bucket("hf://buckets/org/ckpts/run-7/a") == ("org/ckpts", "run-7/a")
    assert names.bucket("hf://buckets/org/ckpts") == ("org/ckpts", "")
    assert names.bucket("org/ckpts") is None  # a plain OWNER/NAME stays a model repo
    assert names.repo_id("org/ckpts") == "org/ckpts"


@pytest.mark.parametrize("bad", ["hf://buckets/org", "hf://buckets/org/", "hf://buckets/-org/x",
                                 "hf://buckets/org/x/../y", "hf://buckets/org/x/.git", "hf://buckets/org/x//y",
                                 "hf://buckets/org/x\n", "hf://models/org/x", "hf://buckets/org/x/a b"])
def test_a_bad_bucket_uri_is_refused_with_what_to_change(bad):
    with pytest.raises(InputError) as exc:
        names.repo_id(bad)
    assert "hf://buckets/OWNER/NAME" in str(exc.value) or "OWNER/NAME" in str(exc.value)


def test_a_bucket_pin_is_a_revision_and_a_handle_revision():
    assert names.revision(PIN) == PIN
    assert names.bucket("hf://buckets/org/x/a") == ("org/x", "a")
    with pytest.raises(InputError):
        names.revision("sha256:" + "AB" * 32)
    h = CheckpointHandle("hf://buckets/org/ckpts/run-7", "checkpoint-5", PIN, 5, "http://hub")
    assert h.hub_url == "http://hub/buckets/org/ckpts/tree/run-7/checkpoint-5"
    with pytest.raises(IntegrityError):
        CheckpointHandle("org/ckpts", "checkpoint-5", PIN, 5, "http://hub")  # a repo is pinned by commit
    with pytest.raises(IntegrityError):
        CheckpointHandle("hf://buckets/org/ckpts", "checkpoint-5", "a" * 40, 5, "http://hub")


def test_a_pointer_records_the_bucket_uri_and_the_pin_and_reads_back_as_the_same_handle():
    from ckpt_action.wandb.format import parse_pointer

    h = CheckpointHandle("hf://buckets/org/ckpts/run-7", "checkpoint-5", PIN, 5, "http://hub:8000")
    assert parse_pointer(h.to_dict()) == h
    with pytest.raises(InputError):
        parse_pointer(h.to_dict() | {"revision": "a" * 40})  # a bucket is pinned by its manifest, not a commit
    with pytest.raises(InputError):
        parse_pointer(h.to_dict() | {"hub_url": "http://hub:8000/org/ckpts/tree/x/checkpoint-5"})
