"""What signing adds to a checkpoint folder, and what a pull checks before it downloads.

A signed push or promote writes three files in its last commit: the provenance statement
(listed in the manifest like any file), the manifest, and ``model.sig`` over every file of
the folder (the manifest included; ``model.sig`` is the one file the manifest does not list).
All digests come from the manifest being written: nothing is read again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ckpt_action.checkpoint.manifest import MANIFEST_NAME, PULL_RECORD_NAME, FileDigest, Manifest, digest_bytes
from ckpt_action.checkpoint.provenance import PROVENANCE_NAME, Provenance
from ckpt_action.checkpoint.signing import SIGNATURE_NAME, LoadedSigner, SignatureError
from ckpt_action.checkpoint.verifying import Verified, Verifier
from ckpt_action.errors import InputError, param, param_on

WRITTEN = (SIGNATURE_NAME, PROVENANCE_NAME)
"""Files a signed push writes itself: never taken from the dir being pushed (a pulled,
signed checkpoint pushed again gets fresh ones, or none when unsigned)."""


def refuse_written_folders(local_dir: Path, *, signed: bool) -> None:
    """A push writes the manifest beside the files, a signed push also ``model.sig`` and the
    provenance statement: a folder of ``local_dir`` with one of those names would collide
    with them only at the last commit, after the repo was made and the files uploaded.
    Refused before any request."""
    for name in (MANIFEST_NAME, *WRITTEN) if signed else (MANIFEST_NAME,):
        if os.path.isdir(local_dir / name):
            who = (f"a signed push writes ({param('signing_key')}/{param('sign_keyless')})" if name in WRITTEN
                   else "every push writes")
            raise InputError(f"{param('local_dir')} has a folder {name!r}, the name of a file {who}: rename it",
                             param="local_dir")


@dataclass(frozen=True)
class Sealed:
    manifest: bytes
    provenance: bytes
    signature: bytes
    signer: str


def with_provenance(files: Mapping[str, FileDigest], provenance: Provenance) -> tuple[dict[str, FileDigest], bytes]:
    """The folder's files with its provenance statement added, and the statement's bytes."""
    data = provenance.to_json()
    return {**files, PROVENANCE_NAME: digest_bytes(PROVENANCE_NAME, data)}, data


def model_name(repo: str, subfolder: str) -> str:
    """The statement's subject name (model-signing uses the dir's name; only informative)."""
    return subfolder.rstrip("/").rpartition("/")[2] or repo.rpartition("/")[2]


def signed_digests(files: Mapping[str, FileDigest], manifest_bytes: bytes) -> dict[str, str]:
    """What ``model.sig`` covers: every listed file's sha256 and the manifest's own."""
    out = {MANIFEST_NAME: hashlib.sha256(manifest_bytes).hexdigest()}
    for rel, digest in files.items():
        if digest.sha256 is None:
            raise SignatureError(f"{rel} has no sha256 in the manifest: a checkpoint pushed by ckpt-action can be "
                                 "signed, this one cannot without reading it")
        out[rel] = digest.sha256
    return out


def seal(signer: LoadedSigner, manifest: Manifest, provenance: bytes, name: str) -> Sealed:
    """Sign a manifest that already lists the provenance statement."""
    if PROVENANCE_NAME not in manifest.files:
        raise ValueError("the manifest must list the provenance statement it is signed with")
    data = manifest.to_json()
    # A pulled copy holds the pull's record besides the checkpoint: model-signing's verifier
    # is told to skip it, so `model_signing verify` passes on a pulled dir as it is.
    signed = signer.sign(signed_digests(manifest.files, data), name, also_ignore=(PULL_RECORD_NAME,))
    return Sealed(data, provenance, signed.data, signed.signer)


def check_before_download(verifier: Verifier, signature: bytes | None, manifest: Manifest | None,
                          manifest_bytes: bytes | None) -> Verified:
    """The signature, checked before a byte is downloaded: by the trusted signer, and, for a
    folder with a manifest (its listing already matched it), over exactly the manifest's
    files and digests and the manifest itself. The downloaded bytes are checked after."""
    verified = verifier.open(signature)
    if manifest is not None and manifest_bytes is not None:
        verified.covers(signed_digests(manifest.files, manifest_bytes))
    return verified


def check_provenance(verified: Verified, data: bytes | None, repo: str, subfolder: str,
                     step: int | None) -> Provenance | None:
    """The signed statement of where the checkpoint belongs, checked against where it was
    found (None: the signer wrote none, e.g. model-signing's own CLI)."""
    want = verified.digests.get(PROVENANCE_NAME)
    if want is None:
        return None
    if data is None or hashlib.sha256(data).hexdigest() != want:
        raise SignatureError(f"{PROVENANCE_NAME} is not the signed one")
    provenance = Provenance.from_json(data)
    provenance.check(repo, subfolder, step)
    return provenance


class BelowMinimumStep(SignatureError):
    """A checkpoint whose signed step is below ``verify_min_step``: an older signed
    checkpoint put back (a rollback). ``latest`` refuses it rather than passing over it."""


def check_policy(verifier: Verifier, where: str, manifest: Manifest | None, provenance: Provenance | None) -> None:
    """What the user asked of a verified checkpoint beyond its signature: a signed
    provenance statement (``verify_require_provenance``), a signed step of at least
    ``verify_min_step`` (the manifest's, which the signature covers, else the statement's)."""
    config = verifier.config
    if config.require_provenance and provenance is None:
        raise SignatureError(f"{where} has no signed {PROVENANCE_NAME} (it was signed by another tool, or not for a"
                             f" place): {param_on('verify_require_provenance')} refuses it")
    if config.min_step is None:
        return
    step = manifest.step if manifest is not None else provenance.step if provenance is not None else None
    if step is None:
        raise BelowMinimumStep(f"{where} has no signed step: {param('verify_min_step')} {config.min_step} refuses it")
    if step < config.min_step:
        raise BelowMinimumStep(f"{where} holds step {step}; {param('verify_min_step')} asks for {config.min_step}"
                               " or later: an older signed checkpoint (a rollback?) is refused")


def sha256_of(digests: Mapping[str, FileDigest]) -> dict[str, str]:
    """Relative path -> sha256 of bytes a pull hashed (the signature itself left out)."""
    return {rel: d.sha256 for rel, d in digests.items() if rel != SIGNATURE_NAME and d.sha256 is not None}
