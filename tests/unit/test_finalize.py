"""The one finalize every writer publishes a manifest through: the checkpoint's identity
(store, folder, step) the one every contributor agreed on, and every file the manifest lists
there, with its size and digest, in what is about to be published."""

from __future__ import annotations

import pytest

from ckpt_action.checkpoint.manifest import Manifest, RemoteFile, digest_bytes
from ckpt_action.errors import IntegrityError
from ckpt_action.stores.finalize import FinalizeRefused, Identity, finalize

ME = Identity(store="http://hub/org/run", folder="checkpoint-8", step=8)
A, B = digest_bytes("a.bin", b"a" * 100), digest_bytes("b.bin", b"b" * 50)


def _manifest(**files) -> bytes:
    return Manifest(files=dict(files), step=8, complete=True).to_json()


def test_a_manifest_whose_files_are_all_there_and_agreed_on_passes() -> None:
    finalize(ME, _manifest(**{"a.bin": A, "b.bin": B}), contributors=[ME, ME],
             publishing={"a.bin": A, "b.bin": RemoteFile(B.size, B.git_oid, None)})


@pytest.mark.parametrize(("other", "named"), [
    (Identity("http://hub/org/run", "checkpoint-8", 9), "step"),
    (Identity("http://hub/org/run", "checkpoint-9", 8), "folder"),
    (Identity("http://hub/org/other", "checkpoint-8", 8), "store"),
])
def test_a_contributor_that_reports_another_checkpoint_is_refused_naming_it(other, named) -> None:
    with pytest.raises(FinalizeRefused) as caught:
        finalize(ME, _manifest(**{"a.bin": A}), contributors=[ME, other], publishing={"a.bin": A})
    assert isinstance(caught.value, IntegrityError)
    assert "contributor 1" in str(caught.value) and named in str(caught.value), caught.value
    assert "nothing was published" in str(caught.value)


def test_the_identity_the_manifest_itself_states_must_be_the_agreed_one() -> None:
    other_step = Manifest(files={"a.bin": A}, step=9, complete=True).to_json()
    with pytest.raises(FinalizeRefused, match="step"):
        finalize(ME, other_step, contributors=[ME], publishing={"a.bin": A})


def test_a_file_missing_at_finalize_is_refused_naming_it() -> None:
    with pytest.raises(FinalizeRefused, match=r"b\.bin is missing"):
        finalize(ME, _manifest(**{"a.bin": A, "b.bin": B}), contributors=[ME], publishing={"a.bin": A})


@pytest.mark.parametrize("got", [digest_bytes("b.bin", b"b" * 49), digest_bytes("b.bin", b"c" * 50),
                                 RemoteFile(50, "0" * 40, None), RemoteFile(50, None, "0" * 64)])
def test_a_file_of_another_size_or_digest_is_refused(got) -> None:
    with pytest.raises(FinalizeRefused, match=r"b\.bin"):
        finalize(ME, _manifest(**{"a.bin": A, "b.bin": B}), contributors=[ME],
                 publishing={"a.bin": A, "b.bin": got})


def test_an_incomplete_or_unreadable_manifest_is_not_finalized() -> None:
    with pytest.raises(FinalizeRefused, match="incomplete"):
        finalize(ME, Manifest(files={"a.bin": A}, step=8, complete=False, created_at="").to_json(),
                 contributors=[ME], publishing={"a.bin": A})
    with pytest.raises(FinalizeRefused):
        finalize(ME, b"not json", contributors=[ME], publishing={})


def test_no_contributor_is_no_agreement() -> None:
    with pytest.raises(FinalizeRefused, match="contributor"):
        finalize(ME, _manifest(**{"a.bin": A}), contributors=[], publishing={"a.bin": A})
