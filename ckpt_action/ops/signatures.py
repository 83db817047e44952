"""The signature checks of pull and latest: before a byte is downloaded, and after.

Before: ``model.sig`` must verify against the trusted key, CA or identity, and cover exactly
the files and digests of the manifest (whose own digest it covers too); the signed
provenance statement must name the repo, folder and step being pulled. After: every
downloaded byte's sha256 must be the signed one, before anything appears in the target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ckpt_action.checkpoint.manifest import FileDigest, digest_bytes, expected_from_remote
from ckpt_action.checkpoint.provenance import PROVENANCE_NAME, Provenance
from ckpt_action.checkpoint.sealing import (
    BelowMinimumStep,
    check_before_download,
    check_policy,
    check_provenance,
    sha256_of,
)
from ckpt_action.checkpoint.signing import SIGNATURE_NAME, SignatureError
from ckpt_action.checkpoint.snapshot import Snapshot
from ckpt_action.checkpoint.verdict import satisfies
from ckpt_action.checkpoint.verifying import Verified, Verifier
from ckpt_action.errors import UnreadableManifest
from ckpt_action.stores.base import Store


@dataclass(frozen=True)
class SignatureCheck:
    verified: Verified
    provenance: Provenance | None
    read: dict[str, bytes] = field(default_factory=dict, repr=False)
    """The folder's files the check read (``model.sig``, the statement), each checked against
    the listing or the signature: a pull stages these bytes instead of downloading them again."""

    def after_download(self, digests: Mapping[str, FileDigest], *, partial: bool) -> None:
        """The bytes a pull staged (path -> digest of what was written) are the signed ones:
        all of them, or for a partial pull each one taken."""
        actual = sha256_of(digests)
        if partial:
            self.verified.covers_some(actual)
        else:
            self.verified.covers(actual)


def before_download(remote: Store, snap: Snapshot, verifier: Verifier, step: int | None, *,
                    partial: bool = False) -> SignatureCheck:
    """Check ``snap``'s signature (and its provenance) against ``verifier``; raises
    :class:`SignatureError` naming what failed."""
    if snap.manifest is None and partial:
        raise SignatureError(f"{snap.subfolder or 'the folder'} has no manifest: its signature can only be checked "
                             "on a pull of the whole folder (drop --include/--exclude)")
    read: dict[str, bytes] = {}
    signature = _read(remote, snap, SIGNATURE_NAME, read) if SIGNATURE_NAME in snap.files else None
    verified = check_before_download(verifier, signature, snap.manifest, snap.manifest_bytes)
    statement = _read(remote, snap, PROVENANCE_NAME, read) if PROVENANCE_NAME in snap.files else None
    provenance = check_provenance(verified, statement, remote.name, snap.subfolder, step)
    check_policy(verifier, snap.subfolder or "the folder", snap.manifest, provenance)
    return SignatureCheck(verified, provenance, read)


def latest_problem(remote: Store, sha: str, subfolder: str, verifier: Verifier, *,
                   read: Snapshot | None = None, manifest_bytes: bytes | None = None,
                   ) -> tuple[str | None, Snapshot | None, SignatureCheck | None]:
    """Why ``latest --verify-*`` passes over this (complete) folder, or None; with the
    snapshot it looked at and the check it made, for the pull that follows. What latest
    already read of the folder (``read``, or its ``manifest_bytes``) is not read again."""
    snap = read
    try:
        if snap is None:
            snap = remote.snapshot(sha, subfolder, manifest_bytes=manifest_bytes)
        if snap.manifest is None:
            return "it has no manifest, so its signature cannot be checked without downloading it", snap, None
        return None, snap, before_download(remote, snap, verifier, snap.manifest.step)
    except BelowMinimumStep:
        raise  # the newest verified checkpoint is too old: refused, not passed over for an older one
    except (SignatureError, UnreadableManifest) as exc:
        return str(exc), snap, None


def _read(remote: Store, snap: Snapshot, name: str, read: dict[str, bytes]) -> bytes:
    """One small file of the folder (bounded like a manifest), checked against the listing."""
    path = f"{snap.subfolder}/{name}" if snap.subfolder else name
    try:
        data = remote.read_small_file(snap.revision, path)
    except UnreadableManifest as exc:
        raise SignatureError(f"{name} cannot be read: {exc}") from exc
    assert data is not None
    want = expected_from_remote({name: snap.files[name]})[name]
    if want.sha256 is None and want.git_oid is None:  # a bucket lists a size only: the signature is the check
        if len(data) != want.size:
            raise SignatureError(f"{name} as read differs from what the Hub lists for it")
    elif not satisfies(digest_bytes(name, data), want):
        raise SignatureError(f"{name} as read differs from what the Hub lists for it")
    read[name] = data
    return data
